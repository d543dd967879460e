"""Markdown -> a flat list of top-level blocks with their line spans (mistletoe, block level).

Only block structure matters for chunking, so only mistletoe's block rules are used, at
the top level, and no inline parsing is done (it is most of mistletoe's time). A block's
text is never re-rendered: it is the page's own lines, sliced by the span mistletoe
reports, so chunk text stays verbatim.

Thread-safe: a parse touches no global state. mistletoe's block reading keeps its state in
module globals and classes (the block types to try, whether setext headings are on, the
heading or fence `start` just matched, the document collecting link references), so this
module has its own top-level reader (`_read_blocks`) that takes the block types as an
argument, and its own versions of the `start`/`read` steps that keep state; mistletoe's
pure steps (patterns, markers, tables, indented code) are called as they are.

Parsing gives `ParsedBlock`s: kinds and spans. The page turns each of its blocks into a
`Block` in one step, with its text and token count (`count_block`), and packing works
with those; blocks parsed inside a list item, a quote or a chunk stay parsed blocks, and
are counted only where one is cut (`pieces.split_block`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from mistletoe.block_token import (
    BlockCode,
    CodeFence,
    Footnote,
    Heading,
    List,
    ListItem,
    Paragraph,
    Quote,
    Table,
    ThematicBreak,
)
from mistletoe.block_tokenizer import FileWrapper

from firechunk.chunker.headings import heading_text
from firechunk.chunker.sizer import Sizer
from firechunk.chunker.syntax import MAYBE_FENCE, closes_fence, maybe_lines, opening_fence

HEADING, PARAGRAPH, CODE, TABLE, LIST, QUOTE, RULE, OTHER = (
    "heading",
    "paragraph",
    "code",
    "table",
    "list",
    "quote",
    "rule",
    "other",
)

_KINDS = {
    "Heading": HEADING,
    "SetextHeading": HEADING,
    "Paragraph": PARAGRAPH,
    "CodeFence": CODE,
    "BlockCode": CODE,
    "Table": TABLE,
    "List": LIST,
    "Quote": QUOTE,
    "ThematicBreak": RULE,
}


class ParsedBlock(NamedTuple):
    """A block as the parser finds it: its kind and the lines it spans (`start`/`end`
    index the lines it was parsed from, `end` exclusive), with what its kind adds."""

    kind: str
    start: int
    end: int
    level: int = 0  # heading level, 1-6
    title: str = ""  # clean heading text
    fence: str = ""  # opening fence line of fenced code ("```sql")
    items: tuple[int, ...] = ()  # start lines of top-level list items


class Block(NamedTuple):
    """A parsed block with its text (its lines, joined) and the text's exact token count,
    both set as it is built (`count_block`): the page's blocks, as packing uses them."""

    kind: str
    start: int
    end: int
    level: int
    title: str
    fence: str
    items: tuple[int, ...]
    text: str
    tokens: int


def count_block(block: ParsedBlock, lines: list[str], sizer: Sizer) -> Block:
    """`block` with its text, from `lines` (the lines it was parsed from), and its count."""
    text = "\n".join(lines[block.start : block.end])
    return Block._make((*block, text, sizer.count(text)))


# -- reading the top-level blocks -------------------------------------------------------
#
# mistletoe tries each block type on a line (`start`) and lets the first that matches read
# its lines (`read`). Its `read`s of paragraphs, quotes and list items also ask the other
# types whether the next line interrupts them (`check_interrupts_paragraph`), and its list
# items and quotes parse their insides. The steps below are mistletoe 1.6's, line for
# line, less the state: what a `start` matched is handed to `read`, the types come in as
# an argument, and nothing below the top level is parsed (chunking never looks at it:
# mistletoe finds where an item or a quote ends from its lines alone).


class _Type(NamedTuple):
    """A block type as the top-level reader tries it."""

    name: str  # mistletoe's token name, for `_KINDS`
    start: Callable[[str], Any]  # truthy when the type can start on the line: what it matched
    read: Callable[[FileWrapper, Any, _Types], Any]  # None: not this type after all
    interrupts: Callable[[FileWrapper], Any] | None  # whether the next line ends a paragraph


