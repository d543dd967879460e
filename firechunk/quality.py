"""Independent checks of a chunking run against the pages it came from.

These are the figures the user judges a chunker by (issue 2). They re-derive the truth
from the cleaned page text with a plain line scan, not from the chunker's own structures,
so a chunker bug shows up here instead of being repeated.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field

from firechunk.chunker.cleanup import clean_markdown
from firechunk.chunker.headings import heading_text
from firechunk.chunker.split import Limits
from firechunk.run.chrome import chrome_lines
from firechunk.schemas.chunk import Chunk
from firechunk.schemas.page import CrawlResult
from firechunk.schemas.report import ChunkRun
from firechunk.tokens import TokenCounter
from firechunk.urls import page_url

_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_LINE_NUMBER_MARKER = re.compile(r"_\d+\\?")


@dataclass
class QualityFigures:
    pages: int = 0
    chunks: int = 0
    max_tokens: int = 0
    over_hard_limit: int = 0
    token_count_mismatches: int = 0
    code_blocks_fitting: int = 0
    code_blocks_split: int = 0
    headings_h1_h2: int = 0
    headings_missing: int = 0
    words_in_pages: int = 0
    words_missing: int = 0
    lines_checked: int = 0
    lines_under_wrong_header: int = 0
    duplicate_texts: int = 0
    small_chunks: int = 0
    chunks_of_pages_100_plus: int = 0
    header_only_chunks: int = 0
    chunk_tokens: int = 0
    chrome_tokens: int = 0
    line_number_markers: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def words_kept_pct(self) -> float:
        return 100.0 * (1 - self.words_missing / max(1, self.words_in_pages))

    @property
    def small_chunks_pct(self) -> float:
        return 100.0 * self.small_chunks / max(1, self.chunks_of_pages_100_plus)

    @property
    def chrome_share_pct(self) -> float:
        return 100.0 * self.chrome_tokens / max(1, self.chunk_tokens)

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "words_kept_pct": round(self.words_kept_pct, 4),
            "small_chunks_pct": round(self.small_chunks_pct, 3),
            "chrome_share_pct": round(self.chrome_share_pct, 3),
        }


def check_run(
    crawl: CrawlResult, run: ChunkRun, hard: int = Limits.hard, small: int = Limits.min_tokens
) -> QualityFigures:
    counter = TokenCounter(run.report.encoding)
    figures = QualityFigures(pages=len(run.pages), chunks=len(run.chunks))
    by_url: dict[str, list[Chunk]] = {}
    for chunk in run.chunks:
        by_url.setdefault(page_url(chunk), []).append(chunk)
    by_id = {chunk.chunk_id: chunk for chunk in run.chunks}
    dropped: dict[str, list[Chunk]] = {}
    for duplicate in run.report.duplicates:
        dropped.setdefault(duplicate.source_url, []).append(by_id[duplicate.duplicate_of])
    _check_chunks(run.chunks, counter, hard, figures)
    chrome = chrome_lines([page.markdown for page in crawl.data])
    _check_chrome(run.chunks, frozenset().union(*chrome), counter, figures)
    for page, record, page_chrome in zip(crawl.data, run.pages, chrome, strict=True):
        if record.status != "chunked" or not isinstance(page.markdown, str):
            continue
        chunks = by_url.get(record.canonical_url, [])
        cleaned = clean_markdown(page.markdown, chrome=page_chrome)
        lines = cleaned.lines
        _count_small(chunks, small, figures)
        _check_code(lines, chunks + dropped.get(record.canonical_url, []), counter, hard, figures)
        _check_headings(lines, chunks, figures)
        _check_words(lines, chunks + dropped.get(record.canonical_url, []), figures)
        _check_header_lines(cleaned, chunks, record.page_title, figures)
    return figures


def _check_chunks(
    chunks: list[Chunk], counter: TokenCounter, hard: int, figures: QualityFigures
) -> None:
    seen: Counter[str] = Counter()
    for chunk in chunks:
        text = chunk.data.text
        tokens = counter.count(text)
        figures.max_tokens = max(figures.max_tokens, tokens)
        figures.over_hard_limit += tokens > hard
        figures.token_count_mismatches += tokens != chunk.metadata.token_count
        seen[" ".join(text.split())] += 1
        if all(
            _heading_at(text.split("\n"), i) or not line.strip()
            for i, line in enumerate(text.split("\n"))
        ):
            figures.header_only_chunks += 1
            figures.examples.append(f"header-only chunk {chunk.chunk_id}")
    figures.duplicate_texts = sum(n - 1 for n in seen.values())


def _count_small(chunks: list[Chunk], small: int, figures: QualityFigures) -> None:
    """Small chunks among the chunks of pages whose chunks hold at least `small` tokens
    together: a page with less than that to give can only give a small chunk."""
    if sum(c.metadata.token_count for c in chunks) < small:
        return
    figures.chunks_of_pages_100_plus += len(chunks)
    figures.small_chunks += sum(c.metadata.token_count < small for c in chunks)


def _check_chrome(
    chunks: list[Chunk], chrome: frozenset[str], counter: TokenCounter, figures: QualityFigures
) -> None:
    """Tokens of chunk lines (outside code) that the crawl repeats on most of its pages,
    and line-number markers (`_12`, `_12\\`) left over from flattened code."""
    for chunk in chunks:
        lines = chunk.data.text.split("\n")
        figures.chunk_tokens += chunk.metadata.token_count
        for line, in_code in zip(lines, _code_line_flags(lines), strict=True):
            stripped = line.strip()
            if _LINE_NUMBER_MARKER.fullmatch(stripped):
                figures.line_number_markers += 1
            if not in_code and stripped in chrome:
                figures.chrome_tokens += counter.count(stripped)


def _heading_at(lines: list[str], i: int) -> tuple[int, str] | None:
    """(level, clean title) when line i is a heading line (ATX, or setext text/underline)."""
    line = lines[i]
    match = _ATX.match(line)
    if match:
        return len(match.group(1)), heading_text(match.group(2))
    if (
        line.strip()
        and i + 1 < len(lines)
        and _SETEXT.match(lines[i + 1])
        and not line.startswith(("-", "*", "|", "    "))
    ):
        return (1 if lines[i + 1].strip()[0] == "=" else 2), heading_text(line.strip())
    if _SETEXT.match(line) and i > 0 and lines[i - 1].strip() and _heading_at(lines, i - 1):
        return 0, ""  # the underline of a setext heading
    return None


def _code_blocks(lines: list[str]) -> list[str]:
    """Fenced code blocks of the page, every line stripped (blocks nest in list items)."""
    blocks, start, fence = [], 0, None
    for i, line in enumerate(lines):
        match = _FENCE.match(line)
        if fence is None and match:
            fence, start = match.group(1), i
        elif (
            fence is not None and line.strip().startswith(fence) and set(line.strip()) == {fence[0]}
        ):
            blocks.append(_strip_lines(lines[start : i + 1]))
            fence = None
    return blocks


def _strip_lines(lines: list[str]) -> str:
    return "\n".join(line.strip() for line in lines)


def _check_code(lines, chunks: list[Chunk], counter, hard, figures) -> None:
    texts = [_strip_lines(c.data.text.split("\n")) for c in chunks]
    for block in _code_blocks(lines):
        if counter.count(block) > hard:
            continue
        figures.code_blocks_fitting += 1
        if not any(block in text for text in texts):
            figures.code_blocks_split += 1
            figures.examples.append(f"code block split: {block[:60]!r}")


def _page_headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of the page's headings, skipping fenced code."""
    out, fence = [], None
    for i, line in enumerate(lines):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                fence = None
            continue
        heading = _heading_at(lines, i)
        if heading and heading[0]:
            out.append((i, heading[0], heading[1]))
    return out


