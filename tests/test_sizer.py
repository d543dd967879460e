"""The sizer: the join shortcut is taken only where it is exact, and then it is exact."""

from __future__ import annotations

from firechunk.chunker.sizer import EXACT_JOIN_ENCODINGS, Sizer, count_joined, count_with_sep
from firechunk.tokens import TokenCounter

PARTS = ["Install the client.", "Then call `create()`:", "done!", "A last paragraph"]


def test_joins_are_counted_exactly_from_the_parts_for_cl100k():
    sizer = Sizer(TokenCounter("cl100k_base"))
    parts = [(text, sizer(text)) for text in PARTS]
    for sep in ("\n", "\n\n", "\n   \n"):
        joined = sep.join(PARTS)
        assert count_joined(parts, [sep] * (len(PARTS) - 1), sizer) == sizer(joined), sep
        assert count_with_sep(PARTS[1], parts[1][1], sep, sizer) == sizer(PARTS[1] + sep)


def test_without_a_known_exact_encoding_every_join_is_counted_as_text():
    exact = Sizer(TokenCounter("cl100k_base"))
    counted: list[str] = []

    def bare(text: str) -> int:  # a count function whose encoding nobody knows
        counted.append(text)
        return exact(text)

    parts = [(text, exact(text)) for text in PARTS]
    assert count_joined(parts, ["\n\n"] * (len(PARTS) - 1), bare) is None  # caller counts
    assert count_with_sep(PARTS[0], parts[0][1], "\n\n", bare) == exact(PARTS[0] + "\n\n")
    assert counted == [PARTS[0] + "\n\n"]  # the whole text, not a tail of it
    assert "cl100k_base" in EXACT_JOIN_ENCODINGS and exact.exact_joins
