"""What `firechunk search` shows of a hit: the sentence that best matches the question,
as plain words.

A chunk's text is the markdown the chunker kept (headings, setext underlines, tables, code
fences, links), and its start is seldom the part that matched: printed raw, a hit reads
`Webhooks ========` or `| --- | --- |` cut mid-word. `snippet` strips the markdown, splits
the text into sentences (a code line, a table row and a list item are each one), picks the
one sharing the most words with the question (stop words dropped, a light suffix strip so
"failing" meets "failed"; ties go to longer words, then to the earlier sentence) and shows
it with what follows, about `WIDTH` characters cut at a word, " …" where text was left
out. Pure functions on strings, no database and no embedder: unit-tested on their own
(tests/test_search_output.py) and cheap to import.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

WIDTH = 200  # characters of a snippet, ellipses aside
CUT = "…"  # where text was left out

STOP_WORDS = frozenset(
    """a about after all an and any are as at be been before but by can could did do does
    for from had has have how i if in into is it its me my no not of on or our should so
    than that the their them then there these they this those to up was we were what when
    where which who whom why will with would you your""".split()  # noqa: SIM905
)

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_ATX = re.compile(r"^\s{0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$")
_UNDERLINE = re.compile(r"^\s{0,3}(?:=+|-+)\s*$")  # setext: `====` or `----` under a heading
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_TABLE_RULE = re.compile(r"^[\s|:-]*$")  # | --- | :-: |, when it has a pipe and a dash
_BULLET = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_LINK_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_IMAGE = re.compile(r"!\[[^\]]*\]\((?:[^()]|\([^()]*\))*\)")
_LINK = re.compile(r"\[([^\]]*)\]\((?:[^()]|\([^()]*\))*\)")
_REFERENCE_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_COMMENT = re.compile(r"<!--.*?-->")
_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)")
_EMPHASIS = re.compile(
    r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])|(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)"
)
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"\w+")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")  # `\_`: markdown's escaped punctuation
_ESCAPED = re.compile(r"\0(\d+)\0")  # one, while the emphasis patterns run


@dataclass(frozen=True)
class _Sentence:
    text: str
    block: int  # sentences of one paragraph share it
    heading: bool = False


def snippet(markdown: str, question: str, width: int = WIDTH) -> str:
    """The sentence of `markdown` sharing the most words with `question`, then what
    follows (or, near the end, what comes before) up to `width` characters; the start of
    the text when no sentence shares a word."""
    sentences = _sentences(markdown)
    shown = [s for s in sentences if not s.heading] or sentences
    if not shown:
        return ""
    asked = {_stem(word) for word in _words(question) if word not in STOP_WORDS}

    def matched(n: int) -> tuple[int, int, int]:
        common = asked & {_stem(word) for word in _words(shown[n].text)}
        return len(common), sum(map(len, common)), -n

    best = max(range(len(shown)), key=matched)
    if matched(best)[0] == 0:
        best = 0
    after = _joined(shown[best:])
    if len(after) > width:
        return (f"{CUT} " if best else "") + _head(after, width) + f" {CUT}"
    before = _tail(_joined(shown[:best]), width - len(after) - 1) if best else ""
    if not before:
        return (f"{CUT} " if best else "") + after
    whole = before == _joined(shown[:best])
    return ("" if whole else f"{CUT} ") + before + _separator(shown[best - 1], shown[best]) + after


def plain(markdown: str) -> str:
    """All of `markdown` as plain words, headings included: what a snippet is cut from."""
    return _joined(_sentences(markdown))


def _joined(sentences: list[_Sentence]) -> str:
    parts: list[str] = []
    for n, sentence in enumerate(sentences):
        if n:
            parts.append(_separator(sentences[n - 1], sentence))
        parts.append(sentence.text)
    return "".join(parts)


def _separator(before: _Sentence, after: _Sentence) -> str:
    """A space within a paragraph or after a full stop; between a heading, a list item, a
    table row or a code line and what follows, a middle dot, so they do not run together."""
    if before.block == after.block or before.text[-1:] in ".!?:;,":
        return " "
    return " · "


def _head(text: str, width: int) -> str:
    """The first `width` characters of `text`, cut at a word."""
    cut = text[: width + 1].rsplit(" ", 1)[0]
    if len(cut) > width:  # one long word
        cut = text[:width]
    return cut.rstrip(" ·")


def _tail(text: str, width: int) -> str:
    """The last `width` characters or fewer of `text`, cut at a word."""
    if len(text) <= width:
        return text
    if width <= 0:
        return ""
    part = text[-(width + 1) :]
    return part.split(" ", 1)[1].lstrip(" ·") if " " in part else ""


def _sentences(markdown: str) -> list[_Sentence]:
    sentences: list[_Sentence] = []
    paragraph: list[str] = []
    fence = ""

    def add(text: str, heading: bool = False, split: bool = True) -> None:
        text = " ".join(text.split())
        if not text:
            return
        block = (sentences[-1].block + 1) if sentences else 0
        for part in _SENTENCE_END.split(text) if split else [text]:
            sentences.append(_Sentence(part, block, heading))

    def flush() -> None:
        if paragraph:
            add(_inline(" ".join(paragraph)))
            paragraph.clear()

    for line in markdown.splitlines():
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = ""
            else:
                add(stripped, split=False)  # a code line as it is
            continue
        opened = _FENCE.match(line)
        if opened:
            flush()
            fence = opened.group(1)
            continue
        if not stripped or _LINK_DEFINITION.match(line):
            flush()
            continue
        if _UNDERLINE.match(line) and paragraph:  # setext: the line above is a heading
            title = paragraph.pop()
            flush()
            add(_inline(title), heading=True, split=False)
            continue
        if (
            _UNDERLINE.match(line)
            or _RULE.match(line)
            or ("|" in line and "-" in line and _TABLE_RULE.match(line))
        ):
            flush()
            continue
        atx = _ATX.match(line)
        if atx:
            flush()
            add(_inline(atx.group(1) or ""), heading=True, split=False)
            continue
        if stripped.startswith("|"):  # a table row: its cells
            flush()
            cells = (_inline(cell) for cell in stripped.strip("|").split("|"))
            add(" · ".join(cell.strip() for cell in cells if cell.strip()), split=False)
            continue
        line = _QUOTE.sub("", line)
        if _BULLET.match(line):  # a list item starts a paragraph of its own
            flush()
            line = _BULLET.sub("", line)
        paragraph.append(line.strip())
    flush()
    return sentences


def _inline(text: str) -> str:
    """Text without its inline markdown: images dropped, links as their text, code spans
    as their code, no emphasis, HTML tags, entities or backslash escapes (`max\\_attempts`
    reads `max_attempts`)."""
    text = _IMAGE.sub("", text)
    text = _LINK.sub(lambda m: "" if m.group(1).strip() in ("", "#", "¶") else m.group(1), text)
    text = _REFERENCE_LINK.sub(r"\1", text)
    pieces = _CODE_SPAN.split(text)  # prose, ticks, code, prose, ticks, code, … prose
    for n in range(0, len(pieces), 3):
        # An escaped character is kept out of the emphasis patterns, then shown bare.
        prose = _ESCAPE.sub(lambda m: f"\0{ord(m.group(1))}\0", pieces[n])
        prose = _AUTOLINK.sub(r"\1", prose)
        prose = _TAG.sub("", _COMMENT.sub("", prose))
        for pattern in (_STRONG, _EMPHASIS, _STRIKE):
            prose = pattern.sub(lambda m: next(g for g in m.groups() if g is not None), prose)
        pieces[n] = html.unescape(_ESCAPED.sub(lambda m: chr(int(m.group(1))), prose))
    return "".join(pieces[n] for n in range(len(pieces)) if n % 3 != 1)


def _words(text: str) -> list[str]:
    return [word for word in _WORD.findall(text.lower()) if len(word) > 1]


def _stem(word: str) -> str:
    """A light suffix strip: failed, failing, fails -> fail; messages -> messag."""
    for suffix, instead in (("ies", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + instead
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word
