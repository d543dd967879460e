"""Overlap: what a reader of a chunk needs from the chunk before it.

The last heading line in force at the end of the previous chunk, and its last sentence,
at most `limit` tokens together. It is stored apart from the chunk text, so token counts
and duplicate detection see each line of the page once.
"""

from __future__ import annotations

import re

from firechunk.chunker.headings import heading_text
from firechunk.chunker.sizer import Sizer
from firechunk.chunker.syntax import (
    ATX_LINE,
    FENCE_LINE,
    FENCE_MARKS,
    SETEXT_UNDERLINE,
    closes_fence_flush,
    is_setext_underline,
    opening_fence,
)

# A setext heading (a title line and its underline) in a text of several lines.
_SETEXT_LINE = re.compile(r"^(\S.*)\n" + SETEXT_UNDERLINE.pattern + "$", re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# The pre-filter of `_SETEXT_LINE`: an underline anywhere in the text. Checked first, it
# spares most chunks, which have no setext heading, the slower reading of every line.
_UNDERLINE_LINE = re.compile(r"\n" + SETEXT_UNDERLINE.pattern + "$", re.M)
_BLANK_LINES = re.compile(r"\n\s*\n")


def overlap_after(previous_text: str, breadcrumb: list[str], counter: Sizer, limit: int) -> str:
    """The overlap a chunk carries from the chunk before it on its page, whose text and
    breadcrumb (the headings in force at its first line) are given."""
    heading = f"{'#' * min(len(breadcrumb), 6)} {breadcrumb[-1]}" if breadcrumb else None
    return overlap_text(previous_text, heading, counter, limit)


def overlap_text(
    previous_text: str, heading_in_force: str | None, counter: Sizer, limit: int
) -> str:
    found = _last_heading(previous_text)
    heading = _heading_line(found) if found else heading_in_force or ""
    sentence = last_sentence(previous_text)
    if sentence in (found, heading):
        sentence = ""
    budget = limit - (counter.count(heading) + 2 if heading else 0)
    if budget < 10:  # a heading too long to leave room: keep the sentence alone
        heading, budget = "", limit
    sentence = _tail_within(sentence, budget, counter)
    return "\n\n".join(part for part in (heading, sentence) if part)


def _heading_line(found: str) -> str:
    """A heading line of the text (ATX, or setext with its underline) as the overlap
    carries it: the marks of its level and its text as `heading_text` reads it."""
    line, _, underline = found.partition("\n")
    if underline:
        level = 1 if underline.strip().startswith("=") else 2
    else:
        level = len(line.lstrip()) - len(line.lstrip().lstrip("#"))
    return f"{'#' * level} {heading_text(line)}"


def _last_heading(text: str) -> str | None:
    """The last heading line outside fenced code (a "# comment" in a shell sample is no
    heading)."""
    if _UNDERLINE_LINE.search(text):  # rare: setext headings are read with code blanked
        text = _without_code(text)
        atx = list(ATX_LINE.finditer(text)) if "#" in text else []
        candidates = [(m.start(), m.group(0).strip()) for m in atx]
        candidates += [(m.start(), m.group(0).strip()) for m in _SETEXT_LINE.finditer(text)]
        return max(candidates)[1] if candidates else None
    return _last_atx(text, _code_spans(text) if _has_fence(text) else [])


def _last_atx(text: str, spans: list[tuple[int, int]]) -> str | None:
    """The last ATX heading line that starts outside `spans`, read backwards from each "#"
    (a literal search; a regex over the whole chunk is several times slower)."""
    position = len(text)
    while (position := text.rfind("#", 0, position)) >= 0:
        start = text.rfind("\n", 0, position) + 1
        code = next((span for span in spans if span[0] <= start < span[1]), None)
        if code is not None:
            position = code[0]
            continue
        end = text.find("\n", position)
        line = text[start : end if end >= 0 else len(text)]
        if ATX_LINE.match(line):
            return line.strip()
        position = start
    return None


def last_sentence(text: str) -> str:
    """The last sentence of the last paragraph (for code, its last lines).

    Paragraphs of one or two words ("Response", "Data source") are UI labels, not
    sentences: the last paragraph with three words or more is used instead.
    """
    body = (_without_fence_lines(text) if _has_fence(text) else text).strip()
    if not body:
        return ""
    flat = last = None  # read from the end: the last block, the last of three words or more
    for block in reversed(_BLANK_LINES.split(body)):
        if _is_heading(block.strip()):  # headings are carried apart, not as sentences
            continue
        words = block.split()
        if last is None:
            last = " ".join(words)
        if len(words) >= 3:
            flat = " ".join(words)
            break
    if last is None:
        return ""
    flat = flat if flat is not None else last
    sentences = [s for s in _SENTENCE_END.split(flat) if s]
    return sentences[-1] if sentences else flat


def _is_heading(block: str) -> bool:
    lines = block.split("\n")
    return bool(ATX_LINE.fullmatch(block)) or (
        len(lines) >= 2 and bool(is_setext_underline(lines[-1]))
    )


def _without_fence_lines(text: str) -> str:
    """The text with each fence line emptied (its newline kept)."""
    parts, kept_from = [], 0
    for start, end in _fence_mark_lines(text):
        if FENCE_LINE.match(text, start, end):
            parts.append(text[kept_from:start])
            kept_from = end
    parts.append(text[kept_from:])
    return "".join(parts)


def _has_fence(text: str) -> bool:
    return any(fence in text for fence in FENCE_MARKS)


def _without_code(text: str) -> str:
    """The text with the lines of fenced code blanked (line positions kept)."""
    parts, kept_from = [], 0
    for start, end in _code_spans(text):
        parts += [text[kept_from:start], "\n" * text.count("\n", start, end)]
        kept_from = end
    parts.append(text[kept_from:])
    return "".join(parts)


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Where fenced code is: from the start of each opening fence line to the end of its
    closing line (or of the text). Only lines holding a fence mark are read, found with
    `str.find`, which is many times faster than a regex or a loop over every line."""
    spans, fence, code_from = [], None, 0
    for start, end in _fence_mark_lines(text):
        line = text[start:end]
        if fence is None:
            fence = opening_fence(line)
            code_from = start
        elif closes_fence_flush(line, fence):
            spans.append((code_from, end))
            fence = None
    if fence is not None:  # an unclosed fence runs to the end of the text
        spans.append((code_from, len(text)))
    return spans


def _fence_mark_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line holding three backticks or tildes, in text order."""
    marks = []
    for mark in FENCE_MARKS:
        position = text.find(mark)
        while position >= 0:
            marks.append(position)
            position = text.find(mark, text.find("\n", position) + 1 or len(text))
    lines = {}
    for position in marks:
        start = text.rfind("\n", 0, position) + 1
        end = text.find("\n", position)
        lines[start] = len(text) if end < 0 else end
    return sorted(lines.items())


def _tail_within(text: str, limit: int, counter: Sizer) -> str:
    tail = counter.tail(text, limit)
    if tail is None:  # all of it fits
        return text
    return tail.split(" ", 1)[-1] if " " in tail else tail  # start at a whole word
