"""How the chunker measures text: one `Sizer`, for packing and overlap alike.

Every pass that needs a size takes a `Sizer` and nothing else reaches for a tokenizer:

    sizer(text)                       tokens of a text (also `sizer.count(text)`)
    sizer.joined(parts, seps)         tokens of counted parts joined by separators
    sizer.with_sep(text, tokens, sep) tokens of a counted text with a separator after it
    sizer.tail(text, limit)           the end of a text within `limit` tokens, None when
                                      all of it fits (overlap cuts a sentence to a budget)

Counting a join from its parts' counts (the join shortcut):

tiktoken first cuts text into pre-tokens with a regex, then applies BPE inside each
pre-token, so a count is the sum over pre-tokens. No cl100k pre-token runs past a
newline into a following non-newline character, so in `a + sep + b`, with `sep` made of
whitespace ending in a newline and `b` not starting with a newline, the pre-tokens are
those of `a + sep` followed by those of `b`. For the same reason `a + sep` differs from
`a` only in its last line. Hence:

    count(a + sep + b) = count(a) + [count(tail + sep) - count(tail)] + count(b)

when `b`'s first line is not blank, where `tail` is the end of `a` that a separator can
change: nothing after a letter or digit, the closing run of punctuation otherwise. Two
counts of a few characters, mostly cached, replace a pass over the whole text. The
chunker counts every block once and derives chunk and page counts from these; the tests
recount every chunk to hold this to account.
"""

from __future__ import annotations

from functools import lru_cache

from firechunk.tokens import Sizer as TokenSizer
from firechunk.tokens import TokenCounter

# The encodings whose pre-tokenizer the identity above is derived from and holds for.
EXACT_JOIN_ENCODINGS = frozenset({"cl100k_base"})


class Sizer:
    """Counts text in one encoding (a tiktoken `TokenCounter`, or any `firechunk.tokens.Sizer`
    a library caller gives, such as a Hugging Face tokenizer's); counts joins of texts
    already counted without counting the joined text where that is exact.

    The join shortcut (`joined`, `with_sep`) is exact for cl100k_base, the one encoding
    in `EXACT_JOIN_ENCODINGS`, and is taken only there, and only when the separators are
    white space ending in a newline and every part after the first starts with a line
    that is not blank (the identity's conditions, module docstring); a part that ends in
    white space is counted with the separator after it. Otherwise, and for every other
    encoding, the joined text is built and counted whole: slower, never wrong.
    Other encodings differ where it matters: r50k/p50k (GPT-2) split `\\n\\n` before a
    word into two pre-tokens, and o200k's punctuation pre-token runs on through newlines
    into a following `/`. Any other sizer (Hugging Face's) counts every join whole.
    """

    def __init__(self, counter: TokenSizer) -> None:
        self.encoding = counter.encoding_name
        self.exact_joins = (
            isinstance(counter, TokenCounter) and counter.encoding_name in EXACT_JOIN_ENCODINGS
        )
        self.count = counter.count
        self.tail = counter.tail

    def __call__(self, text: str) -> int:
        return self.count(text)

    def joined(self, parts: list[tuple[str, int]], seps: list[str]) -> int:
        """Tokens of parts[0] + seps[0] + parts[1] + …, each part a (text, tokens) pair."""
        if not self._exact_for(parts, seps):
            return self.count(_join(parts, seps))
        total = parts[-1][1]
        for (text, tokens), sep in zip(parts[:-1], seps, strict=True):
            total += self._with_joinable_sep(text, tokens, sep)
        return total

    def with_sep(self, text: str, tokens: int, sep: str) -> int:
        """Tokens of `text + sep`, given `tokens`, the count of `text`."""
        if not (self.exact_joins and joinable(sep)):
            return self.count(text + sep)
        return self._with_joinable_sep(text, tokens, sep)

    def _exact_for(self, parts: list[tuple[str, int]], seps: list[str]) -> bool:
        """Whether the shortcut is exact for this join (see the class docstring)."""
        return (
            self.exact_joins
            and all(joinable(sep) for sep in seps)
            and all(_starts_with_text(text) for text, _ in parts[1:])
        )

    def _with_joinable_sep(self, text: str, tokens: int, sep: str) -> int:
        tail = "" if text[-1:].isalnum() else _tail(text)  # the common case first
        if tail is None:  # ends in white space: no short cut
            return self.count(text + sep)
        return tokens + _delta(self, tail, sep)


def joinable(sep: str) -> bool:
    """Separators for which the identity holds: white space ending in a newline."""
    return sep.endswith("\n") and not sep.strip()


@lru_cache(maxsize=4096)
def _delta(sizer: Sizer, tail: str, sep: str) -> int:
    """What `sep` adds to a text ending in `tail`."""
    return sizer.count(tail + sep) - sizer.count(tail)


def _join(parts: list[tuple[str, int]], seps: list[str]) -> str:
    return parts[0][0] + "".join(sep + text for sep, (text, _) in zip(seps, parts[1:], strict=True))


def _starts_with_text(text: str) -> bool:
    """The first line has something besides white space."""
    if text[:1] and not text[0].isspace():  # the common case, without finding the line
        return True
    return bool(text[: text.find("\n") if "\n" in text else len(text)].strip())


def _tail(text: str) -> str | None:
    """The end of `text` whose pre-tokens change when a separator follows.

    After a letter or digit nothing changes (""); after punctuation, the run of
    punctuation (with one space before it) takes the newlines into its pre-token.
    """
    if not text or text[-1].isspace():
        return None
    if text[-1].isalnum():
        return ""
    start = len(text) - 1
    while start > 0 and not text[start - 1].isspace() and not text[start - 1].isalnum():
        start -= 1
    if start >= 2 and text[start - 1] == " " and not text[start - 2].isspace():
        start -= 1
    elif start >= 1 and text[start - 1].isspace():
        return text[text.rfind("\n", 0, start) + 1 :]  # after odd white space: the line
    return text[start:]
