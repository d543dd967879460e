"""Where a chunk sits in the text it was cut from, in the terms other frameworks use:
character offsets (LangChain's `start_index`, LlamaIndex's `start_char_idx` and
`end_char_idx`) and the heading of each level in force where it starts
(`MarkdownHeaderTextSplitter`'s "Header 1", "Header 2", ... keys).

A chunk's text is cleaned markdown (anchors, escapes and page chrome gone), so it is
rarely a verbatim slice of its source and cannot be found with `str.find`, as those
frameworks find theirs. The chunk knows its source lines instead (`source_lines`, the lines
split at "\\r\\n", "\\r" or "\\n" as the chunker splits them), and its breadcrumb: the
offsets are those lines' span, its start moved to the chunk's first words when the chunk
begins inside a line (a long paragraph cut at a sentence); the levels are those of its
headings as the source writes them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from firechunk import Chunk
from firechunk.chunker.headings import heading_key, heading_text
from firechunk.chunker.syntax import (
    MAYBE_HEADING_OR_FENCE,
    closes_fence,
    is_atx_heading,
    is_setext_underline,
    maybe_lines,
    opening_fence,
)

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WORD = re.compile(r"\w+")
# The chunk's first words, found in the source with anything but words between them
# (markup, escapes, anchors): enough of them to tell one sentence's start from another's.
_LEADING_WORDS = 6


@dataclass(frozen=True)
class Heading:
    line: int  # 1-based, as `source_lines`
    level: int
    key: str  # `heading_key` of its text, as a breadcrumb entry's


@dataclass(frozen=True)
class Span:
    start: int
    end: int


class SourcePage:
    """One page's source text, read once for the positions of all its chunks."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
        self.headings = list(_headings(self.text))

    def span(self, chunk: Chunk, after: int = 0) -> Span:
        """The characters of the chunk's source lines, from its first words on when they
        start inside its first line; `after`: the previous chunk's start on the page, so
        that two chunks cut from one line get different, increasing offsets."""
        first, last = chunk.metadata.source_lines
        start, end = self._line_start(first), self._line_end(last)
        found = _first_words_at(chunk.data.text, self.text, max(start, after), end)
        if found is not None and _has_words(self.text[start:found]):
            start = found
        return Span(start, max(start, end))

    def header_levels(self, chunk: Chunk) -> dict[int, str]:
        """The headings in force where the chunk starts, by level ({1: "Auth", 3: "Login"}),
        as `MarkdownHeaderTextSplitter` gives a text's (not the breadcrumb: that is the
        section holding the whole chunk, a parent when the chunk spans two). The headings
        are the chunker's (its first section's path, anchors and page chrome gone); each
        one's level is that of the nearest heading above the chunk with the same words."""
        meta = chunk.metadata
        first = meta.source_lines[0]
        above = [heading for heading in self.headings if heading.line <= first]
        levels: dict[int, str] = {}
        for title in meta.sections[0] if meta.sections else meta.breadcrumb:
            key = heading_key(title)
            match = next((h for h in reversed(above) if h.key == key), None)
            if match is not None:
                levels[match.level] = title
        return levels

    def _line_start(self, line: int) -> int:
        return self.line_starts[min(line, len(self.line_starts)) - 1]

    def _line_end(self, line: int) -> int:
        """Where the line's text ends, before its line break."""
        if line >= len(self.line_starts):
            return len(self.text)
        end = self.line_starts[line]
        return end - (2 if self.text.startswith("\r\n", end - 2) else 1)


def _headings(text: str) -> Iterator[Heading]:
    """The ATX and setext headings outside fenced code, as the chunker reads headings."""
    lines = _LINE_BREAK.split(text)
    fence: str | None = None
    for number in maybe_lines(MAYBE_HEADING_OR_FENCE, lines):
        line = lines[number]
        if fence is not None:
            fence = None if closes_fence(line, fence) else fence
        elif fence := opening_fence(line):
            continue
        elif marks := is_atx_heading(line):
            yield Heading(number + 1, marks.group(1).count("#"), heading_key(heading_text(line)))
        elif (underline := is_setext_underline(line)) and number and lines[number - 1].strip():
            title = lines[number - 1]
            if not (opening_fence(title) or is_atx_heading(title)):
                level = 1 if underline.group(1)[0] == "=" else 2
                yield Heading(number, level, heading_key(heading_text(title)))


def _first_words_at(chunk_text: str, source: str, start: int, end: int) -> int | None:
    """Where the chunk's first words are in `source[start:end]`, or None."""
    words = _WORD.findall(chunk_text[:400])[:_LEADING_WORDS]
    if not words:
        return None
    pattern = re.compile(r"\W+".join(re.escape(word) for word in words))
    found = pattern.search(source, start, end)
    return found.start() if found else None


def _has_words(text: str) -> bool:
    return _WORD.search(text) is not None
