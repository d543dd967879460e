"""How the chunker measures text: one `Sizer` for packing and overlap alike.

A `Sizer` counts a text (call it), counts a join of texts already counted
(`count_joined`, `count_with_sep`) and encodes and decodes (overlap cuts a sentence to a
number of tokens). Every pass takes one and nothing else reaches for a tokenizer.

Exact token counts of joined texts without encoding them a second time:

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

The identity is derived from cl100k_base's pre-tokenizer, so the shortcut is taken for
that encoding only (`EXACT_JOIN_ENCODINGS`). Others differ where it matters: r50k/p50k
(GPT-2) split `\n\n` before a word into two pre-tokens, and o200k's punctuation
pre-token runs on through newlines into a following `/`. For them, and for a bare count
function whose encoding is unknown, every join is counted as text: slower, never wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from firechunk.tokens import TokenCounter

Count = Callable[[str], int]  # a `Sizer`, or any function that counts a text's tokens
EXACT_JOIN_ENCODINGS = frozenset({"cl100k_base"})


class Sizer:
    """Counts, encodes and decodes with one tiktoken encoding; knows whether the join
    shortcut is exact for it. Called with a text, it returns the text's token count."""

    def __init__(self, counter: TokenCounter) -> None:
        self.encoding = counter.encoding_name
        self.exact_joins = counter.encoding_name in EXACT_JOIN_ENCODINGS
        self._encode_ordinary = counter.encode
        self.encode, self.decode, self.count = counter.encode, counter.decode, counter.count

    def __call__(self, text: str) -> int:
        return len(self._encode_ordinary(text))


def _exact_joins(count: Count) -> bool:
    return getattr(count, "exact_joins", False)


def joinable(sep: str) -> bool:
    """Separators for which the identity above holds."""
    return sep.endswith("\n") and not sep.strip()


def count_with_sep(text: str, tokens: int, sep: str, count: Count) -> int:
    """Tokens of `text + sep`, given `tokens` = count(text) and a joinable `sep`."""
    if not _exact_joins(count):
        return count(text + sep)
    tail = "" if text[-1:].isalnum() else _tail(text)  # the common case first
    if tail is None:  # ends in white space: no short cut
        return count(text + sep)
    return tokens + _delta(count, tail, sep)


@lru_cache(maxsize=4096)
def _delta(count: Count, tail: str, sep: str) -> int:
    return count(tail + sep) - count(tail)


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


def count_joined(parts: list[tuple[str, int]], seps: list[str], count: Count) -> int | None:
    """Tokens of parts[0] + seps[0] + parts[1] + …, or None when a separator is not joinable
    (the caller then counts the joined text itself)."""
    if not _exact_joins(count) or not all(joinable(sep) for sep in seps):
        return None
    if not all(_starts_with_text(text) for text, _ in parts[1:]):
        return None  # leading white space would run into the separator's pre-token
    total = parts[-1][1]
    for (text, tokens), sep in zip(parts, seps, strict=False):
        total += count_with_sep(text, tokens, sep, count)
    return total
