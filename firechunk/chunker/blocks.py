"""Markdown -> a flat list of top-level blocks with their line spans (mistletoe, block level).

Only block structure matters for chunking, so inline parsing is switched off while we
parse (it is most of mistletoe's time). A block's text is never re-rendered: it is the
page's own lines, sliced by the span mistletoe reports, so chunk text stays verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from mistletoe import block_token, span_token

from firechunk.chunker.cleanup import closes_fence, opening_fence

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


@dataclass(slots=True)
class Block:
    """A top-level block: `start`/`end` index the cleaned lines, `end` exclusive."""

    kind: str
    start: int
    end: int
    level: int = 0  # heading level, 1-6
    title: str = ""  # clean heading text
    fence: str = ""  # opening fence line of fenced code ("```sql")
    items: tuple[int, ...] = ()  # start lines of top-level list items
    tokens: int = -1  # exact count of the block's text, once the page has counted it


@contextmanager
def _block_level_only() -> Iterator[None]:
    """Parse without inline tokens: every span becomes raw text."""
    saved_types, saved_tokenize = list(span_token._token_types), span_token.tokenize_inner
    span_token._token_types[:] = [span_token.RawText]
    span_token.tokenize_inner = _raw_text
    try:
        yield
    finally:
        span_token._token_types[:] = saved_types
        span_token.tokenize_inner = saved_tokenize
        # mistletoe turns setext headings off while it parses a quote and back on after;
        # a quote that raises (RecursionError on deep nesting) would leave them off for
        # every later page of the process.
        block_token.Paragraph.parse_setext = True


def _raw_text(content: str) -> list[span_token.RawText]:
    return [span_token.RawText(content)]


def parse_blocks(lines: list[str]) -> list[Block]:
    """Split markdown lines into top-level blocks covering every non-blank line."""
    skeleton, rows = _skeleton(lines)
    with _block_level_only():
        document = block_token.Document(skeleton)
    tokens = list(document.children)
    starts = [rows[token.line_number - 1] for token in tokens]
    blocks = []
    for index, token in enumerate(tokens):
        start = starts[index]
        limit = starts[index + 1] if index + 1 < len(tokens) else len(lines)
        end = _trim_blank_tail(lines, start, limit)
        if any(line.strip() for line in lines[start:end]):  # a tab-only line parses as code
            blocks.append(_make_block(token, lines, start, end, rows))
    return blocks


def _skeleton(lines: list[str]) -> tuple[list[str], list[int]]:
    """The lines without the bodies of fenced code blocks, and where each line came from.

    A code body is opaque to the block structure, and parsing it line by line is a third
    of mistletoe's time on docs pages; spans are mapped back to the full lines.
    """
    skeleton: list[str] = []
    rows: list[int] = []
    fence: str | None = None
    for row, line in enumerate(lines):
        if fence is None:
            fence = opening_fence(line)
        elif closes_fence(line, fence):
            fence = None
        else:
            continue
        skeleton.append(line)
        rows.append(row)
    return skeleton, rows


def _trim_blank_tail(lines: list[str], start: int, end: int) -> int:
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _make_block(token, lines: list[str], start: int, end: int, rows: list[int]) -> Block:
    kind = _KINDS.get(type(token).__name__, OTHER)
    block = Block(kind=kind, start=start, end=end)
    if kind == HEADING:
        block.level = token.level
        block.title = clean_heading(_heading_source(token))
    elif kind == CODE and type(token).__name__ == "CodeFence":
        block.fence = lines[start].strip()
    elif kind == LIST:
        block.items = tuple(rows[item.line_number - 1] for item in token.children)
    return block


def _heading_source(token) -> str:
    return "".join(getattr(child, "content", "") for child in token.children)


_ANCHOR = re.compile(r"\s*\[\\?#\]\((?:[^()\s]*|<[^>]*>)\)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_CODE_SPAN = re.compile(r"`+([^`]*)`+")
# `_` only marks emphasis at word edges (CommonMark): `pg_stat_statements` is one word.
_EMPHASIS = re.compile(
    r"(\*{1,3}|~~)(\S(?:.*?\S)?)\1|(?<![^\W_])(_{1,3})(\S(?:.*?\S)?)\3(?![^\W_])"
)
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_KEPT = re.compile(r"\x00(\d+)\x00")


def clean_heading(source: str) -> str:
    """Heading text as a reader sees it: no anchors, links, emphasis, code marks, tags or
    escapes. Code spans and escaped characters are set aside first, so that identifiers
    (`supabase_auth_admin`) and escaped marks (`\\*`) are not read as emphasis."""
    kept: list[str] = []

    def keep(match: re.Match[str]) -> str:
        kept.append(match.group(1))
        return f"\x00{len(kept) - 1}\x00"

    text = _ANCHOR.sub("", source)
    text = _CODE_SPAN.sub(keep, text)
    text = _ESCAPE.sub(keep, text)
    text = _LINK.sub(r"\1", text)
    text = _EMPHASIS.sub(lambda m: m.group(2) or m.group(4), text)
    text = _HTML_TAG.sub("", text)
    text = re.sub(r"\s+#+\s*$", "", text)  # closing sequence of an ATX heading
    text = text.rstrip().removesuffix("\\")  # a hard line break has no meaning in a heading
    text = _KEPT.sub(lambda m: kept[int(m.group(1))], text)
    return " ".join(text.split())