class _Types(NamedTuple):
    """The types a page's lines are tried with, in order, and those that may end a
    paragraph, a quote and a list item (mistletoe's `breaking_tokens` of each, which it
    reads from its global type list)."""

    order: tuple[_Type, ...]
    end_paragraph: tuple[Callable[[FileWrapper], Any], ...]
    end_quote: tuple[Callable[[FileWrapper], Any], ...]
    end_item: tuple[Callable[[FileWrapper], Any], ...]


class _Setext(NamedTuple):
    """A paragraph that turned out to be a setext heading."""

    level: int
    content: str


def _heading_start(line: str) -> tuple[int, str] | None:
    """`Heading.start`, giving the level and text it matched instead of keeping them."""
    match = Heading.pattern.match(line)
    if match is None:
        return None
    content = (match.group(2) or "").strip()
    return len(match.group(1)), "" if set(content) == {"#"} else content


def _heading_interrupts(lines: FileWrapper) -> bool:
    return Heading.pattern.match(lines.peek()) is not None


def _read_heading(lines: FileWrapper, started: tuple[int, str], types: _Types) -> tuple[int, str]:
    next(lines)
    return started


def _fence_start(line: str) -> tuple[int, str] | None:
    """`CodeFence.start`, giving the fence's indent and leader instead of keeping them."""
    match = CodeFence.pattern.match(line)
    if not match:
        return None
    prepend, leader, info_string, _ = match.groups()
    if leader[0] == "`" and "`" in info_string:
        return None
    return len(prepend), leader


def _fence_interrupts(lines: FileWrapper) -> bool:
    return _fence_start(lines.peek()) is not None


def _read_fence(lines: FileWrapper, started: tuple[int, str], types: _Types) -> tuple[int, str]:
    """`CodeFence.read`: up to and with the closing fence, or to the end."""
    leader = started[1]
    next(lines)
    for line in lines:
        stripped = line.lstrip(" ")
        if (
            stripped.startswith(leader)
            and len(stripped.split(maxsplit=1)) == 1
            and len(line) - len(stripped) < 4
        ):
            break
    return started


def _read_quote(lines: FileWrapper, started: Any, types: _Types) -> tuple[()]:
    """`Quote.read`, without parsing the quote's insides."""
    line = Quote.convert_leading_tabs(next(lines).lstrip()).split(">", 1)[1]
    if len(line) > 0 and line[0] == " ":
        line = line[1:]
    in_code_fence = _fence_start(line) is not None
    in_block_code = BlockCode.start(line)
    blank_line = line.strip() == ""
    next_line = lines.peek()
    ends = types.end_quote
    while (
        next_line is not None
        and next_line.strip() != ""
        and not any(interrupts(lines) for interrupts in ends)
    ):
        stripped = Quote.convert_leading_tabs(next_line.lstrip())
        if stripped[0] == ">":  # has a leader, not lazy continuation
            prepend = 2 if stripped[1] == " " else 1
            stripped = stripped[prepend:]
            in_code_fence = _fence_start(stripped) is not None
            in_block_code = BlockCode.start(stripped)
            blank_line = stripped.strip() == ""
        elif in_code_fence or in_block_code or blank_line:
            break  # not paragraph continuation text
        next(lines)
        next_line = lines.peek()
    return ()


def _read_paragraph(lines: FileWrapper, started: Any, types: _Types) -> _Setext | tuple[()]:
    """`Paragraph.read`, with setext headings always on (mistletoe turns them off only
    inside a quote): a setext heading comes back as its level and text."""
    first = lines.get_pos() + 1
    next(lines)
    next_line = lines.peek()
    ends = types.end_paragraph
    while next_line is not None and next_line.strip() != "":
        if any(interrupts(lines) for interrupts in ends):
            break
        if Paragraph.setext_pattern.match(next_line):
            underline = next(lines).rstrip()
            content = "\n".join(line.strip() for line in lines.lines[first : lines.get_pos()])
            return _Setext(1 if underline.endswith("=") else 2, content)
        if ThematicBreak.check_interrupts_paragraph(lines):
            break
        next(lines)
        next_line = lines.peek()
    return ()


def _read_list(lines: FileWrapper, started: Any, types: _Types) -> list[int]:
    """`List.read`: the index of each item's first line."""
    leader = next_marker = None
    items = []
    while True:
        anchor = lines.get_pos()
        (item, item_leader), next_marker = _read_item(lines, next_marker, types)
        if leader is None:
            leader = item_leader
        elif not List.same_marker_type(leader, item_leader):
            lines.set_pos(anchor)
            break
        items.append(item)
        if next_marker is None:
            break
    return items


