"""One page in, chunk drafts out: clean-up, parse, pass 1, pass 2, pass 3.

Pure and deterministic; ids, duplicates across pages and overlap are the run's business
(`firechunk.run`), because they need to see every page.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Literal

from firechunk.chunker import boundaries
from firechunk.chunker.blocks import HEADING, Block, count_block, parse_blocks
from firechunk.chunker.cleanup import CleanedPage, CleanupOptions, clean_markdown
from firechunk.chunker.navigation import NAVIGATION, is_index_page, is_link_list
from firechunk.chunker.packing import pack_units
from firechunk.chunker.sections import (
    common_path,
    headers_of,
    naming_depth,
    split_sections,
    titles,
)
from firechunk.chunker.sizer import Sizer
from firechunk.chunker.split import Limits, Unit, build_units

MAX_REPACKS = 8  # re-packing converges in one or two rounds; this bounds the worst case


class PageRejected(ValueError):
    """The page cannot be chunked; `reason` is a short code for the quarantine record."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class DraftChunk:
    text: str
    tokens: int
    h1: str | None
    h2: str | None
    breadcrumb: list[str]  # the section that holds the whole chunk
    sections: list[list[str]]  # the heading path of each section the chunk holds text of
    source_lines: tuple[int, int]
    # The overlap text of the chunk after this one on its page ("" for the page's last).
    # Filled in by `firechunk.run.outcomes.chunk_pages`, in the worker (it decodes tokens).
    overlap: str = ""
    # "navigation" for a link list of an index page (`firechunk.chunker.navigation`), which
    # the loader keeps out of the vector index; None for content.
    kind: Literal["navigation"] | None = None


@dataclass
class PageChunks:
    chunks: list[DraftChunk]
    headings: list[tuple[int, str, int]]  # (level, title, source line) of every H1/H2
    content_hash: str
    tokens_before: int
    tokens_after: int
    removed_tokens: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ChunkerOptions:
    limits: Limits = Limits()
    cleanup: CleanupOptions = CleanupOptions()
    max_page_chars: int = 5_000_000
    # A page taking longer is quarantined as `timeout` (`firechunk.run.budget`); its
    # outcome is kept like any other, so the next night does not spend it again.
    page_seconds: float = 30.0
    # Whether each draft gets what validation checks of its text: a recount of its tokens
    # and its heading lines (`firechunk.run.outcomes`). A run held in memory, which nothing
    # validates, goes without: the recount alone is one more tiktoken pass over the text.
    validation_facts: bool = True
    # Whether the page's own figures are computed: its content hash (how a crawl finds
    # aliases) and its tokens before and after clean-up and removed by each rule (the
    # run's report). One page chunked alone (`firechunk.chunk_markdown`) needs none of
    # them, and counting the removed text alone costs a fifth of a tiktoken pass.
    page_figures: bool = True


def chunk_page(
    markdown: object,
    title: str,
    count: Sizer,
    options: ChunkerOptions | None = None,
    chrome: frozenset[str] = frozenset(),
    many_urls: bool = False,
) -> PageChunks:
    """`chrome`: the page's lines that the crawl shows to be chrome (`firechunk.run.chrome`).
    `many_urls`: the crawl got this same page at several URLs, each naming one of its
    sections, so those sections get chunks of their own (`packing`)."""
    options = options or ChunkerOptions()
    text = check_page(markdown, options)
    cleaned = clean_markdown(text, options.cleanup, chrome)
    blocks = [count_block(block, cleaned.lines, count) for block in parse_blocks(cleaned.lines)]
    if not any(block.kind != HEADING for block in blocks):
        raise PageRejected("header-only" if blocks else "empty", "no content besides headings")
    sections = split_sections(blocks)
    units = build_units(sections, cleaned.lines, options.limits, count)
    apart = naming_depth(titles(unit.path) for unit in units) if many_urls else 0
    groups = pack_units(units, options.limits, apart)
    groups = boundaries.attach_lone_headings(groups, options.limits)
    groups = boundaries.merge_small(groups, options.limits)
    groups, texts, tokens = _within_hard_limit(groups, options.limits, count)
    # Cutting for the hard limit may leave fragments; merge them where the text fits.
    merged = boundaries.merge_small(
        groups,
        options.limits,
        fits=lambda group: join_units(group, count)[1] <= options.limits.hard,
    )
    if len(merged) < len(groups):
        groups = merged
        texts, tokens = _join_groups(groups, count)
    fallback_h1 = _first_h1(blocks) or title
    chunks = [
        _draft(group, text, n, cleaned.source_lines, fallback_h1)
        for group, text, n in zip(groups, texts, tokens, strict=True)
    ]
    cleaned_text = "\n".join(cleaned.lines)
    _tag_navigation(chunks, cleaned_text)
    page = PageChunks(
        chunks=chunks,
        headings=[
            (b.level, b.title, cleaned.source_lines[b.start])
            for b in blocks
            if b.kind == HEADING and b.level <= 2
        ],
        content_hash="",
        tokens_before=0,
        tokens_after=0,
        warnings=cleaned.warnings,
    )
    if options.page_figures:
        _add_figures(page, cleaned, cleaned_text, blocks, count)
    return page


