"""The sizer: the join shortcut is taken only where it is exact, and then it is exact."""

from __future__ import annotations

from firechunk.chunker.cleanup import clean_markdown
from firechunk.chunker.page import chunk_page
from firechunk.chunker.sizer import EXACT_JOIN_ENCODINGS, Sizer
from firechunk.tokens import TokenCounter

PARTS = ["Install the client.", "Then call `create()`:", "done!", "A last paragraph"]


class SpyCounter(TokenCounter):
    """A cl100k counter that records every text it counts, under any encoding name."""

    def __init__(self, encoding_name: str) -> None:
        super().__init__()
        self.encoding_name = encoding_name
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return super().count(text)


def test_joins_are_counted_exactly_from_the_parts_for_cl100k():
    sizer = Sizer(TokenCounter("cl100k_base"))
    parts = [(text, sizer(text)) for text in PARTS]
    for sep in ("\n", "\n\n", "\n   \n"):
        joined = sep.join(PARTS)
        assert sizer.joined(parts, [sep] * (len(PARTS) - 1)) == sizer(joined), sep
        assert sizer.with_sep(PARTS[1], parts[1][1], sep) == sizer(PARTS[1] + sep)


def test_for_cl100k_the_joined_text_is_never_counted_whole():
    spy = SpyCounter("cl100k_base")
    sizer = Sizer(spy)
    parts = [(text, sizer(text)) for text in PARTS]
    spy.counted.clear()
    sizer.joined(parts, ["\n\n"] * (len(PARTS) - 1))
    assert spy.counted  # the ends of parts that close in punctuation, with a separator
    assert all(len(text) <= len("()`:\n\n") for text in spy.counted), spy.counted


def test_without_a_known_exact_encoding_every_join_is_counted_as_text():
    spy = SpyCounter("an encoding the identity was not derived for")
    sizer, exact = Sizer(spy), Sizer(TokenCounter("cl100k_base"))
    parts = [(text, exact(text)) for text in PARTS]
    joined = "\n\n".join(PARTS)
    assert sizer.joined(parts, ["\n\n"] * (len(PARTS) - 1)) == exact(joined)
    assert sizer.with_sep(PARTS[0], parts[0][1], "\n\n") == exact(PARTS[0] + "\n\n")
    assert spy.counted == [joined, PARTS[0] + "\n\n"]  # whole texts, not tails of them
    assert "cl100k_base" in EXACT_JOIN_ENCODINGS and exact.exact_joins
    assert not sizer.exact_joins


def test_where_the_identity_does_not_hold_the_joined_text_is_counted():
    spy = SpyCounter("cl100k_base")
    sizer = Sizer(spy)
    cases = [
        (["Intro.", "\t\n    code()"], "\n"),  # a part opening with a blank line
        (["Intro.", "More."], "\n  "),  # a separator that does not end in a newline
    ]
    for texts, sep in cases:
        parts = [(text, sizer(text)) for text in texts]
        spy.counted.clear()
        assert sizer.joined(parts, [sep]) == sizer(sep.join(texts))
        assert spy.counted[0] == sep.join(texts)


def test_a_page_count_taken_from_its_block_counts_is_exact():
    # Blank lines around the blocks, link definitions no block claims, and a code block
    # whose first line is blank (a tab): the page is counted from its blocks' counts only
    # where that is exact, and as a whole text otherwise.
    pages = [
        "\n\n# H\n\nSome words here, and more.\n\n\n",
        "[x]: https://example.com/a\n\n# H\n\nSome paragraph here.\n",
        "\n\n[x]: https://example.com/a\n\nSome paragraph here.",
        "\n\t\n    code()\n\nSome paragraph.",
        "Para.\n\n  \n",
    ]
    sizer = Sizer(TokenCounter("cl100k_base"))
    for markdown in pages:
        cleaned = "\n".join(clean_markdown(markdown).lines)
        assert chunk_page(markdown, "T", sizer).tokens_after == sizer(cleaned), markdown
