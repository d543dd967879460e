"""Pass 1 (rules 2-3): H1/H2 sections, the heading path in force at each block, and the
headers a chunk reports for its first content line."""

from __future__ import annotations

from firechunk.chunker.blocks import HEADING, count_block, parse_blocks
from firechunk.chunker.sections import (
    Heading,
    common_path,
    enter_heading,
    headers_of,
    split_sections,
)
from tests.chunk_helpers import chunk_one, count, sentences

PAGE = "\n\n".join(
    [
        "Preamble text.",
        "# A",
        "intro",
        "## B",
        "b text",
        "### B1",
        "b1 text",
        "## C",
        "c text",
        "# D",
        "d text",
        "#### deep",
        "x text",
    ]
)


def sections_of(markdown: str):
    lines = markdown.split("\n")
    return lines, split_sections([count_block(b, lines, count) for b in parse_blocks(lines)])


def test_sections_start_at_every_h1_and_h2_only():
    lines, sections = sections_of(PAGE)
    firsts = [lines[section.blocks[0].start] for section in sections]
    assert firsts == ["Preamble text.", "# A", "## B", "## C", "# D"]
    # H3 and H4 stay inside their section.
    assert [lines[b.start] for b in sections[2].blocks] == ["## B", "b text", "### B1", "b1 text"]


def test_h1_ordinal_counts_h1_sections_and_the_preamble_shares_the_first():
    _, sections = sections_of(PAGE)
    assert [s.h1_ordinal for s in sections] == [0, 0, 0, 0, 1]


def test_heading_path_in_force_at_each_block():
    lines, sections = sections_of(PAGE)
    path_at = {
        lines[block.start]: tuple((level, title) for level, title, _ in path)
        for section in sections
        for block, path in zip(section.blocks, section.paths, strict=True)
        if block.kind != HEADING
    }
    assert path_at["Preamble text."] == ()
    assert path_at["intro"] == ((1, "A"),)
    assert path_at["b text"] == ((1, "A"), (2, "B"))
    assert path_at["b1 text"] == ((1, "A"), (2, "B"), (3, "B1"))
    assert path_at["c text"] == ((1, "A"), (2, "C"))  # B1 closed by the H2
    assert path_at["d text"] == ((1, "D"),)  # the H2 closed by the H1
    assert path_at["x text"] == ((1, "D"), (4, "deep"))


def test_enter_heading_closes_equal_and_deeper_levels():
    a, b, b1 = Heading(1, "A", 0), Heading(2, "B", 3), Heading(3, "B1", 6)
    path = (a, b, b1)
    assert enter_heading(path, Heading(2, "C", 9)) == (a, Heading(2, "C", 9))
    assert enter_heading(path, Heading(3, "B2", 9)) == (a, b, Heading(3, "B2", 9))
    assert enter_heading(path, Heading(1, "Z", 9)) == (Heading(1, "Z", 9),)
    assert enter_heading((), Heading(3, "lone", 0)) == (Heading(3, "lone", 0),)


def test_common_path_is_the_deepest_section_holding_every_path():
    a, b, c = Heading(1, "A", 0), Heading(2, "B", 3), Heading(2, "C", 9)
    assert common_path([(a, b), (a, c)]) == (a,)
    assert common_path([(a, b), (a, b, Heading(3, "B1", 5))]) == (a, b)
    assert common_path([(a, b), (a, Heading(2, "B", 12))]) == (a,)  # one title, two sections
    assert common_path([(), (a,)]) == ()


def test_headers_of_a_path():
    a, b = Heading(1, "A", 0), Heading(2, "B", 1)
    assert headers_of((a, b, Heading(3, "B1", 2))) == ("A", "B")
    assert headers_of((a, Heading(3, "skip", 1))) == ("A", None)
    assert headers_of((Heading(2, "only h2", 0),)) == (None, "only h2")
    assert headers_of(()) == (None, None)


def test_setext_headings_open_sections_like_atx_ones():
    lines, sections = sections_of("Top\n===\n\ntext\n\nSub\n---\n\nmore\n\nAnother\n=======\n\nend")
    assert [lines[s.blocks[0].start] for s in sections] == ["Top", "Sub", "Another"]
    assert [s.h1_ordinal for s in sections] == [0, 0, 1]


# -- headers of chunks ----------------------------------------------------------------


def test_each_h2_section_of_some_size_is_its_own_chunk_with_its_headers():
    # Together over the hard limit: the page is opened at its H2s.
    body = [sentences(600, seed) for seed in range(3)]
    markdown = f"# Guide\n\n{body[0]}\n\n## Install\n\n{body[1]}\n\n## Use\n\n{body[2]}"
    chunks = chunk_one(markdown).chunks
    assert [(c.h1, c.h2) for c in chunks] == [
        ("Guide", None),
        ("Guide", "Install"),
        ("Guide", "Use"),
    ]
    assert [c.text.split("\n")[0] for c in chunks] == ["# Guide", "## Install", "## Use"]
    assert chunks[1].breadcrumb == ["Guide", "Install"]


def test_headers_are_those_in_force_at_the_first_content_line():
    # The H3 stacked on top of the content does not hide the H2 above it.
    markdown = f"# Guide\n\n## Install\n\n### With pip\n\n{sentences(150, 1)}"
    [chunk] = chunk_one(markdown).chunks
    assert (chunk.h1, chunk.h2) == ("Guide", "Install")
    assert chunk.breadcrumb == ["Guide", "Install", "With pip"]
    assert chunk.text.startswith("# Guide\n\n## Install\n\n### With pip\n\n")


def test_a_chunk_spanning_two_h2_sections_carries_the_second_heading_line():
    # A small section merges into its neighbour: its own heading line comes along, so
    # none of its lines sits under the previous H2 without saying so.
    markdown = f"# G\n\n## Big\n\n{sentences(200, 1)}\n\n## Small\n\n{sentences(20, 2)}"
    [chunk] = chunk_one(markdown).chunks
    assert (chunk.h1, chunk.h2) == ("G", "Big")
    assert "\n\n## Small\n\n" in chunk.text
    assert chunk.text.index("## Small") > chunk.text.index(sentences(200, 1))


def test_content_before_the_first_h1_takes_the_first_h1_as_its_header():
    markdown = f"{sentences(600, 1)}\n\n# First title\n\n{sentences(600, 2)}"
    chunks = chunk_one(markdown).chunks
    assert [(c.h1, c.h2) for c in chunks] == [("First title", None), ("First title", None)]
    assert chunks[0].breadcrumb == []


def test_a_page_without_h1_takes_the_page_title():
    [chunk] = chunk_one(f"## Only h2\n\n{sentences(150, 1)}").chunks
    assert (chunk.h1, chunk.h2) == ("Page", "Only h2")


def test_a_new_h1_clears_the_h2():
    markdown = f"# A\n\n## A2\n\n{sentences(600, 1)}\n\n# B\n\n{sentences(600, 2)}"
    chunks = chunk_one(markdown).chunks
    assert [(c.h1, c.h2) for c in chunks] == [("A", "A2"), ("B", None)]


def test_every_h1_and_h2_is_recorded_with_its_line():
    result = chunk_one(PAGE)
    assert result.headings == [(1, "A", 3), (2, "B", 7), (2, "C", 15), (1, "D", 19)]