def _check_headings(lines, chunks: list[Chunk], figures) -> None:
    covered: set[str] = set()
    for chunk in chunks:
        covered.update(filter(None, (chunk.data.headers.h1, chunk.data.headers.h2)))
        chunk_lines = chunk.data.text.split("\n")
        code = _code_line_flags(chunk_lines)
        covered.update(
            h[1]
            for i in range(len(chunk_lines))
            if not code[i] and (h := _heading_at(chunk_lines, i))
        )
    for _, level, title in _page_headings(lines):
        if level <= 2:
            figures.headings_h1_h2 += 1
            if title not in covered:
                figures.headings_missing += 1
                figures.examples.append(f"heading missing: {title!r}")


def _check_words(lines, chunks: list[Chunk], figures) -> None:
    page_words = Counter(w for line in lines if not _FENCE.match(line) for w in line.split())
    chunk_words = Counter(
        w
        for c in chunks
        for line in c.data.text.split("\n")
        if not _FENCE.match(line)
        for w in line.split()
    )
    missing = page_words - chunk_words
    figures.words_in_pages += sum(page_words.values())
    figures.words_missing += sum(missing.values())
    if missing:
        figures.examples.append(f"words missing: {list(missing.items())[:5]}")


def _check_header_lines(cleaned, chunks: list[Chunk], title: str, figures) -> None:
    """Every content line of a chunk must sit under the same H1/H2 as in the page."""
    lines = cleaned.lines
    truth = _headers_per_line(lines, title)
    for chunk in chunks:
        first, last = chunk.metadata.source_lines
        window = [i for i, n in enumerate(cleaned.source_lines) if first <= n <= last]
        h1, h2 = chunk.data.headers.h1, chunk.data.headers.h2
        chunk_lines = chunk.data.text.split("\n")
        code = _code_line_flags(chunk_lines)
        cursor = 0
        for i, line in enumerate(chunk_lines):
            heading = None if code[i] else _heading_at(chunk_lines, i)
            if heading and heading[0] in (1, 2):
                h1, h2 = (heading[1], None) if heading[0] == 1 else (h1, heading[1])
            if heading or not line.strip() or _FENCE.match(line):
                continue
            found = next((k for k in range(cursor, len(window)) if lines[window[k]] == line), None)
            if found is None:
                continue  # a repeated table header or a re-fenced piece: not a page line
            cursor = found + 1
            figures.lines_checked += 1
            if truth[window[found]] != (h1, h2):
                figures.lines_under_wrong_header += 1
                if figures.lines_under_wrong_header <= 5:
                    expected = truth[window[found]]
                    figures.examples.append(f"wrong header {line[:50]!r}: {(h1, h2)} vs {expected}")


def _code_line_flags(lines: list[str]) -> list[bool]:
    """True for lines inside fenced code (fence lines included)."""
    flags, fence = [], None
    for line in lines:
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            flags.append(True)
        elif fence is not None:
            flags.append(True)
            if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                fence = None
        else:
            flags.append(False)
    return flags


def _headers_per_line(lines: list[str], title: str) -> list[tuple[str, str | None]]:
    headings = {i: (level, text) for i, level, text in _page_headings(lines)}
    first_h1 = next((text for level, text in headings.values() if level == 1), None) or title
    h1, h2 = first_h1, None
    out: list[tuple[str, str | None]] = []
    for i in range(len(lines)):
        if i in headings and headings[i][0] <= 2:
            level, text = headings[i]
            h1, h2 = (text, None) if level == 1 else (h1, text)
        out.append((h1, h2))
    return out
