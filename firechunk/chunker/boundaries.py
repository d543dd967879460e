"""Pass 3: fix chunk boundaries after packing.

- a chunk of headings alone joins its previous chunk (or the next one at a page start);
- a fragment under `min_tokens` merges with the smaller of its neighbours in the same H1
  section, while the merge stays within the hard limit; a neighbour it can join without
  leaving the section its first unit begins inside (`packing.section_true`) comes first;
- a chunk whose exact token count turns out over the hard limit (the packer adds
  estimates) is packed again, tighter.
Code blocks and tables were already cut to fit, with their fences and header rows, when
units were built (`pieces.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from firechunk.chunker.blocks import HEADING, OTHER, ParsedBlock, parse_blocks
from firechunk.chunker.packing import Group, estimate, pack_units, section_true
from firechunk.chunker.pieces import Budget, Piece, split_block, split_text
from firechunk.chunker.sizer import Sizer
from firechunk.chunker.split import Limits, Unit


def attach_lone_headings(groups: list[Group], limits: Limits) -> list[Group]:
    """No chunk may consist of headings only: fold such a chunk into a neighbour."""
    out: list[Group] = []
    for group in groups:
        if (
            out
            and all(unit.headings_only for unit in group)
            or out
            and all(unit.headings_only for unit in out[-1])
        ):
            out[-1] = out[-1] + group
        else:
            out.append(group)
    return out


def merge_small(
    groups: list[Group], limits: Limits, fits: Callable[[Group], bool] | None = None
) -> list[Group]:
    """Merge fragments under `min_tokens` into a neighbour of the same H1 section. Merges
    are judged on the estimate; with `fits`, on the exact count too (after the hard
    limit has been enforced, a merge must not undo it)."""
    groups = list(groups)
    index = 0
    while index < len(groups):
        size = estimate(groups[index])
        partner = None
        if size < limits.min_tokens:
            partner = _best_partner(groups, index, size, limits, fits)
        if partner is None:
            index += 1
            continue
        low = min(index, partner)
        groups[low : low + 2] = [groups[low] + groups[low + 1]]
        index = max(0, low - 1)  # the merged chunk may itself still be small
    return groups


def _best_partner(
    groups: list[Group],
    index: int,
    size: int,
    limits: Limits,
    fits: Callable[[Group], bool] | None,
) -> int | None:
    ordinal = groups[index][0].h1_ordinal
    options = []
    for neighbour in (index - 1, index + 1):
        if 0 <= neighbour < len(groups) and groups[neighbour][-1].h1_ordinal == ordinal:
            merged = size + estimate(groups[neighbour]) + 1
            if merged <= limits.hard:
                options.append((merged, neighbour))
    merges = [(groups[min(index, n)] + groups[min(index, n) + 1], n) for _, n in sorted(options)]
    merges = [(merged, n) for merged, n in merges if fits is None or fits(merged)]
    # A merge that leaves the chunk inside its first section's parent; failing that (a
    # small last section after a long one), any: the chunk's breadcrumb is then the
    # parent of both and `sections` names each.
    ranked = sorted(merges, key=lambda merge: not section_true(merge[0]))
    return ranked[0][1] if ranked else None


def enforce_hard_limit(
    groups: list[Group], texts: list[str], tokens: list[int], limits: Limits, count: Sizer
) -> list[Group] | None:
    """Re-pack groups whose exact text is over the hard limit; None when all fit."""
    if all(n <= limits.hard for n in tokens):
        return None
    out: list[Group] = []
    for group, n in zip(groups, tokens, strict=True):
        if n <= limits.hard:
            out.append(group)
        elif _trailing_headings(group):
            out.extend(_cut_before_headings(group, limits, count))
        elif len(group) > 1:
            out.extend(_repack(group, Limits(limits.soft, limits.hard - 2 * len(group))))
        else:
            out.extend([[piece] for piece in _resplit(group[0], limits.hard, count, limits.hard)])
    return out


def _repack(group: Group, tighter: Limits) -> list[Group]:
    repacked = pack_units(group, tighter)
    if len(repacked) == 1:  # the estimate still fits: halve, so the loop ends
        middle = len(group) // 2
        repacked = [group[:middle], group[middle:]]
    return repacked


def _trailing_headings(group: Group) -> int:
    """How many headings-only units close the group, when it also holds content."""
    k = 0
    while k < len(group) and group[-1 - k].headings_only:
        k += 1
    return k if k < len(group) else 0


def _cut_before_headings(group: Group, limits: Limits, count: Sizer) -> list[Group]:
    """Headings that close a page and had to join the chunk before them: cut that content
    again with room left for them, so they end a chunk with content, never alone."""
    k = _trailing_headings(group)
    body, headings = group[:-k], group[-k:]
    room = limits.hard - estimate(headings) - 1
    if room < limits.min_tokens:  # headings as long as a chunk: no content fits beside them
        return [body, headings]
    hard = room - 2 * len(group)
    if len(body) > 1:
        parts = _repack(body, Limits(limits.soft, hard))
    else:
        pieces = _resplit(body[0], hard, count, limits.hard)
        if len(pieces) == 1:  # code that fits is never cut: the headings stay apart
            return [body, headings]
        parts = [[piece] for piece in pieces]
    parts[-1] = parts[-1] + headings
    return parts


def _lone_block(unit: Unit) -> tuple[str, ParsedBlock]:
    """The heading lines a unit opens with (its verbatim text up to the block, blank line
    included) and its block, when it holds exactly one besides them; else ("", OTHER)."""
    lines = unit.text.split("\n")
    blocks = parse_blocks(lines)
    lead = 0
    while lead < len(blocks) and blocks[lead].kind == HEADING:
        lead += 1
    if len(blocks) - lead != 1:
        return "", ParsedBlock(OTHER, 0, len(lines))
    block = blocks[lead]
    return "".join(line + "\n" for line in lines[: block.start]), block


def _resplit(unit: Unit, hard: int, count: Sizer, limit: int) -> list[Unit]:
    """Cut a unit again into pieces of `hard` tokens: a lone block (under any stacked
    headings) by its own grain, code re-fenced and tables with their header; anything
    else as text. Code that fits `limit` (the hard limit) stays whole, in a piece of its
    own; so do the headings when they do not fit on top of it. (A piece of code that was
    over the limit is cut again at other lines.)"""
    lines = unit.text.split("\n")
    headings, block = _lone_block(unit)
    pieces: list[Piece] = []
    if block.kind != OTHER:
        room = count(headings) if headings else 0
        # Code that fits stays whole; a piece of code over the limit may be cut anew.
        whole_code = 0 if unit.refenced else limit
        pieces = split_block(block, lines, Budget(hard - room, hard, whole_code), count)
        if headings:
            pieces = _under_headings(headings, block, pieces, count, limit)
        pieces = [
            Piece(p.text, p.tokens, unit.start + p.start, unit.start + p.end, p.joiner)
            for p in pieces
        ]
    if not pieces or any(p.tokens > limit for p in pieces):  # e.g. one table row over it
        pieces = split_text(unit.text, unit.start, Budget(hard, hard), count)
    joiners = [unit.joiner] + [p.joiner for p in pieces[1:]]
    # A unit's text need not be its page lines one for one (a table piece repeats the
    # header rows), so line numbers counted in the text are kept inside the unit's span.
    last = max(unit.start, unit.end - 1)
    return [
        Unit(
            p.text,
            p.tokens,
            min(p.start, last),
            min(max(p.end, p.start + 1), unit.end),
            unit.path,
            unit.h1_ordinal,
            joiner,
            refenced=unit.refenced or p.refenced,
            scope=unit.scope if n == 0 else unit.path,
        )
        for n, (p, joiner) in enumerate(zip(pieces, joiners, strict=True))
    ]


def _under_headings(
    headings: str, block: ParsedBlock, pieces: list[Piece], count: Sizer, limit: int
) -> list[Piece]:
    """The block's pieces with the headings stacked on top of the first; or, when it is
    code kept whole that they would push over `limit`, the headings as a piece before it."""
    first, *rest = pieces
    text = headings + first.text
    tokens = count(text)
    if tokens <= limit:
        return [Piece(text, tokens, 0, first.end), *rest]
    alone = headings.rstrip("\n")
    return [
        Piece(alone, count(alone), 0, block.start),
        first._replace(joiner=headings[len(alone) :]),
        *rest,
    ]


def cut_as_text(
    groups: list[Group], texts: list[str], tokens: list[int], limits: Limits, count: Sizer
) -> list[Group]:
    """Last resort, always within the limit: every group still over it becomes plain-text
    pieces of its joined text."""
    out: list[Group] = []
    for group, text, n in zip(groups, texts, tokens, strict=True):
        if n <= limits.hard:
            out.append(group)
            continue
        first = group[0]
        pieces = split_text(text, first.start, Budget(limits.hard, limits.hard), count)
        out.extend(
            [
                Unit(
                    p.text,
                    p.tokens,
                    p.start,
                    p.end,
                    first.path,
                    first.h1_ordinal,
                    scope=first.scope if n == 0 else first.path,
                )
            ]
            for n, p in enumerate(pieces)
        )
    return out
