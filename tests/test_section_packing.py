"""Section-true packing (`firechunk/chunker/packing.py`): content stays together at the
highest heading level that fits the hard limit, a chunk never begins inside one section
and continues into the next, and the metadata names the sections a chunk holds."""

from __future__ import annotations

from firechunk.chunker.page import chunk_page
from tests.chunk_helpers import chunk_one, count, sentences


def first_lines(chunks) -> list[str]:
    return [chunk.text.split("\n")[0] for chunk in chunks]


def test_a_page_that_fits_the_hard_limit_is_one_chunk_naming_each_section():
    markdown = (
        f"# G\n\n{sentences(200, 1)}\n\n## A\n\n{sentences(200, 2)}\n\n## B\n\n{sentences(200, 3)}"
    )
    [chunk] = chunk_one(markdown).chunks
    assert chunk.breadcrumb == ["G"]
    assert chunk.sections == [["G"], ["G", "A"], ["G", "B"]]


def test_a_cut_section_keeps_its_pieces_and_its_tail_to_itself():
    # A (1,500 tokens) must be cut; B is whole. No chunk starts in A and runs into B.
    markdown = f"# G\n\n## A\n\n{sentences(1500, 1, 'a')}\n\n## B\n\n{sentences(400, 2, 'b')}"
    chunks = chunk_one(markdown).chunks
    in_a = [c for c in chunks if "a1x" in c.text or "a2x" in c.text or "a3x" in c.text]
    assert all("## B" not in c.text for c in in_a)
    holder_b = next(c for c in chunks if "## B" in c.text)
    assert holder_b.text.startswith("## B\n\n")
    assert (holder_b.h2, holder_b.breadcrumb, holder_b.sections) == ("B", ["G", "B"], [["G", "B"]])
    assert all(c.breadcrumb == ["G", "A"] for c in chunks if c is not holder_b)


def test_a_section_too_long_is_opened_and_its_sub_sections_packed_side_by_side():
    subs = "\n\n".join(f"### S{i}\n\n{sentences(300, i, f's{i}')}" for i in range(1, 5))
    markdown = f"# G\n\n## A\n\n{sentences(60, 9, 'i')}\n\n{subs}"
    chunks = chunk_one(markdown).chunks
    assert len(chunks) >= 2
    for chunk in chunks:
        # Each chunk starts at a heading, under A, and holds whole sub-sections.
        assert chunk.text.startswith(("# G\n\n## A\n", "### S"))
        assert chunk.breadcrumb[:2] == ["G", "A"]
        assert chunk.tokens <= 1000
    held = [path[-1] for chunk in chunks for path in chunk.sections]
    assert held == ["A", "S1", "S2", "S3", "S4"]


def test_every_chunk_begins_at_a_heading_or_inside_the_section_it_stays_in():
    sections = "\n\n".join(
        f"## H{i}\n\n{sentences(size, i, f'h{i}')}"
        for i, size in enumerate([700, 90, 1400, 40, 500, 650, 30], start=1)
    )
    chunks = chunk_one(f"# G\n\n{sections}").chunks
    for chunk in chunks:
        if not chunk.text.startswith("#"):  # a later piece of a cut section: only it
            assert len(chunk.sections) == 1, chunk.sections
    assert all(c.tokens <= 1000 for c in chunks)


def reference_page() -> str:
    """A reference: functions (H2) each with a "Parameters" sub-section (H3)."""
    functions = "\n\n".join(
        f"## Function {name}\n\n{sentences(130, i, name)}\n\n### Parameters\n\n"
        f"{sentences(50, i + 10, name + 'p')}"
        for i, name in enumerate(["insert", "upsert", "delete", "select"], start=1)
    )
    return f"# Client Library\n\n{sentences(120, 0, 'intro')}\n\n{functions}"


def test_a_page_served_at_many_urls_gives_each_named_section_chunks_of_its_own():
    """Its URLs name its functions (the level with the most distinct titles), so a chunk
    that held two functions could cite only one of them."""
    markdown = reference_page()
    together = chunk_page(markdown, "Page", count)
    apart = chunk_page(markdown, "Page", count, many_urls=True)
    assert len(together.chunks) == 1  # it fits: one chunk at one URL: one chunk at one URL
    functions = [{path[1] for path in chunk.sections if len(path) > 1} for chunk in apart.chunks]
    assert functions == [
        set(),
        {"Function insert"},
        {"Function upsert"},
        {"Function delete"},
        {"Function select"},
    ]
    assert [c.breadcrumb for c in apart.chunks[1:]] == [
        ["Client Library", f"Function {name}"] for name in ["insert", "upsert", "delete", "select"]
    ]
