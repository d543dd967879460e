"""Pass 2b: pack a page's units into chunks that follow its sections.

Hierarchical greedy packing: content stays together at the highest heading level that
fits the hard limit. A section that does not fit is opened: its own text before its first
sub-heading and its sub-sections become the parts packed in its place, whole sub-sections
side by side (balanced near the soft limit), the ones that do not fit opened in turn. A
section without sub-sections that does not fit is cut between units, balanced near the
soft limit.

So a chunk never begins inside one section and continues into the next (`section_true`):
the pieces of a cut section stay inside it, and only whole sections share a chunk, under
their common parent.

A page served at many URLs (a single-page-app reference) is packed with `apart`: the
sections its URLs name (`naming_depth`) never share a chunk, so each chunk can cite the
one URL of its section.
"""

from __future__ import annotations

import math

from firechunk.chunker.sections import HeadingPath
from firechunk.chunker.split import Limits, Unit

Group = list[Unit]


def pack_units(units: list[Unit], limits: Limits, apart: int = 0) -> list[Group]:
    """The units of a page (or of one chunk packed again) grouped into chunks; sections
    `apart` headings deep (0: none) each get chunks of their own."""
    if not units:
        return []
    depth = min(len(unit.path) for unit in units)
    while depth and any(unit.path[:depth] != units[0].path[:depth] for unit in units):
        depth -= 1
    return _pack_section(units, depth, limits, apart)


def _pack_section(units: list[Unit], depth: int, limits: Limits, apart: int) -> list[Group]:
    """Units that share their first `depth` headings: one chunk when they fit, else their
    parts (`_parts`) packed side by side, each part that does not fit opened in turn."""
    keep_apart = depth < apart
    if estimate(units) <= limits.hard and not keep_apart:
        return [units]
    parts = _parts(units, depth)
    if len(parts) == 1 and len(parts[0][0].path) <= depth:  # no sub-sections: cut it
        return pack_run(units, limits)
    if keep_apart:
        return [group for part in parts for group in _pack_part(part, depth, limits, apart)]
    groups: list[Group] = []
    side_by_side: list[Group] = []
    for part in parts:
        if estimate(part) <= limits.hard:
            side_by_side.append(part)
            continue
        groups.extend(_balanced(side_by_side, limits))
        side_by_side = []
        groups.extend(_pack_part(part, depth, limits, apart))
    groups.extend(_balanced(side_by_side, limits))
    return groups


def _pack_part(part: Group, depth: int, limits: Limits, apart: int) -> list[Group]:
    """A part on its own: the section's own text cut where it does not fit, a sub-section
    packed one level deeper."""
    if len(part[0].path) <= depth:
        return pack_run(part, limits)
    return _pack_section(part, depth + 1, limits, apart)


def _parts(units: list[Unit], depth: int) -> list[Group]:
    """A section's own text (the units before its first sub-section), then each of its
    sub-sections: runs of units under the same heading at `depth`."""
    parts: list[Group] = []
    key: object = None
    for unit in units:
        unit_key = unit.path[depth] if len(unit.path) > depth else None
        if parts and unit_key == key:
            parts[-1].append(unit)
        else:
            parts.append([unit])
            key = unit_key
    return parts


def _balanced(parts: list[Group], limits: Limits) -> list[Group]:
    """Whole parts side by side in chunks, as even as the soft limit makes them."""
    if not parts:
        return []
    sizes = [estimate(part) for part in parts]
    total = sum(sizes) + len(parts) - 1
    if total <= limits.hard:
        return [[unit for part in parts for unit in part]]
    target = total / math.ceil(total / limits.soft)
    groups: list[Group] = []
    size = 0
    for part, part_size in zip(parts, sizes, strict=True):
        grown = size + part_size + 1
        if not groups or grown > limits.hard or _closer_before(size, grown, target):
            groups.append([])
            grown = part_size
        groups[-1].extend(part)
        size = grown
    return groups


def pack_run(units: list[Unit], limits: Limits) -> list[Group]:
    """Cut a run of units into chunks: whole when it fits the hard limit, otherwise
    balanced near the soft limit, preferring to cut before a sub-heading."""
    total = estimate(units)
    if total <= limits.hard:
        return [units]
    target = total / math.ceil(total / limits.soft)
    groups: list[Group] = []
    current: Group = []
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
    return grown > target and _closer_before(size, grown, target)


def _closer_before(size: int, grown: int, target: float) -> bool:
    """Whether closing the chunk at `size` lands nearer the target than growing it."""
    return grown > target and abs(size - target) <= abs(grown - target)


def section_true(group: Group) -> bool:
    """Whether the chunk stays inside the section its first unit begins inside."""
    scope: HeadingPath = group[0].scope
    return all(unit.path[: len(scope)] == scope for unit in group[1:])


def estimate(units: list[Unit]) -> int:
    """Tokens of the units joined: their counts plus one per separator (close, not exact)."""
    return sum(unit.tokens for unit in units) + max(0, len(units) - 1)
