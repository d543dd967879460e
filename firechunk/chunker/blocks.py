"""Markdown -> a flat list of top-level blocks with their line spans (mistletoe, block level).

Only block structure matters for chunking, so inline parsing is switched off while we
parse (it is most of mistletoe's time). A block's text is never re-rendered: it is the
page's own lines, sliced by the span mistletoe reports, so chunk text stays verbatim.

Parsing gives `ParsedBlock`s: kinds and spans. The page turns each of its blocks into a
`Block` in one step, with its text and token count (`count_block`), and packing works
with those; blocks parsed inside a list item, a quote or a chunk stay parsed blocks, and
are counted only where one is cut (`pieces.split_block`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from mistletoe import block_token, block_tokenizer, span_token, token

from firechunk.chunker.headings import heading_text
from firechunk.chunker.sizer import Sizer
from firechunk.chunker.syntax import MAYBE_FENCE, closes_fence, opening_fence

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


@contextmanager
def _top_level_only(block_types: list[type]) -> Iterator[None]:
    """Let mistletoe find the top-level blocks and nothing below them.

    Inline parsing is off (every span becomes raw text), and the blocks inside a list item
    or a quote are not parsed: mistletoe finds where an item or a quote ends from its lines
    alone and parses their insides afterwards, which chunking never looks at. Together
    these were most of mistletoe's time on docs pages. Only `block_types` are tried (see
    `_possible_types`). Everything is restored on the way out, even when mistletoe raises.
    """
    saved_types, saved_tokenize = list(span_token._token_types), span_token.tokenize_inner
    saved_nested, saved_root = block_tokenizer.tokenize_block, token._root_node
    saved_blocks = list(block_token._token_types)
    block_token._token_types[:] = block_types
    span_token._token_types[:] = [span_token.RawText]
    span_token.tokenize_inner = _raw_text
    block_tokenizer.tokenize_block = _not_nested
    token._root_node = _Root()  # where link reference definitions are filed
    try:
        yield
    finally:
        block_token._token_types[:] = saved_blocks
        span_token._token_types[:] = saved_types
        span_token.tokenize_inner = saved_tokenize
        block_tokenizer.tokenize_block = saved_nested
        token._root_node = saved_root
        # mistletoe turns setext headings off while it parses a quote and back on after;
        # a quote that raises would leave them off for every later page of the process.
        block_token.Paragraph.parse_setext = True


class _Root:
    """Stands in for mistletoe's Document, which collects link reference definitions."""

    def __init__(self) -> None:
        self.footnotes: dict[str, tuple[str, str]] = {}


def _raw_text(content: str) -> list[span_token.RawText]:
    return [span_token.RawText(content)]


def _not_nested(*args, **kwargs) -> block_tokenizer.ParseBuffer:
    return block_tokenizer.ParseBuffer()


class _BlankLine:
    """Tried first at the top level: mistletoe passes over an empty line only after every
    block type has turned it down, and half the lines it sees are empty."""

    @staticmethod
    def start(line: str) -> bool:
        return line == "\n"

    @staticmethod
    def read(lines: block_tokenizer.FileWrapper) -> tuple[()]:
        next(lines)
        return ()


_TOKENIZE_BLOCK = block_tokenizer.tokenize_block  # the top-level pass, kept while patched

# What a line must start with for each block type to start there or to interrupt a
# paragraph (the `start` and `check_interrupts_paragraph` of each type, loosened). At the
# top level these are only ever tried on the page's own lines, so a type none of whose
# marks appears in the page can never match, and is left out of the parse. Each pattern
# starts with the newline before the line: the regex jumps from newline to newline.
_MARKS = {
    block_token.BlockCode: re.compile(r"\n(?: {4}| {0,3}\t)"),
    block_token.Heading: re.compile(r"\n {0,3}#"),
    block_token.Quote: re.compile(r"\n {0,3}>"),
    block_token.CodeFence: re.compile(r"\n {0,3}(?:```|~~~)"),
    block_token.ThematicBreak: re.compile(r"\n {0,3}([-_*])[^\S\n]*\1[^\S\n]*\1"),
    block_token.List: re.compile(r"\n {0,3}(?:\d{0,9}[.)]|[-+*])"),
    block_token.Table: re.compile(r"\|"),
    block_token.Footnote: re.compile(r"\n\s*\["),
}


