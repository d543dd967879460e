"""Heading text, one definition: what the chunker's metadata, the validation's coverage
table and the overlap text all call a heading.

Docs platforms decorate headings with anchor links that a reader never sees as words:
Supabase `[\\#](\\#slug)`, Mintlify `[​](https://…\\#slug)` (a zero-width space as the link
text), Sphinx and MkDocs `[¶](…\\#slug "Permalink to this headline")`, Docusaurus
`[​](#slug "Direct link to Title")`, plain empty links `[](#slug)`. On a heading line any
link whose text holds no letter or digit is such an anchor. Elsewhere (Sphinx puts `¶`
after every API signature) only links that say what they are — a permalink title or a
pilcrow — are anchors, so an ordinary link is never taken for one.
"""

from __future__ import annotations

import re

from firechunk.chunker.syntax import ATX_MARK, is_atx_heading, is_setext_underline

# A link's text and target: `[text](target "title")`, the target bare or in <angle brackets>.
# An escaped `\[` or `\!` is text, never part of a link.
_LINK_PARTS = (
    r"(?<!\\)(?P<bang>!?)(?<!\\)\[(?P<text>(?:\\.|[^\]\[\\\n])*)\]"
    r"\((?:[^()\s]*|<[^>\n]*>)(?:\s+\"(?P<title>[^\"\n]*)\")?\)"
)
_ANY_LINK = re.compile(r"[^\S\n]*" + _LINK_PARTS + r"[^\S\n]*")
_ANCHOR_TITLE = re.compile(r"permalink|permanent link|direct link|link to this", re.I)
_PILCROWS = frozenset("¶§")  # outside headings a `#` link may be a real link
_ATX_CLOSE = re.compile(r"[^\S\n]+#+[^\S\n]*$")


def _has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _is_heading_anchor(match: re.Match[str]) -> bool:
    return not _has_words(match.group("text")) or _is_permalink(match)


def _is_permalink(match: re.Match[str]) -> bool:
    title = match.group("title") or ""
    text = match.group("text").replace("\\", "").strip().strip("\u200b")
    return bool(_ANCHOR_TITLE.search(title)) or (text != "" and set(text) <= _PILCROWS)


def _is_invisible_anchor(match: re.Match[str]) -> bool:
    """A link a reader cannot see (empty or zero-width-space text) to a fragment, or a
    permalink; images are content and never anchors."""
    if match.group(0).lstrip().startswith("!"):
        return False
    text = match.group("text").replace("\u200b", "").strip()
    return (text == "" and "#" in match.group(0)) or _is_permalink(match)


def strip_heading_anchors(line: str, removed: list[str] | None = None) -> str:
    """A heading line (ATX `## …` or a setext heading's text) without its anchor links;
    the links taken out are appended to `removed`."""
    return _strip(line, _is_heading_anchor, removed)


def strip_permalinks(line: str, removed: list[str] | None = None) -> str:
    """Any other line without its anchors: permalinks (`[¶](… "Permalink to this
    definition")`) and invisible links to a fragment (Mintlify's `[​](…\\#field)`)."""
    return _strip(line, _is_invisible_anchor, removed)


def _strip(line: str, is_anchor, removed: list[str] | None) -> str:
    if "](" not in line:
        return line

    def replace(match: re.Match[str]) -> str:
        if not is_anchor(match):
            return match.group(0)
        if removed is not None:
            removed.append(match.group(0))
        # `Done![#](#done)`: an anchor is never an image, so the `!` is the title's.
        if match.group("bang"):
            return line[match.start() : match.start("bang")] + "! "
        return " "

    return _tidy(_ANY_LINK.sub(replace, line), line)


def _tidy(cleaned: str, original: str) -> str:
    if cleaned == original:
        return original
    indent = original[: len(original) - len(original.lstrip(" "))]
    marks = ATX_MARK.match(cleaned)
    if marks:
        return f"{marks.group(1)} {cleaned[marks.end() :].strip()}".rstrip()
    return indent + cleaned.strip()


_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_CODE_SPAN = re.compile(r"`+([^`]*)`+")
# `_` only marks emphasis at word edges (CommonMark): `pg_stat_statements` is one word.
_EMPHASIS = re.compile(
    r"(\*{1,3}|~~)(\S(?:.*?\S)?)\1|(?<![^\W_])(_{1,3})(\S(?:.*?\S)?)\3(?![^\W_])"
)
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_KEPT = re.compile(r"\x00(\d+)\x00")
_MARKUP = re.compile(r"[\[`\\*_~<#\x00\u200b]")  # a heading without these is plain text


def heading_text(source: str) -> str:
    """Heading text as a reader sees it: no anchors, links, emphasis, code marks, tags or
    escapes. `source` is the heading's content (an ATX line's `#` marks may be included).
    Code spans and escaped characters are set aside first, so that identifiers
    (`supabase_auth_admin`) and escaped marks (`\\*`) are not read as emphasis."""
    source = ATX_MARK.sub("", source, count=1)
    if not _MARKUP.search(source):
        return " ".join(source.split())
    kept: list[str] = []

    def keep(match: re.Match[str]) -> str:
        kept.append(match.group(1))
        return f"\x00{len(kept) - 1}\x00"

    text = strip_heading_anchors(source)
    text = _CODE_SPAN.sub(keep, text)
    text = _ESCAPE.sub(keep, text)
    text = _LINK.sub(r"\1", text)
    text = _EMPHASIS.sub(lambda m: m.group(2) or m.group(4), text)
    text = _HTML_TAG.sub("", text)
    text = _ATX_CLOSE.sub("", text)  # closing sequence of an ATX heading
    text = text.rstrip().removesuffix("\\")  # a hard line break has no meaning in a heading
    text = _KEPT.sub(lambda m: kept[int(m.group(1))], text)
    return " ".join(text.replace("\u200b", " ").split())


_WORD = re.compile(r"\w+")


def heading_key(text: str) -> str:
    """A heading's clean text reduced to its words, as a key to compare heading lines by."""
    words = _WORD.findall(text.casefold())
    return " ".join(words) if words else text.strip()


def _normalise(line: str) -> str:
    """A heading line's key: the words of its text as the chunker reads it (`heading_text`):
    '## Use `rpc()` [¶](#rpc "Permalink")' matches the heading 'Use rpc()'."""
    return heading_key(heading_text(line))


def heading_lines(text: str) -> tuple[str, ...]:
    """The heading lines (ATX or setext) in a chunk's text, normalised, each once, sorted.

    A chunk spanning several H2 sections carries their heading lines in its text; prose
    that merely mentions a heading's words does not cover it.
    """
    found = set()
    lines = text.splitlines()
    for line, below in zip(lines, lines[1:] + [""], strict=True):
        if is_atx_heading(line) or (line.strip() and is_setext_underline(below)):
            found.add(_normalise(line))
    return tuple(sorted(found))
