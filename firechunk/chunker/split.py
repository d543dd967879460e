"""Pass 2a: turn sections into units, the pieces that chunks are packed from
(`packing.py`).

A unit is the smallest thing a chunk boundary may not cut: a block (or a piece of an
oversized block) with any heading lines that precede it stacked on top, so a heading
never ends a chunk apart from its content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from firechunk.chunker.blocks import CODE, HEADING, Block, parse_blocks
from firechunk.chunker.pieces import Budget, Piece, fill_text, split_counted
from firechunk.chunker.sections import HeadingPath, Section
from firechunk.chunker.sizer import Sizer
from firechunk.settings import RunSettings

_FIELDS = RunSettings.model_fields  # the token limits' defaults are the run settings' fields'


@dataclass(frozen=True)
class Limits:
    soft: int = _FIELDS["soft_tokens"].default
    hard: int = _FIELDS["hard_tokens"].default
    min_tokens: int = _FIELDS["min_tokens"].default  # fragments below this merge (pass 3)
    overlap: int = 100  # at most this many tokens of overlap text


class Unit(NamedTuple):
    """What a chunk is packed from, with its text's exact token count."""

    text: str
    tokens: int
    start: int  # first cleaned line
    end: int  # exclusive
    path: HeadingPath  # headings in force at the unit's first content line
    h1_ordinal: int
    joiner: str | None = None  # set for the second and later pieces of one block
    headings_only: bool = False
    opens_with_heading: bool = False
    refenced: bool = False  # a piece of code over the limit (see `Piece`)
    # The section the unit begins inside: the parent of the first heading it opens with,
    # else its own path. A chunk starting with this unit may hold only what is inside it.
    scope: HeadingPath = ()


class _Heading(NamedTuple):
    """A heading waiting for content, with the path and H1 section it opens."""

    block: Block
    path: HeadingPath
    h1_ordinal: int

    @property
    def scope(self) -> HeadingPath:
        """The section this heading's own section is part of."""
        return self.path[:-1]


def build_units(
    sections: list[Section], lines: list[str], limits: Limits, count: Sizer
) -> list[Unit]:
    """Units of the whole page; heading runs stack onto the next content, across sections."""
    units: list[Unit] = []
    run: list[_Heading] = []
    for section in sections:
        for block, path in zip(section.blocks, section.paths, strict=True):
            if block.kind == HEADING:
                run.append(_Heading(block, path, section.h1_ordinal))
                continue
            lead: Piece | None = None
            if run:
                lead, before = _lead_headings(run, block, limits, count, bool(units))
                units.extend(before)
            scope = _scope_at(run, lead.start) if lead else path
            units.extend(_units_of_block(block, path, section, lead, scope, lines, limits, count))
            run = []
    if run:
        units.extend(_trailing_headings(run, limits, count))
    return units


def _run_text(run: list[_Heading], count: Sizer) -> Piece:
    """A run of headings with no content between them, as one piece of text."""
    parts = [(h.block.text, h.block.tokens) for h in run]
    text = "\n\n".join(part for part, _ in parts)
    tokens = count.joined(parts, ["\n\n"] * (len(parts) - 1))
    return Piece(text, tokens, run[0].block.start, run[-1].block.end)


def _lead_headings(
    run: list[_Heading],
    block: Block,
    limits: Limits,
    count: Sizer,
    after_content: bool,
) -> tuple[Piece | None, list[Unit]]:
    """The headings to stack onto `block` (None for none), and units of the headings that
    go before it.

    Headings longer than a chunk are cut as text into full pieces, and what is left of
    them stacks onto the block. When that rest cannot, they are cut from the end
    instead, like headings that close a page: full pieces last, and the rest first, to
    join the chunk before (at the page start, holding a word of text besides headings)."""
    text = _run_text(run, count)
    if text.tokens <= limits.hard:
        return text, []
    *full, rest = _cut_run(run, text, limits, count)
    rest_tokens = count.with_sep(rest.text, rest.tokens, "\n\n")
    if _may_stack(rest, run) and _room_for(block, rest_tokens, limits):
        return rest, [_cut_unit(piece, run, headings_only=False) for piece in full]
    first, *full = _cut_run(run, text, limits, count, from_end=True, text_first=not after_content)
    return None, [
        _cut_unit(first, run, headings_only=after_content),
        *(_cut_unit(piece, run, headings_only=False) for piece in full),
    ]


def _cut_run(
    run: list[_Heading], text: Piece, limits: Limits, count: Sizer, **how: bool
) -> list[Piece]:
    """The run's text cut by `fill_text`, each piece with its page lines. (The text puts
    one blank line between headings, the page may have more: lines are mapped back.)"""
    rows: list[int] = []  # the page line of each line of the run's text
    for n, heading in enumerate(run):
        if n:
            rows.append(heading.block.start - 1)
        rows.extend(range(heading.block.start, heading.block.end))
    pieces = fill_text(text.text, 0, limits.hard, count, **how)
    return [
        piece._replace(start=rows[piece.start], end=rows[piece.end - 1] + 1) for piece in pieces
    ]


