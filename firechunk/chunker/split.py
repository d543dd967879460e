"""Pass 2: turn sections into units that fit, then pack units into chunks near the soft limit.

A unit is the smallest thing a chunk boundary may not cut: a block (or a piece of an
oversized block) with any heading lines that precede it stacked on top, so a heading
never ends a chunk apart from its content.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from firechunk.chunker.blocks import CODE, HEADING, Block
from firechunk.chunker.joincount import count_joined, count_with_sep
from firechunk.chunker.pieces import Budget, Count, Piece, split_block
from firechunk.chunker.sections import HeadingPath, Section


@dataclass(frozen=True)
class Limits:
    soft: int = 800
    hard: int = 1000
    min_tokens: int = 100  # fragments below this merge with a neighbour (pass 3)
    overlap: int = 100  # at most this many tokens of overlap text


@dataclass(slots=True)
class Unit:
    text: str
    tokens: int
    start: int  # first cleaned line
    end: int  # exclusive
    path: HeadingPath  # headings in force at the unit's first content line
    h1_ordinal: int
    joiner: str | None = None  # set for the second and later pieces of one block
    headings_only: bool = False
    opens_with_heading: bool = False


def build_units(
    sections: list[Section], lines: list[str], limits: Limits, count: Count
) -> list[Unit]:
    """Units of the whole page; heading runs stack onto the next content, across sections."""
    units: list[Unit] = []
    stacked: list[Block] = []
    path: HeadingPath = ()
    for section in sections:
        for block, path in zip(section.blocks, section.paths, strict=True):
            if block.kind == HEADING:
                stacked.append(block)
                continue
            units.extend(_units_of_block(block, path, section, stacked, lines, limits, count))
            stacked = []
    if stacked:
        units.append(_headings_unit(stacked, path, lines, count, sections[-1].h1_ordinal))
    return units


def _units_of_block(
    block: Block,
    path: HeadingPath,
    section: Section,
    stacked: list[Block],
    lines: list[str],
    limits: Limits,
    count: Count,
) -> list[Unit]:
    heading_text, heading_tokens = _stacked_headings(stacked, lines, count)
    units: list[Unit] = []
    if stacked and not _room_for(block, heading_tokens, lines, limits, count):
        units.append(_headings_unit(stacked, path, lines, count, section.h1_ordinal))
        stacked, heading_tokens = [], 0
    pieces = split_block(block, lines, Budget(limits.hard - heading_tokens, limits.hard), count)
    for index, piece in enumerate(pieces):
        unit = _unit(piece, path, section.h1_ordinal, count)
        if index == 0 and stacked:
            unit.text = f"{heading_text}\n\n{unit.text}"
            unit.tokens += heading_tokens
            unit.start = stacked[0].start
            unit.opens_with_heading = True
        units.append(unit)
    return units


def _stacked_headings(stacked: list[Block], lines: list[str], count: Count) -> tuple[str, int]:
    """The heading lines to put on top of a block, and their exact tokens with the blank
    line that separates them from the block (0 when there are none)."""
    if not stacked:
        return "", 0
    parts = [("\n".join(lines[h.start : h.end]), h.tokens) for h in stacked]
    parts = [(text, tokens if tokens >= 0 else count(text)) for text, tokens in parts]
    text = "\n\n".join(part for part, _ in parts)
    tokens = count_joined(parts, ["\n\n"] * (len(parts) - 1), count)
    return text, count_with_sep(text, tokens, "\n\n", count)


def _room_for(
    block: Block, heading_tokens: int, lines: list[str], limits: Limits, count: Count
) -> bool:
    """Whether headings can stack onto this block. They cannot when they leave less than a
    small fragment of room, or when they would force a code block that fits the hard limit
    alone to be cut. (Long headings that stack cut the block's first piece short; left
    apart, they would make a header-only chunk.)"""
    if heading_tokens > limits.hard - limits.min_tokens:
        return False
    if block.kind != CODE:
        return True
    code_tokens = count("\n".join(lines[block.start : block.end]))
    return code_tokens > limits.hard or code_tokens + heading_tokens <= limits.hard


def _unit(piece: Piece, path: HeadingPath, h1_ordinal: int, count: Count) -> Unit:
    return Unit(piece.text, piece.tokens, piece.start, piece.end, path, h1_ordinal, piece.joiner)


def _headings_unit(
    stacked: list[Block], path: HeadingPath, lines: list[str], count: Count, h1_ordinal: int
) -> Unit:
    text = "\n\n".join("\n".join(lines[h.start : h.end]) for h in stacked)
    return Unit(
        text,
        count(text),
        stacked[0].start,
        stacked[-1].end,
        path,
        h1_ordinal,
        headings_only=True,
        opens_with_heading=True,
    )


def pack_section(units: list[Unit], limits: Limits) -> list[list[Unit]]:
    """Group a section's units into chunks: whole when it fits the hard limit, otherwise
    balanced near the soft limit, preferring to cut before a sub-heading."""
    total = estimate(units)
    if total <= limits.hard:
        return [units]
    target = total / math.ceil(total / limits.soft)
    groups: list[list[Unit]] = []
    current: list[Unit] = []
    size = 0
    for unit in units:
        grown = size + unit.tokens + (1 if current else 0)
        if current and _should_close(size, grown, target, limits, unit):
            groups.append(current)
            current, grown = [], unit.tokens
        current.append(unit)
        size = grown
    if current:
        groups.append(current)
    return groups


def _should_close(size: int, grown: int, target: float, limits: Limits, unit: Unit) -> bool:
    if grown > limits.hard:
        return True
    if unit.opens_with_heading and size >= 0.6 * target:
        return True  # a sub-heading is the best place to cut
    return grown > target and abs(size - target) <= abs(grown - target)


def estimate(units: list[Unit]) -> int:
    """Tokens of the units joined: their counts plus one per separator (close, not exact)."""
    return sum(unit.tokens for unit in units) + max(0, len(units) - 1)