def _read_item(lines: FileWrapper, marker: Any, types: _Types) -> tuple[tuple[int, str], Any]:
    """`ListItem.read`, without parsing the item's insides: where the item starts, its
    leader, and the marker of the next item, if one follows."""
    next_marker = None
    line = next(lines)
    item = lines.get_pos()
    next_line = lines.peek()
    indentation, prepend, leader, content = marker if marker else ListItem.parse_marker(line)
    if content.strip() == "":  # an item starting with a blank line
        prepend = indentation + len(leader) + 1
        blanks = 1
        while next_line is not None and next_line.strip() == "":
            blanks += 1
            next(lines)
            next_line = lines.peek()
        if blanks > 1:  # an empty item
            next_marker = ListItem.parse_marker(next_line) if next_line is not None else None
            return (item, leader), next_marker
    ends = types.end_item
    newlines = 0
    while True:
        if next_line is None:
            if newlines:
                lines.backstep()
            break
        continuation = ListItem.parse_continuation(next_line, prepend)
        if not continuation:
            # lazy continuation, unless another block starts, a new item, or a blank before
            if any(interrupts(lines) for interrupts in ends):
                if newlines:
                    lines.backstep()
                break
            marker_info = ListItem.parse_marker(next_line)
            if marker_info is not None:
                next_marker = marker_info
                break
            if newlines:
                lines.backstep()
                break
            continuation = next_line
        newlines = newlines + 1 if continuation == "\n" else 0
        next(lines)
        next_line = lines.peek()
    return (item, leader), next_marker


def _read_footnote(lines: FileWrapper, started: Any, types: _Types) -> list | None:
    """`Footnote.read` (link reference definitions), without filing them anywhere."""
    read = []
    next_line = lines.peek()
    while next_line is not None and next_line.strip() != "":
        read.append(next(lines))
        next_line = lines.peek()
    string = "".join(read)
    offset = 0
    matches = []
    while offset < len(string) - 1:
        match_info = Footnote.match_reference(string, offset)
        if match_info is None:  # give back the lines not consumed
            lines.set_pos(lines.get_pos() - string[offset:].count("\n"))
            break
        offset, match = match_info
        matches.append(match)
    return matches or None


def _read_plain(read: Callable[[FileWrapper], Any]) -> Callable[[FileWrapper, Any, _Types], Any]:
    """A mistletoe `read` that keeps no state, as the top-level reader calls it."""
    return lambda lines, started, types: read(lines)


# mistletoe's block types, in its order (`block_token.__all__`).
_BLOCK_CODE = _Type("BlockCode", BlockCode.start, _read_plain(BlockCode.read), None)
_HEADING = _Type("Heading", _heading_start, _read_heading, _heading_interrupts)
_QUOTE = _Type("Quote", Quote.start, _read_quote, Quote.check_interrupts_paragraph)
_CODE_FENCE = _Type("CodeFence", _fence_start, _read_fence, _fence_interrupts)
_THEMATIC_BREAK = _Type(
    "ThematicBreak",
    ThematicBreak.start,
    _read_plain(ThematicBreak.read),
    ThematicBreak.check_interrupts_paragraph,
)
_LIST = _Type("List", List.start, _read_list, List.check_interrupts_paragraph)
_TABLE = _Type("Table", Table.start, _read_plain(Table.read), Table.check_interrupts_paragraph)
_FOOTNOTE = _Type("Footnote", Footnote.start, _read_footnote, None)
_PARAGRAPH = _Type("Paragraph", Paragraph.start, _read_paragraph, None)
_ALL_TYPES = (
    _BLOCK_CODE,
    _HEADING,
    _QUOTE,
    _CODE_FENCE,
    _THEMATIC_BREAK,
    _LIST,
    _TABLE,
    _FOOTNOTE,
    _PARAGRAPH,
)