def _possible_types(skeleton: list[str]) -> list[type]:
    """mistletoe's block types, less those that cannot start on any line of `skeleton`."""
    text = "\n" + "".join(skeleton)
    return [
        block_type
        for block_type in block_token._token_types
        if block_type not in _MARKS or _MARKS[block_type].search(text)
    ]


def parse_blocks(lines: list[str]) -> list[ParsedBlock]:
    """Split markdown lines into top-level blocks covering every non-blank line.

    mistletoe's read results are used as they are (kind, line, heading level and text, list
    items) without building its token tree, which would only be thrown away.
    """
    skeleton, rows = _skeleton(lines)
    block_types = _possible_types(skeleton)
    with _top_level_only(block_types):
        read = _TOKENIZE_BLOCK(skeleton, [_BlankLine, *block_types])
    found = [
        (_kind_of(token_type, result), result, rows[line_number - 1])
        for token_type, result, line_number in read
        if token_type is not _BlankLine and token_type is not block_token.Footnote
    ]  # link reference definitions make no token
    blocks = []
    for index, (name, result, start) in enumerate(found):
        limit = found[index + 1][2] if index + 1 < len(found) else len(lines)
        end = _trim_blank_tail(lines, start, limit)
        if end > start + 1 or lines[start].strip():  # a tab-only line parses as code
            blocks.append(_make_block(name, result, lines, start, end, rows))
    return blocks


def _kind_of(token_type, result) -> str:
    """The name of the token mistletoe would build: a paragraph that turns out to be a
    setext heading comes back as the heading itself."""
    if token_type is block_token.Paragraph and not isinstance(result, list):
        return type(result).__name__
    return token_type.__name__


def _skeleton(lines: list[str]) -> tuple[list[str], list[int]]:
    """The lines without the bodies of fenced code blocks, and where each line came from.

    A code body is opaque to the block structure, and parsing it line by line is a third
    of mistletoe's time on docs pages; spans are mapped back to the full lines. Lines end
    in a newline, as mistletoe expects.
    """
    rows: list[int] = []
    fence: str | None = None
    kept_from = 0  # first line of the stretch outside fenced code being collected
    for row in _maybe_fences(lines):
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


def _maybe_fences(lines: list[str]) -> list[int]:
    """Indices of the lines that may open or close fenced code, found in one regex pass."""
    text = "\n" + "\n".join(lines)
    found, line, position = [], -1, 0  # line index = newlines before its start, minus 1
    for match in MAYBE_FENCE.finditer(text):
        line += text.count("\n", position, match.start() + 1)
        position = match.start() + 1
        found.append(line)
    return found


def _trim_blank_tail(lines: list[str], start: int, end: int) -> int:
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _make_block(name: str, result, lines: list[str], start: int, end: int, rows) -> ParsedBlock:
    kind = _KINDS.get(name, OTHER)
    if name == "Heading":
        level, content, _ = result
        return ParsedBlock(kind, start, end, level=level, title=heading_text(content))
    if name == "SetextHeading":
        title = heading_text(_heading_source(result))
        return ParsedBlock(kind, start, end, level=result.level, title=title)
    if name == "CodeFence":
        return ParsedBlock(kind, start, end, fence=lines[start].strip())
    if kind == LIST:
        items = tuple(rows[item[4] - 1] for item in result)  # item: (…, start line)
        return ParsedBlock(kind, start, end, items=items)
    return ParsedBlock(kind, start, end)


def _heading_source(token) -> str:
    return "".join(getattr(child, "content", "") for child in token.children)