def _add_figures(
    page: PageChunks, cleaned: CleanedPage, cleaned_text: str, blocks: list[Block], count: Sizer
) -> None:
    """The page's content hash and token figures (`ChunkerOptions.page_figures`)."""
    page.removed_tokens = {
        rule: count("\n".join(parts)) for rule, parts in cleaned.removed.items() if parts
    }
    page.tokens_after = page_tokens(cleaned.lines, blocks, count)
    page.tokens_before = page.tokens_after + sum(page.removed_tokens.values())
    page.content_hash = content_hash(cleaned_text)


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
# A page is binary when one character in this many is a control character. Terminal
# output in a docs page (colour codes) is far below it; its control characters are
# removed by clean-up (`control_chars`) outside code.
BINARY_SHARE = 20
_HTML_DOCUMENT = re.compile(r"\s*(<!doctype html|<html[\s>]|<head[\s>]|<body[\s>])", re.I)


def check_page(markdown: object, options: ChunkerOptions) -> str:
    """The page's markdown if it is chunkable text, else PageRejected with the reason."""
    if not isinstance(markdown, str):
        raise PageRejected("not-text", f"markdown is {type(markdown).__name__}")
    if not markdown.strip():
        raise PageRejected("empty", "the page has no markdown")
    if len(markdown) > options.max_page_chars:
        raise PageRejected("too-large", f"{len(markdown):,} characters")
    if len(_CONTROL.findall(markdown)) > len(markdown) // BINARY_SHARE:
        raise PageRejected("binary", "control characters throughout: not a text page")
    if markdown.count("\ufffd") > max(3, len(markdown) // 1000):
        raise PageRejected("not-utf8", "undecodable bytes (U+FFFD) throughout the page")
    if _HTML_DOCUMENT.match(markdown):
        raise PageRejected("html", "raw HTML document instead of markdown")
    if (line := _too_deep(markdown)) is not None:
        raise PageRejected("too-deep", f"lists nested over {MAX_DEPTH} deep (line {line})")
    return markdown


# Parsing nested lists costs far more than linear in their depth: 150 levels
# take 0.3 s, 200 levels 1.1 s, 300 levels 4.6 s, 800 levels over a minute. Docs nest a few
# levels; a page nested past this is generated junk.
MAX_DEPTH = 100
_DEEP = re.compile(rf"^ {{{2 * MAX_DEPTH},}}(?:[-*+]|\d+[.)])[ \t]", re.M)
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.M)


def _too_deep(markdown: str) -> int | None:
    """The line (1-based) of the first list item nested past `MAX_DEPTH`, outside
    fenced code; None for a page without one. Most pages have no run of spaces that long,
    which a plain search rules out many times faster than the regex."""
    if " " * (2 * MAX_DEPTH) not in markdown:
        return None
    for match in _DEEP.finditer(markdown):
        before = markdown[: match.start()]
        if len(_FENCE.findall(before)) % 2 == 0:  # not inside a fence
            return before.count("\n") + 1
    return None


def content_hash(text: str) -> str:
    """sha256 of the text with whitespace runs collapsed: equal for texts that read the
    same (pages, to find aliases; chunks, to drop repeats and for validation to check).
    A lone surrogate (JSON allows one) is hashed as it is instead of failing."""
    normalised = " ".join(text.split())
    return hashlib.sha256(normalised.encode("utf-8", errors="surrogatepass")).hexdigest()


