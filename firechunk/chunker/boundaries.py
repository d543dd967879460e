"""Pass 3: fix chunk boundaries after packing.

- a chunk of headings alone joins its previous chunk (or the next one at a page start);
- a fragment under `min_tokens` merges with the smaller of its neighbours in the same H1
  section, while the merge stays within the hard limit;
- a chunk whose exact token count turns out over the hard limit (the packer adds
  estimates) is packed again, tighter.
Code blocks and tables were already cut to fit, with their fences and header rows, when
units were built (`pieces.py`).
"""

from __future__ import annotations

from firechunk.chunker.pieces import Budget, Count, split_text
from firechunk.chunker.split import Limits, Unit, estimate, pack_section

Group = list[Unit]


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


def merge_small(groups: list[Group], limits: Limits) -> list[Group]:
    """Merge fragments under `min_tokens` into a neighbour of the same H1 section."""
    groups = list(groups)
    index = 0
    while index < len(groups):
        size = estimate(groups[index])
        partner = _best_partner(groups, index, size, limits) if size < limits.min_tokens else None
        if partner is None:
            index += 1
            continue
        low = min(index, partner)
        groups[low : low + 2] = [groups[low] + groups[low + 1]]
        index = max(0, low - 1)  # the merged chunk may itself still be small
    return groups


def _best_partner(groups: list[Group], index: int, size: int, limits: Limits) -> int | None:
    ordinal = groups[index][0].h1_ordinal
    options = []
    for neighbour in (index - 1, index + 1):
        if 0 <= neighbour < len(groups) and groups[neighbour][-1].h1_ordinal == ordinal:
            merged = size + estimate(groups[neighbour]) + 1
            if merged <= limits.hard:
                options.append((merged, neighbour))
    return min(options)[1] if options else None


def enforce_hard_limit(
    groups: list[Group], texts: list[str], tokens: list[int], limits: Limits, count: Count
) -> list[Group] | None:
    """Re-pack groups whose exact text is over the hard limit; None when all fit."""
    if all(n <= limits.hard for n in tokens):
        return None
    out: list[Group] = []
    for group, n in zip(groups, tokens, strict=True):
        if n <= limits.hard:
            out.append(group)
        elif len(group) > 1:
            tighter = Limits(limits.soft, limits.hard - 2 * len(group), limits.min_tokens)
            repacked = pack_section(group, tighter)
            if len(repacked) == 1:  # the estimate still fits: halve, so the loop ends
                middle = len(group) // 2
                repacked = [group[:middle], group[middle:]]
            out.extend(repacked)
        else:
            out.extend([[piece] for piece in _resplit(group[0], limits, count)])
    return out


def _resplit(unit: Unit, limits: Limits, count: Count) -> list[Unit]:
    pieces = split_text(unit.text, unit.start, Budget(limits.hard, limits.hard), count)
    return [
        Unit(p.text, p.tokens, p.start, p.end, unit.path, unit.h1_ordinal, p.joiner) for p in pieces
    ]
