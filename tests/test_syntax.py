"""The line syntax every chunker pass shares (chunker/syntax.py): fences and headings, and
the pre-filters that stand next to the exact tests."""

from __future__ import annotations

import pytest

from firechunk.chunker.syntax import (
    MAYBE_FENCE,
    MAYBE_HEADING_OR_FENCE,
    closes_fence,
    closes_fence_flush,
    is_atx_heading,
    is_setext_underline,
    maybe_lines,
    opening_fence,
)


@pytest.mark.parametrize(
    ("line", "fence"),
    [
        ("```", "```"),
        ("```python", "```"),
        ("   ~~~~ sh", "~~~~"),
        ("    ```", None),  # indented code, not a fence
        ("``` x`y", None),  # a backtick in the info string: inline code
        ("~~~ x`y", "~~~"),
        ("``", None),
    ],
)
def test_opening_fence(line, fence):
    assert opening_fence(line) == fence


@pytest.mark.parametrize(
    ("line", "fence", "closes", "flush"),
    [
        ("```", "```", True, True),
        ("`````", "```", True, True),
        ("``", "```", False, False),
        ("~~~", "```", False, False),
        ("``` x", "```", False, False),
        ("   ```", "```", True, False),  # indented, as in a list item
        ("```  ", "```", True, False),  # blanks after it
        ("    ```", "```", False, False),
    ],
)
def test_closing_fences_and_the_flush_test_overlap_reads_code_with(line, fence, closes, flush):
    assert closes_fence(line, fence) is closes
    assert closes_fence_flush(line, fence) is flush


def test_the_fence_pre_filter_finds_every_fence_line():
    lines = ["text", "```sh", "  ```", "\t```", "   ~~~~", "~~~ x`y", "``` x`y", "more `` text"]
    found = maybe_lines(MAYBE_FENCE, lines)
    for row, line in enumerate(lines):
        if opening_fence(line) or closes_fence(line, "```") or closes_fence(line, "~~~"):
            assert row in found, line
    assert found == [1, 2, 3, 4, 5, 6]


def test_the_heading_and_fence_pre_filter_finds_every_heading_and_fence_line():
    lines = ["# Title", "text", "Setext", "===", "  ---  ", "```sh", "#hashtag", "a # b", "=-="]
    found = maybe_lines(MAYBE_HEADING_OR_FENCE, lines)
    for row, line in enumerate(lines):
        if opening_fence(line) or is_atx_heading(line) or is_setext_underline(line):
            assert row in found, line
    assert found == [0, 3, 4, 5, 6]


@pytest.mark.parametrize(
    ("line", "atx"),
    [("# Title", True), ("###### Six", True), ("   ## Indented", True), ("##", True)],
)
def test_atx_headings(line, atx):
    assert bool(is_atx_heading(line)) is atx


@pytest.mark.parametrize("line", ["#hashtag", "####### seven", "    # indented code", "\\# x"])
def test_lines_that_are_no_atx_heading(line):
    assert not is_atx_heading(line)


@pytest.mark.parametrize(
    ("line", "underline"),
    [("===", True), ("---", True), ("   ---  ", True), ("=-=", False), ("-- -", False)],
)
def test_setext_underlines(line, underline):
    assert bool(is_setext_underline(line)) is underline