def join_units(units: list[Unit], count: Sizer) -> tuple[str, int]:
    """The chunk text (units in page order, separated as they were in the page) and its
    exact token count."""
    seps = [
        unit.joiner if unit.joiner is not None else "\n\n" if unit.start > before.end else "\n"
        for before, unit in zip(units, units[1:], strict=False)
    ]
    text = units[0].text + "".join(
        sep + unit.text for sep, unit in zip(seps, units[1:], strict=True)
    )
    stripped = text.strip("\n")
    if stripped != text:  # a unit's text opens or ends with a newline
        return stripped, count(stripped)
    return text, count.joined([(unit.text, unit.tokens) for unit in units], seps)


def page_tokens(lines: list[str], blocks: list[Block], count: Sizer) -> int:
    """Exact tokens of the cleaned page, from the counts of its blocks."""
    if not blocks:
        return count("\n".join(lines))
    parts, seps = _page_parts(lines, blocks, count)
    return count.joined(parts, seps)


def _page_parts(
    lines: list[str], blocks: list[Block], count: Sizer
) -> tuple[list[tuple[str, int]], list[str]]:
    """The page as counted parts and the separators that join them back into its text.

    The parts are the blocks' texts, and the text between blocks that no block claims
    (link definitions above the first block); blank lines between them are separators.
    Blank lines that open the page follow an empty first part; those that end it go
    with the last block.
    """
    parts: list[tuple[str, int]] = []
    seps: list[str] = []
    position = 0  # the first line that no part or separator holds yet
    for block in blocks:
        gap = "\n".join(lines[position : block.start])
        if gap.strip():  # text no block claims: a part of its own
            if parts:
                seps.append("\n")
            parts.append((gap, count(gap)))
            seps.append("\n")
        elif parts:  # the blank lines, if any, between two blocks
            seps.append(f"\n{gap}\n" if block.start > position else "\n")
        elif block.start > 0:  # the blank lines that open the page
            parts.append(("", 0))
            seps.append(f"{gap}\n")
        parts.append((block.text, block.tokens))
        position = block.end
    if position < len(lines):
        tail = "".join("\n" + line for line in lines[position:])
        text, tokens = parts[-1]
        parts[-1] = (text + tail, count.with_sep(text, tokens, tail))
    return parts, seps


def _within_hard_limit(
    groups: list[list[Unit]], limits: Limits, count: Sizer
) -> tuple[list[list[Unit]], list[str], list[int]]:
    """Groups whose exact text is within the hard limit, with their texts and counts:
    re-packed tighter where the estimate was wrong, and as a last resort cut as text."""
    texts, tokens = _join_groups(groups, count)
    for _ in range(MAX_REPACKS):
        repacked = boundaries.enforce_hard_limit(groups, texts, tokens, limits, count)
        if repacked is None:
            return groups, texts, tokens
        groups = repacked
        texts, tokens = _join_groups(groups, count)
    # Re-packing did not converge (pathological headings): cut what is left as text.
    groups = boundaries.cut_as_text(groups, texts, tokens, limits, count)
    return groups, *_join_groups(groups, count)


def _join_groups(groups: list[list[Unit]], count: Sizer) -> tuple[list[str], list[int]]:
    joined = [join_units(group, count) for group in groups]
    return [text for text, _ in joined], [tokens for _, tokens in joined]


def _tag_navigation(chunks: list[DraftChunk], page_text: str) -> None:
    """On an index page, the chunks that are link lists are navigation: kept, so search
    finds them by their words, but not embedded (see `firechunk.chunker.navigation`)."""
    if is_index_page(page_text):
        for chunk in chunks:
            if is_link_list(chunk.text):
                chunk.kind = NAVIGATION


def _first_h1(blocks) -> str | None:
    return next((b.title for b in blocks if b.kind == HEADING and b.level == 1), None)


def _draft(
    group: list[Unit], text: str, tokens: int, source_lines: list[int], fallback_h1: str
) -> DraftChunk:
    h1, h2 = headers_of(group[0].path)
    first = source_lines[group[0].start]
    last = source_lines[min(group[-1].end, len(source_lines)) - 1]
    paths = list(dict.fromkeys(unit.path for unit in group))
    return DraftChunk(
        text=text,
        tokens=tokens,
        h1=h1 or fallback_h1,
        h2=h2,
        breadcrumb=titles(common_path(paths)),
        sections=[titles(path) for path in paths],
        source_lines=(first, max(first, last)),
    )
