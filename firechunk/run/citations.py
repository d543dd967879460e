"""Which of a page's URLs each of its chunks cites.

Most pages have one URL. A single-page-app reference answers every one of its URLs
(`…/python/insert`, `…/python/upsert`, …) with the same whole page, so its chunks would all
cite one arbitrary URL. Here each URL's last path segment is matched to the page section it
names, and a chunk cites the URL of the section it is in:

- the sections a URL may name are those of the heading level with the most distinct
  titles (`naming_depth`: a reference page's functions, not its repeated "Parameters");
- a section whose title reads as the slug ("Using filters" for `using-filters`) or holds it
  as a word ("Upsert data" for `upsert`) scores high;
- a section whose rarest function call is the slug (`.eq(` for `eq`, where every section
  calls `.select(`; `sign_in_with_password(` for `auth-signinwithpassword`) scores next;
- the best-scoring pairs are taken first, each URL and each section once, so a word shared
  by two titles ("Update data", "Update a user") goes to the one whose code also uses it.

A chunk in no matched section cites the page's own URL.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from urllib.parse import urlsplit

from firechunk.chunker.headings import heading_text
from firechunk.chunker.sections import naming_depth
from firechunk.chunker.syntax import is_atx_heading

TITLE_MATCH = 100  # the title reads as the slug
TITLE_WORD = 50  # the slug is a word of the title
SIGNATURE_CALL = 20  # the slug is the section's rarest function call
ANY_CALL = 1  # the section calls the slug

_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_WORD = re.compile(r"[a-z0-9]+")

Section = tuple[str, ...]  # a heading path, as the chunk's `sections` give it


def cite(
    own_url: str, other_urls: Sequence[str], sections: list[list[list[str]]], texts: list[str]
) -> list[str]:
    """The URL each chunk of a page cites. `sections` and `texts` are each chunk's heading
    paths and text; `own_url` is the page's, `other_urls` the other URLs that returned it."""
    if not other_urls:
        return [own_url] * len(texts)
    candidates = _candidates(sections, texts)
    url_of = _match([own_url, *other_urls], candidates)
    return [_url_for(chunk_sections, url_of, own_url) for chunk_sections in sections]


def _candidates(sections: list[list[list[str]]], texts: list[str]) -> dict[Section, str]:
    """The sections a URL may name, each with its text and its sub-sections' text."""
    own = _section_texts(sections, texts)
    depth = naming_depth(own)
    if not depth:
        return {}
    candidates: dict[Section, list[str]] = {}
    for path, text in own.items():
        if len(path) >= depth:
            candidates.setdefault(path[:depth], []).append(text)
    return {section: "\n".join(parts) for section, parts in candidates.items()}


def _section_texts(sections: list[list[list[str]]], texts: list[str]) -> dict[Section, str]:
    """The page's text by the section it is under, read from the chunks: each chunk starts
    under its first section, and each ATX heading line in it opens the next."""
    own: dict[Section, list[str]] = {}
    for chunk_sections, text in zip(sections, texts, strict=True):
        path = list(chunk_sections[0]) if chunk_sections else []
        for line in text.split("\n"):
            if is_atx_heading(line):
                level = len(line.lstrip()) - len(line.lstrip().lstrip("#"))
                path = [*path[: level - 1], heading_text(line)]
            own.setdefault(tuple(path), []).append(line)
    return {section: "\n".join(lines) for section, lines in own.items()}


def _match(urls: list[str], candidates: dict[Section, str]) -> dict[Section, str]:
    """Each section's URL, best-scoring pairs first, each URL and section used once."""
    calls = {section: _calls(text) for section, text in candidates.items()}
    sections_calling = Counter(name for names in calls.values() for name in names)
    signatures = {
        section: {
            n for n in names if sections_calling[n] == min(sections_calling[m] for m in names)
        }
        for section, names in calls.items()
    }
    scored = []
    for order, url in enumerate(urls):
        slug = _slug(url)
        if not slug:
            continue
        for position, section in enumerate(candidates):
            score = _score(slug, section[-1], calls[section], signatures[section])
            if score:
                scored.append((-score, position, order, section, url))
    url_of: dict[Section, str] = {}
    used: set[str] = set()
    for _, _, _, section, url in sorted(scored):
        if section not in url_of and url not in used:
            url_of[section] = url
            used.add(url)
    return url_of


def _slug(url: str) -> str:
    """The URL's last path segment, lower case."""
    return urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1].lower()


def _score(slug: str, title: str, calls: set[str], signature: set[str]) -> int:
    """How well the section answers to the slug (0: not at all)."""
    names = {_key(slug), _key(slug.rsplit("-", 1)[-1])}  # `auth-signup` names `signup`
    words = _WORD.findall(title.lower())
    score = 0
    if _key(slug) == "".join(words):
        score = TITLE_MATCH
    elif names & set(words):
        score = TITLE_WORD
    if names & signature:
        score += SIGNATURE_CALL
    elif names & calls:
        score += ANY_CALL
    return score


def _calls(text: str) -> set[str]:
    """The function names the text calls, reduced to `_key`."""
    return {_key(name) for name in _CALL.findall(text)}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _url_for(chunk_sections: list[list[str]], url_of: dict[Section, str], own_url: str) -> str:
    """The URL of the first matched section the chunk's first section is in."""
    for path in chunk_sections:
        for depth in range(len(path), 0, -1):
            url = url_of.get(tuple(path[:depth]))
            if url:
                return url
    return own_url
