"""Property tests of heading anchors: a title decorated in any docs platform's anchor style
reads as the same heading as the plain title, and a page of such headings, chunked, covers
every H1/H2 under that title.

Titles are drawn from letters, digits, spaces and escaped markdown characters (`\\_`,
`\\*`, ...); each is decorated as Supabase, Mintlify, Sphinx, MkDocs Material, Docusaurus
or GitBook decorate theirs, at level 1 or 2, as an ATX or a setext heading.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firechunk.chunker.headings import heading_text
from firechunk.quality import check_run
from firechunk.run.memory import chunk_crawl
from firechunk.tokens import TokenCounter
from firechunk.validate.tables import build_tables
from tests.chunk_helpers import crawl, page, run_markdown

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)

_WORD = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=9
)
# Markdown characters a title may hold, written escaped as the platforms write them.
_ESCAPED = st.sampled_from("_*#[]()<>~`!").map(lambda char: "\\" + char)


@st.composite
def titles(draw) -> str:
    """A heading's markdown source: words, and escaped characters glued to a word or
    standing apart (`get\\_repo`, `C\\#`, `a \\* b`); it starts with a word."""
    parts = [draw(_WORD)]
    for _ in range(draw(st.integers(0, 5))):
        parts.append(draw(st.sampled_from(["", " "])))
        parts.append(draw(st.one_of(_WORD, _ESCAPED)))
    return "".join(parts)


def slug(title: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", title.lower())) or "section"


# The anchor styles: (title source, slug, clean title) -> decorated heading source.
STYLES = {
    "supabase": lambda t, s, clean: f"{t}[\\#](\\#{s})",
    "mintlify": lambda t, s, clean: f"[\u200b](https://docs.example.com/page\\#{s})  {t}",
    "sphinx": lambda t, s, clean: (
        f'{t} [¶](https://x.readthedocs.io/en/stable/p.html\\#{s} "Permalink to this headline")'
    ),
    "mkdocs": lambda t, s, clean: f'{t} [¶](#{s} "Permanent link")',
    "docusaurus": lambda t, s, clean: f'{t} [\u200b](#{s} "Direct link to {clean}")',
    "gitbook": lambda t, s, clean: f"[](#{s}) {t}",
    "gitbook_after": lambda t, s, clean: f"{t}[](#{s})",
}


def decorate(title: str, style: str) -> str:
    return STYLES[style](title, slug(title), heading_text(title))


def heading_lines(source: str, level: int, setext: bool) -> list[str]:
    if setext:
        return [source, ("=" if level == 1 else "-") * max(3, len(source) // 2)]
    return [f"{'#' * level} {source}"]


@SETTINGS
@given(title=titles(), style=st.sampled_from(sorted(STYLES)), level=st.sampled_from([1, 2]))
def test_a_decorated_heading_reads_as_the_plain_one(title, style, level):
    decorated = decorate(title, style)
    plain = heading_text(title)
    assert plain  # a word at least
    assert heading_text(decorated) == plain
    assert heading_text(f"{'#' * level} {decorated}") == plain


headings = st.tuples(
    titles(), st.sampled_from(sorted(STYLES)), st.sampled_from([1, 2]), st.booleans()
)


@SETTINGS
@given(drawn=st.lists(headings, min_size=1, max_size=6))
def test_a_page_of_decorated_headings_covers_each_one(drawn):
    lines: list[str] = []
    expected: list[tuple[int, str]] = []
    for n, (title, style, level, setext) in enumerate(drawn):
        lines += heading_lines(decorate(title, style), level, setext)
        lines += ["", f"Paragraph {n} tells how the lamp number {n} is lit at dusk.", ""]
        expected.append((level, heading_text(title)))
    one_page = crawl(page("\n".join(lines)))
    run = chunk_crawl(one_page, workers=1)
    (record,) = run.pages
    assert record.status == "chunked"
    assert [(h.level, h.text) for h in record.headings] == expected
    figures = check_run(one_page, run)
    assert figures.headings_h1_h2 == len(expected), figures.examples
    assert figures.headings_missing == 0, figures.examples
    assert figures.header_only_chunks == 0, figures.examples
    coverage = build_tables(run, TokenCounter())["headers"]["coverage"]
    assert set(coverage) <= {"headers", "text"}, list(coverage)


# -- found by the properties above with `[` and `!` among the escaped characters ---------


@pytest.mark.parametrize(
    "line", ["## Done![\\#](\\#done)", "## Done\\![\\#](\\#done)", "## Done\\![](#done)"]
)
def test_an_exclamation_mark_before_the_anchor_is_kept(line):
    run = run_markdown(line + "\n\nSome text under it.\n")
    assert heading_text(line) == "Done!"
    assert [(h.level, h.text) for h in run.pages[0].headings] == [(2, "Done!")]
    assert run.chunks[0].data.text.split("\n")[0] == line.split("[")[0]  # "## Done!"


@pytest.mark.parametrize(
    "line",
    [
        '## Ranges \\[start, end) [¶](#ranges "Permalink to this headline")',
        '## Ranges \\[start, end) [\u200b](#ranges "Direct link to Ranges [start, end)")',
        "## Ranges \\[start, end)[\\#](\\#ranges)",
    ],
)
def test_an_open_escaped_bracket_before_the_anchor_is_kept(line):
    run = run_markdown(line + "\n\nSome text under it.\n")
    assert heading_text(line) == "Ranges [start, end)"
    assert [(h.level, h.text) for h in run.pages[0].headings] == [(2, "Ranges [start, end)")]
    assert run.chunks[0].data.text.split("\n")[0] == "## Ranges \\[start, end)"


def test_a_setext_heading_loses_its_anchor_in_the_chunk_text():
    run = run_markdown("Install it[\\#](\\#install-it)\n----------\n\nSome text under it.\n")
    assert [(h.level, h.text) for h in run.pages[0].headings] == [(2, "Install it")]  # holds
    assert run.chunks[0].data.text.split("\n")[0] == "Install it"
