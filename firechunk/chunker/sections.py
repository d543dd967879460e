"""Pass 1: split a page's blocks into H1/H2 sections and track the headings in force."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from firechunk.chunker.blocks import HEADING, Block


class Heading(NamedTuple):
    """A heading in force: its level, clean title and the cleaned line it starts at (two
    headings with one title are two sections)."""

    level: int
    title: str
    line: int


HeadingPath = tuple[Heading, ...]  # outermost first


@dataclass
class Section:
    """An H1 or H2 heading and the blocks under it, up to the next H1 or H2.

    `h1_ordinal` numbers the page's H1 sections; small fragments only merge with
    neighbours of the same H1 section. Content above the first heading forms a preamble
    section with an empty heading path.
    """

    h1_ordinal: int
    blocks: list[Block] = field(default_factory=list)
    paths: list[HeadingPath] = field(default_factory=list)  # path in force at each block


def enter_heading(path: HeadingPath, heading: Heading) -> HeadingPath:
    """The heading path after `heading`: deeper or equal levels are closed."""
    return (*tuple(entry for entry in path if entry.level < heading.level), heading)


def split_sections(blocks: list[Block]) -> list[Section]:
    sections: list[Section] = []
    path: HeadingPath = ()
    h1_ordinal = 0
    seen_h1 = False
    current: Section | None = None
    for block in blocks:
        if block.kind == HEADING:
            path = enter_heading(path, Heading(block.level, block.title, block.start))
            if block.level <= 2:
                current = None
            if block.level == 1:
                h1_ordinal += seen_h1  # the preamble shares the first H1's section
                seen_h1 = True
        if current is None:
            current = Section(h1_ordinal=h1_ordinal)
            sections.append(current)
        current.blocks.append(block)
        current.paths.append(path)
    return sections


def headers_of(path: HeadingPath) -> tuple[str | None, str | None]:
    """The H1 and the H2 in force for a heading path."""
    h1 = next((entry.title for entry in reversed(path) if entry.level == 1), None)
    h2 = next((entry.title for entry in reversed(path) if entry.level == 2), None)
    return h1, h2


def titles(path: HeadingPath) -> list[str]:
    return [entry.title for entry in path]


def common_path(paths: list[HeadingPath]) -> HeadingPath:
    """The deepest section that holds every one of `paths`."""
    first = paths[0]
    depth = len(first)
    for path in paths[1:]:
        depth = min(depth, len(path))
        while depth and path[:depth] != first[:depth]:
            depth -= 1
    return first[:depth]


def naming_depth(paths: Iterable[Sequence[str]]) -> int:
    """How many headings deep the sections lie that a page's URLs name, when one page is
    served at many URLs: the depth with the most distinct titles (ties: the deeper), so a
    reference page's functions and not its repeated "Parameters". 0 for no headings."""
    distinct: dict[int, set[str]] = {}
    for path in paths:
        for depth in range(1, len(path) + 1):
            distinct.setdefault(depth, set()).add(path[depth - 1])
    return max(distinct, key=lambda depth: (len(distinct[depth]), depth), default=0)
