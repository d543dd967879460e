"""Cutting one block that is over budget into pieces that fit, by the block's own grain.

- fenced code: at line boundaries (blank lines preferred), every piece re-fenced with
  the block's opening fence and info string;
- tables: by rows, the header and delimiter rows repeated on every piece;
- lists: at item boundaries, then as text;
- anything else: at blank lines, then lines, then sentences, then words.
A piece never exceeds its budget (the first piece may have a smaller budget than the rest,
to leave room for headings stacked in front of it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from firechunk.chunker.blocks import (
    CODE,
    HEADING,
    LIST,
    QUOTE,
    TABLE,
    Block,
    ParsedBlock,
    count_block,
    parse_blocks,
)
from firechunk.chunker.sizer import Sizer
from firechunk.chunker.syntax import SETEXT_UNDERLINE


class Piece(NamedTuple):
    """A piece of a block (or of text), within its budget, with its exact token count."""

    text: str
    tokens: int
    start: int  # first line (index into the cleaned lines)
    end: int  # exclusive
    joiner: str | None = None  # what stood between this piece and the one before it
    refenced: bool = False  # a piece of code over the limit: it may be cut at other lines


class Budget(NamedTuple):
    """Tokens the pieces of a block may hold: the first piece, and each one after it."""

    first: int
    rest: int
    # Code blocks up to this size (the hard limit) are never cut, even past the budget:
    # a piece cut tighter for room (stacked headings, an estimate's margin) must not
    # split code that fits a chunk of its own.
    whole_code: int = 0

    def at(self, index: int) -> int:
        return self.first if index == 0 else self.rest

    def after(self, index: int) -> Budget:
        """The budget for the pieces from the index-th on."""
        return Budget(self.at(index), self.rest, self.whole_code)


def split_block(block: ParsedBlock, lines: list[str], budget: Budget, count: Sizer) -> list[Piece]:
    """Pieces of `block`, parsed from `lines`, each within budget (but code kept whole,
    see `Budget`); the block itself when it fits."""
    return split_counted(count_block(block, lines, count), lines, budget, count)


def split_counted(block: Block, lines: list[str], budget: Budget, count: Sizer) -> list[Piece]:
    """`split_block` for a block counted already."""
    tokens = block.tokens
    if tokens <= budget.first or (block.kind == CODE and tokens <= budget.whole_code):
        return [Piece(block.text, tokens, block.start, block.end)]
    if block.kind == CODE and block.fence:
        return _split_fenced(block, lines, budget, count)
    if block.kind == TABLE:
        return _split_table(block, lines, budget, count)
    if block.kind == LIST and block.items:
        return _split_list(block, lines, budget, count)
    if block.kind == QUOTE:
        return _split_quote(block, lines, budget, count)
    return split_text(block.text, block.start, budget, count)


def _split_fenced(block: Block, lines: list[str], budget: Budget, count: Sizer) -> list[Piece]:
    opener = lines[block.start]
    closer = lines[block.end - 1]
    frame = count(f"{opener}\n\n{closer}")

    def code_tokens(code: str) -> int:
        """What the code adds to its fences, measured framed: BPE counts are not additive."""
        return count(f"{opener}\n{code}\n{closer}") - frame

    body = list(range(block.start + 1, block.end - 1))
    if not body or frame > budget.rest // 2:  # junk: fence lines that fill a chunk alone
        return split_text(block.text, block.start, budget, count)
    groups = _group_lines(body, lines, lambda i: budget.at(i) - frame, count, prefer_blank=True)
    pieces: list[Piece] = []
    for group in groups:
        for code in _fit_group(group, lines, budget.at(len(pieces)) - frame, code_tokens):
            joiner = "\n\n" if pieces else None
            text = f"{opener}\n{code}\n{closer}"
            pieces.append(Piece(text, count(text), group[0], group[-1] + 1, joiner, True))
    # The fence lines are the block's own: its first piece starts at the opening fence and
    # its last ends at the closing one (source lines, and the separator to the next block).
    pieces[0] = pieces[0]._replace(start=block.start)
    pieces[-1] = pieces[-1]._replace(end=block.end)
    return pieces


def _fit_group(
    group: list[int], lines: list[str], limit: int, count: Callable[[str], int]
) -> list[str]:
    """The group's lines as one text, or cut by characters when one line alone is over
    (`count` measures the code inside its fences)."""
    text = "\n".join(lines[i] for i in group)
    if count(text) <= limit:
        return [text]
    return [part for part, _, _ in _split_chars(text, Budget(limit, limit), count, 0)]


def _split_table(block: Block, lines: list[str], budget: Budget, count: Sizer) -> list[Piece]:
    head = lines[block.start : block.start + 2]
    frame = count("\n".join(head)) + 1
    rows = list(range(block.start + 2, block.end))
    groups = _group_lines(rows, lines, lambda i: budget.at(i) - frame, count, prefer_blank=False)
    pieces: list[Piece] = []
    for group in groups:
        first = not pieces
        text = "\n".join([*head, *(lines[i] for i in group)])
        joiner = None if first else "\n\n"
        start = block.start if first else group[0]
        tokens = count(text)
        if tokens > budget.at(len(pieces)) and len(group) == 1:
            room = budget.after(len(pieces))
            pieces.extend(_long_row(head if first else [], start, group[0], lines, room, count))
            continue
        pieces.append(Piece(text, tokens, start, group[-1] + 1, joiner))
    return pieces


def _long_row(
    head: list[str], start: int, row: int, lines: list[str], budget: Budget, count: Sizer
) -> list[Piece]:
    """A row too long for any piece, cut as text. The table's first piece keeps the header
    rows on top; the rest of the row goes without (a part of a cell is no row)."""
    prefix = "\n".join(head)
    room = count(prefix) + 1 if head else 0
    first, *rest = split_text(lines[row], row, Budget(budget.first - room, budget.rest), count)
    if not head:  # a row after the table's first piece: its parts follow as table pieces do
        return [first._replace(joiner="\n\n"), *rest]
    text = f"{prefix}\n{first.text}"
    tokens = count(text)
    if tokens <= budget.first:
        return [Piece(text, tokens, start, first.end), *rest]
    # The cut did not leave room after all: the header rows go first, alone.
    header = Piece(prefix, count(prefix), start, start + len(head))
    return [header, first._replace(joiner="\n"), *rest]


def _group_lines(
    indices: list[int],
    lines: list[str],
    budget_of: Callable[[int], int],
    count: Sizer,
    *,
    prefer_blank: bool,
) -> list[list[int]]:
    """Consecutive runs of line indices, each within its budget.

    With `prefer_blank`, a run that is past half its budget ends at the next blank line
    rather than filling up to the limit. A single line over budget is cut as text by the
    caller's fallback (it is kept whole here and flagged by the final recount).
    """
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i in indices:
        size = count(lines[i]) + 1
        limit = budget_of(len(groups))
        if current and used + size > limit:
            groups.append(current)
            current, used = [], 0
        current.append(i)
        used += size
        if prefer_blank and not lines[i].strip() and used > limit // 2:
            groups.append(current)
            current, used = [], 0
    if current:
        groups.append(current)
    return [group for group in groups if any(lines[i].strip() for i in group)] or groups


def _split_list(block: Block, lines: list[str], budget: Budget, count: Sizer) -> list[Piece]:
    bounds = [*block.items, block.end]
    pieces: list[Piece] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        pieces.extend(_split_item(start, end, lines, budget.after(len(pieces)), count))
    return pieces


def _split_item(
    start: int, end: int, lines: list[str], budget: Budget, count: Sizer
) -> list[Piece]:
    """A list item (its lines `start` to `end`) over budget is cut between the blocks it
    holds (paragraphs, code, nested lists), each by its own grain: a code block in a step
    is kept whole, or re-fenced."""
    text = "\n".join(lines[start:end])
    tokens = count(text)
    if tokens <= budget.first:
        return [Piece(text, tokens, start, end)]
    return _split_inner(start, end, _item_blocks(start, end, lines), lines, budget, count)


def _split_quote(quote: Block, lines: list[str], budget: Budget, count: Sizer) -> list[Piece]:
    """A block quote (a callout) over budget is cut like a list item, between the blocks it
    holds; every line keeps its '>' marker, so a code piece is re-fenced inside the quote."""
    own = [_QUOTE_MARKER.sub("", line) for line in lines[quote.start : quote.end]]
    inner = _inner_blocks(quote.start, own)
    # The '>' lines between the blocks are the quote's blank lines, text of the page: they
    # go with the block before them, or after them when that one is code (whose fences
    # must stay its first and last lines); between two code blocks, with the joiner.
    for i in range(len(inner) - 1):
        before, after = inner[i], inner[i + 1]
        if before.kind != CODE:
            inner[i] = before._replace(end=after.start)
        elif after.kind != CODE:
            items = (before.end, *after.items[1:]) if after.items else ()
            inner[i + 1] = after._replace(start=before.end, items=items)
    pieces = _split_inner(quote.start, quote.end, inner, lines, budget, count)
    firsts = {block.start for block in inner}
    joined = pieces[:1]
    for previous, piece in zip(pieces, pieces[1:], strict=False):
        if piece.joiner is None and piece.start in firsts and piece.start > previous.end:
            between = lines[previous.end : piece.start]
            piece = piece._replace(joiner="\n" + "\n".join(between) + "\n")
        joined.append(piece)
    return joined


_QUOTE_MARKER = re.compile(r"^ {0,3}> ?")


def _split_inner(
    start: int,
    end: int,
    inner: list[ParsedBlock],
    lines: list[str],
    budget: Budget,
    count: Sizer,
) -> list[Piece]:
    """A container's lines (`start` to `end`) cut between the blocks it holds, `inner`;
    as text when it holds a single block that is not code."""
    if len(inner) <= 1 and not any(block.kind == CODE for block in inner):
        return split_text("\n".join(lines[start:end]), start, budget, count)
    pieces: list[Piece] = []
    for block in inner:
        pieces.extend(split_block(block, lines, budget.after(len(pieces)), count))
    return pieces


_ITEM_MARKER = re.compile(r"^(\s*(?:[-+*]|\d{1,9}[.)]))( {1,4})(?=\S)")


def _item_blocks(start: int, end: int, lines: list[str]) -> list[ParsedBlock]:
    """The blocks inside a list item, found by parsing its lines with the item's marker
    and indentation taken off; their spans index the page lines."""
    marker = _ITEM_MARKER.match(lines[start])
    width = len(marker.group(0)) if marker else 0
    own = lines[start:end]
    dedented = [own[0][width:]] + [
        line[min(width, len(line) - len(line.lstrip(" "))) :] for line in own[1:]
    ]
    return _inner_blocks(start, dedented)


def _inner_blocks(start: int, dedented: list[str]) -> list[ParsedBlock]:
    """Blocks of a container's lines (from page line `start`) with its markers taken off;
    their spans index the page."""
    return [
        block._replace(
            start=block.start + start,
            end=block.end + start,
            items=tuple(i + start for i in block.items),
        )
        for block in parse_blocks(dedented)
    ]


_SEPARATORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("\n\n", re.compile(r"\n[ \t]*\n")),
    ("\n", re.compile(r"\n")),
    (" ", re.compile(r"(?<=[.!?:;])[ \t]+(?=\S)")),
    (" ", re.compile(r"[ \t]+")),
)


def split_text(text: str, first_line: int, budget: Budget, count: Sizer) -> list[Piece]:
    """Split prose at the coarsest separator that works, packing parts up to the budget."""
    parts = _split_parts(text, 0, budget, count)
    pieces: list[Piece] = []
    for part_text, offset, joiner in parts:
        start = first_line + text.count("\n", 0, offset)
        end = start + part_text.count("\n") + 1
        pieces.append(Piece(part_text, count(part_text), start, end, joiner if pieces else None))
    return pieces


def _split_parts(
    text: str, level: int, budget: Budget, count: Sizer, done: int = 0
) -> list[tuple[str, int, str]]:
    """(part, char offset in text, joiner) triples; `done` = pieces already emitted."""
    if level == len(_SEPARATORS):
        return _split_chars(text, budget, count, done)
    joiner, pattern = _SEPARATORS[level]
    spans = _spans(text, pattern)
    if len(spans) == 1:
        return _split_parts(text, level + 1, budget, count, done)
    out: list[tuple[str, int, str]] = []
    current: tuple[int, int, str] | None = None  # the part being filled: start, end, joiner

    def fits(last: int, first: int, limit: int) -> bool:
        """Whether the text from `first` to the end of span `last` is within `limit`."""
        return count(text[first : spans[last][1]]) <= limit

    index = 0
    while index < len(spans):
        start, end = spans[index]
        index += 1
        if current:
            # The part takes the spans that fit: found by galloping, not span by span,
            # which recounts the growing part each time (quadratic on a giant paragraph).
            first, limit = current[0], budget.at(done + len(out))
            last = furthest(index - 2, len(spans) - 1, partial(fits, first=first, limit=limit))
            if last > index - 2:
                current, index = (first, spans[last][1], current[2]), last + 1
                continue
            out.append((text[current[0] : current[1]], current[0], current[2]))
        if count(text[start:end]) <= budget.at(done + len(out)):
            current = (start, end, joiner)
            continue
        inner = _split_parts(text[start:end], level + 1, budget, count, done + len(out))
        parts = [
            (part, start + offset, joiner if n == 0 else inner_joiner)
            for n, (part, offset, inner_joiner) in enumerate(inner)
        ]
        out.extend(parts[:-1])
        # The rest of a span cut finer takes the spans after it while they fit, rather
        # than standing alone as a crumb.
        part, offset, part_joiner = parts[-1]
        current = (offset, offset + len(part), part_joiner)
    if current:
        out.append((text[current[0] : current[1]], current[0], current[2]))
    return out


def _spans(text: str, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    spans, position = [], 0
    for match in pattern.finditer(text):
        if match.start() > position:
            spans.append((position, match.start()))
        position = match.end()
    if position < len(text):
        spans.append((position, len(text)))
    return spans or [(0, len(text))]


def _split_chars(
    text: str, budget: Budget, count: Callable[[str], int], done: int
) -> list[tuple[str, int, str]]:
    """Last resort for a 'word' over budget (a long URL, base64): cut by characters."""

    def fits(end: int, start: int, limit: int) -> bool:
        return count(text[start:end]) <= limit

    out: list[tuple[str, int, str]] = []
    position = 0
    while position < len(text):
        limit = budget.at(done + len(out))
        # the longest prefix within the limit; at least one character
        end = furthest(position + 1, len(text), partial(fits, start=position, limit=limit))
        out.append((text[position:end], position, ""))
        position = end
    return out


# A word, with a heading marker before it and a setext underline after it: a cut there
# would leave a lone '#', or a title line that no longer reads as a heading.
_WORD = re.compile(r"(?:#{1,6}[ \t]+)?\S+(?:\n" + SETEXT_UNDERLINE.pattern + r"(?=\n|$))?")


def fill_text(
    text: str,
    first_line: int,
    limit: int,
    count: Sizer,
    *,
    from_end: bool = False,
    text_first: bool = False,
) -> list[Piece]:
    """Cut text at white space, whatever its structure, into pieces as full as `limit`
    allows; only the piece at the far end holds the rest (the last one, or the first
    `from_end`). For headings longer than a chunk: a piece of them with room to spare
    would be a chunk of headings alone, so every piece but the one that goes next to
    content is full. With `text_first`, the first piece takes words of the next until it
    holds more than headings (it has no chunk to join)."""
    words = [match.span() for match in _WORD.finditer(text)]

    def fits(first: int, last: int) -> bool:
        return count(text[words[first][0] : words[last][1]]) <= limit

    ranges: list[tuple[int, int]] = []  # first and last word of each piece
    low, high = 0, len(words) - 1  # the words not yet in a piece, both ends included
    while low <= high:
        if from_end:  # the fewest words that still end at `high`: at least one
            first = furthest(high, low, partial(fits, last=high))
            ranges.insert(0, (first, high))
            high = first - 1
        else:
            last = furthest(low, high, partial(fits, low))
            ranges.append((low, last))
            low = last + 1
    while text_first and len(ranges) > 1:
        (first, last), (_, rest_last) = ranges[0], ranges[1]
        piece = text[words[first][0] : words[last][1]]
        if not all(b.kind == HEADING for b in parse_blocks(piece.split("\n"))):
            break
        if not fits(first, last + 1):
            break
        ranges[0:2] = [(first, last + 1)] + (
            [(last + 2, rest_last)] if last + 1 < rest_last else []
        )
    pieces: list[Piece] = []
    previous_end = 0
    for first, last in ranges:
        start, end = words[first][0], words[last][1]
        joiner = text[previous_end:start] if pieces else None
        span_text = text[start:end]
        parts = [(span_text, 0, "")]
        if count(span_text) > limit:  # one word over the limit
            parts = _split_chars(span_text, Budget(limit, limit), count, 0)
        for part, offset, _ in parts:
            line = first_line + text.count("\n", 0, start + offset)
            pieces.append(Piece(part, count(part), line, line + part.count("\n") + 1, joiner))
            joiner = ""
        previous_end = end
    return pieces


def furthest(near: int, far: int, ok: Callable[[int], bool]) -> int:
    """The index furthest from `near` towards `far` (either direction) for which `ok`
    holds, assuming it holds up to some point and not beyond; `near` when none does.

    It gallops out from `near` (1, 2, 4, ... steps) and then bisects: the cost follows
    the answer's distance, not the whole range's. Here `ok` counts the tokens of a text
    that grows with the index, so trying `far` first would count a giant page whole for
    every piece cut from it."""
    step = 1 if far >= near else -1
    good, bad, reach = near, far + step, 1
    while good != far:
        probe = near + step * min(reach, abs(far - near))
        if not ok(probe):
            bad = probe
            break
        good, reach = probe, reach * 2
    while abs(bad - good) > 1:
        middle = (good + bad) // 2
        if ok(middle):
            good = middle
        else:
            bad = middle
    return good