def _may_stack(rest: Piece, run: list[_Heading]) -> bool:
    """Whether the rest of headings cut as text may head the content that follows. Not
    when it ends a setext heading cut short (its partial title would read as the heading
    of the content), nor when it starts inside a heading that a later one closes (no
    chunk would then carry that heading's title)."""
    titles = {h.block.title for h in run}
    blocks = parse_blocks(rest.text.split("\n"))
    if any(block.kind == HEADING and block.title not in titles for block in blocks):
        return False
    at_heading = "\n" in (rest.joiner or "") and any(h.block.start == rest.start for h in run)
    return at_heading or rest.start >= run[-1].block.start


def _trailing_headings(run: list[_Heading], limits: Limits, count: Sizer) -> list[Unit]:
    """Headings that close the page: one headings-only unit, to join the chunk before.
    Longer than a chunk, they are cut as text from the end: full pieces after, what is
    left of them first, to join that chunk."""
    text = _run_text(run, count)
    if text.tokens <= limits.hard:
        last = run[-1]
        return [
            _unit(
                text,
                last.path,
                last.h1_ordinal,
                headings_only=True,
                opens_with_heading=True,
                scope=run[0].scope,
            )
        ]
    pieces = _cut_run(run, text, limits, count, from_end=True)
    return [_cut_unit(piece, run, headings_only=n == 0) for n, piece in enumerate(pieces)]


def _cut_unit(piece: Piece, run: list[_Heading], *, headings_only: bool) -> Unit:
    """A piece of headings cut as text, under the heading in force at its first line (the
    one it starts in, so that a heading cut short still heads a chunk)."""
    heading = _heading_at(run, piece.start)
    return _unit(
        piece,
        heading.path,
        heading.h1_ordinal,
        headings_only=headings_only,
        opens_with_heading=True,
        scope=_scope_at(run, piece.start),
    )


def _heading_at(run: list[_Heading], start: int) -> _Heading:
    """The heading of the run that line `start` is in."""
    return [h for h in run if h.block.start <= start][-1]


def _scope_at(run: list[_Heading], start: int) -> HeadingPath:
    """The section that text of the run beginning at line `start` begins inside."""
    heading = _heading_at(run, start)
    return heading.scope if start == heading.block.start else heading.path


def _units_of_block(
    block: Block,
    path: HeadingPath,
    section: Section,
    lead: Piece | None,
    scope: HeadingPath,
    lines: list[str],
    limits: Limits,
    count: Sizer,
) -> list[Unit]:
    """The block's units, the `lead` headings stacked on the first when there is room;
    else the headings become a unit of their own before it, to join the chunk before.
    `scope` is the section the lead headings begin inside (see `Unit`)."""
    lead_tokens = count.with_sep(lead.text, lead.tokens, "\n\n") if lead else 0
    units: list[Unit] = []
    if lead and not _room_for(block, lead_tokens, limits):
        units.append(
            _unit(
                lead,
                path,
                section.h1_ordinal,
                headings_only=True,
                opens_with_heading=True,
                scope=scope,
            )
        )
        lead, lead_tokens = None, 0
    budget = Budget(limits.hard - lead_tokens, limits.hard, whole_code=limits.hard)
    pieces = split_counted(block, lines, budget, count)
    if lead:
        pieces[0] = _stacked(lead, lead_tokens, pieces[0])
    for index, piece in enumerate(pieces):
        opens_with_heading = index == 0 and lead is not None
        units.append(
            _unit(
                piece,
                path,
                section.h1_ordinal,
                opens_with_heading=opens_with_heading,
                scope=scope if opens_with_heading else path,
            )
        )
    return units


def _stacked(lead: Piece, lead_tokens: int, piece: Piece) -> Piece:
    """The `lead` headings on top of `piece`, a blank line between; `lead_tokens` counts
    the headings with that blank line."""
    return Piece(
        f"{lead.text}\n\n{piece.text}",
        piece.tokens + lead_tokens,
        lead.start,
        piece.end,
        lead.joiner,
        piece.refenced,
    )


def _room_for(block: Block, heading_tokens: int, limits: Limits) -> bool:
    """Whether headings can stack onto this block. They cannot when they leave less than a
    small fragment of room, or when they would force a code block that fits the hard limit
    alone to be cut. (Long headings that stack cut the block's first piece short; left
    apart, they would make a header-only chunk.)"""
    if heading_tokens > limits.hard - limits.min_tokens:
        return False
    if block.kind != CODE:
        return True
    return block.tokens > limits.hard or block.tokens + heading_tokens <= limits.hard


def _unit(
    piece: Piece,
    path: HeadingPath,
    h1_ordinal: int,
    *,
    headings_only: bool = False,
    opens_with_heading: bool = False,
    scope: HeadingPath | None = None,
) -> Unit:
    return Unit(
        piece.text,
        piece.tokens,
        piece.start,
        piece.end,
        path,
        h1_ordinal,
        piece.joiner,
        headings_only,
        opens_with_heading,
        piece.refenced,
        path if scope is None else scope,
    )
