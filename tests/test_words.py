"""Counts said with their noun in the right number, and what a run reused said alike by
`firechunk chunk` and the flow's log."""

from __future__ import annotations

from firechunk.words import counted, pages_phrase, reuse_phrase


def test_one_is_singular_and_every_other_count_plural():
    assert counted(1, "page") == "1 page"
    assert counted(0, "page") == "0 pages"
    assert counted(2, "alias", "aliases") == "2 aliases"


def test_reuse_says_why_nothing_was_reused():
    assert reuse_phrase(11, 0, "run-a", full=False) == "11 reused from run run-a, 0 chunked"
    assert reuse_phrase(0, 11, None, full=False) == "11 chunked (no earlier run to reuse from)"
    assert reuse_phrase(0, 11, "run-a", full=True) == "11 chunked (--full: nothing reused)"


def test_pages_are_counted_by_where_their_chunks_came_from_not_as_to_chunk():
    said = pages_phrase(10, 1, "run-a", full=False)
    assert said == "11 pages: 10 reused from run run-a, 1 chunked"
    assert (
        pages_phrase(0, 1, None, full=False) == "1 page: 1 chunked (no earlier run to reuse from)"
    )