# What a line must start with for each block type to start there or to interrupt a
# paragraph (the `start` and `check_interrupts_paragraph` of each type, loosened). At the
# top level these are only ever tried on the page's own lines, so a type none of whose
# marks appears in the page can never match, and is left out of the parse. Each pattern
# starts with the newline before the line: the regex jumps from newline to newline.
_MARKS = {
    _BLOCK_CODE: re.compile(r"\n(?: {4}| {0,3}\t)"),
    _HEADING: re.compile(r"\n {0,3}#"),
    _QUOTE: re.compile(r"\n {0,3}>"),
    _CODE_FENCE: re.compile(r"\n {0,3}(?:```|~~~)"),
    _THEMATIC_BREAK: re.compile(r"\n {0,3}([-_*])[^\S\n]*\1[^\S\n]*\1"),
    _LIST: re.compile(r"\n {0,3}(?:\d{0,9}[.)]|[-+*])"),
    _TABLE: re.compile(r"\|"),
    _FOOTNOTE: re.compile(r"\n\s*\["),
}


def _possible_types(skeleton: list[str]) -> _Types:
    """mistletoe's block types, less those that cannot start on any line of `skeleton`."""
    text = "\n" + "".join(skeleton)
    order = tuple(t for t in _ALL_TYPES if t not in _MARKS or _MARKS[t].search(text))

    def ends(but: _Type) -> tuple[Callable[[FileWrapper], Any], ...]:
        return tuple(t.interrupts for t in order if t.interrupts is not None and t is not but)

    return _Types(order, ends(_THEMATIC_BREAK), ends(_QUOTE), ends(_LIST))


def _read_blocks(skeleton: list[str], types: _Types) -> list[tuple[str, Any, int]]:
    """mistletoe's `tokenize_block` at the top level with `types`: each block's token name,
    what its `read` gave, and the index of its first line. Blank lines are passed over
    first (mistletoe does so only after every type has turned one down, and half the lines
    are blank); link reference definitions make no block."""
    lines = FileWrapper(skeleton)
    found = []
    line = lines.peek()
    while line is not None:
        if line == "\n":
            next(lines)
        else:
            for block_type in types.order:
                started = block_type.start(line)
                if started:
                    first = lines.get_pos() + 1
                    result = block_type.read(lines, started, types)
                    if result is not None:
                        if block_type is not _FOOTNOTE:
                            name = "SetextHeading" if type(result) is _Setext else block_type.name
                            found.append((name, result, first))
                        break
            else:  # a line no type takes
                next(lines)
        line = lines.peek()
    return found


def parse_blocks(lines: list[str]) -> list[ParsedBlock]:
    """Split markdown lines into top-level blocks covering every non-blank line."""
    skeleton, rows = _skeleton(lines)
    found = [
        (name, result, rows[first])
        for name, result, first in _read_blocks(skeleton, _possible_types(skeleton))
    ]
    blocks = []
    for index, (name, result, start) in enumerate(found):
        limit = found[index + 1][2] if index + 1 < len(found) else len(lines)
        end = _trim_blank_tail(lines, start, limit)
        if end > start + 1 or lines[start].strip():  # a tab-only line parses as code
            blocks.append(_make_block(name, result, lines, start, end, rows))
    return blocks


def _skeleton(lines: list[str]) -> tuple[list[str], list[int]]:
    """The lines without the bodies of fenced code blocks, and where each line came from.

    A code body is opaque to the block structure, and parsing it line by line is a third
    of mistletoe's time on docs pages; spans are mapped back to the full lines. Lines end
    in a newline, as mistletoe expects.
    """
    rows: list[int] = []
    fence: str | None = None
    kept_from = 0  # first line of the stretch outside fenced code being collected
    for row in maybe_lines(MAYBE_FENCE, lines):
        if fence is None:
            fence = opening_fence(lines[row])
            if fence:
                rows.extend(range(kept_from, row + 1))
        elif closes_fence(lines[row], fence):
            fence = None
            kept_from = row
    if fence is None:
        rows.extend(range(kept_from, len(lines)))
    return [lines[row] + "\n" for row in rows], rows


def _trim_blank_tail(lines: list[str], start: int, end: int) -> int:
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _make_block(name: str, result, lines: list[str], start: int, end: int, rows) -> ParsedBlock:
    kind = _KINDS.get(name, OTHER)
    if name == "Heading" or name == "SetextHeading":
        level, content = result
        return ParsedBlock(kind, start, end, level=level, title=heading_text(content))
    if name == "CodeFence":
        return ParsedBlock(kind, start, end, fence=lines[start].strip())
    if kind == LIST:
        items = tuple(rows[item] for item in result)  # result: each item's first line
        return ParsedBlock(kind, start, end, items=items)
    return ParsedBlock(kind, start, end)
