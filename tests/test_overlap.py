"""Overlap (rule 5): the last heading line and the last sentence of the previous chunk of
the same page, at most 100 tokens, linked by prev_chunk_id (null for a page's first)."""

from __future__ import annotations

from firechunk.chunker.overlap import last_sentence, overlap_text
from firechunk.chunker.page import ChunkerOptions
from firechunk.chunker.split import Limits
from tests.chunk_helpers import URL, count, page, run_markdown, run_pages, sentences


def overlap(previous: str, heading: str | None = None, limit: int = 100) -> str:
    return overlap_text(previous, heading, count, limit)


def test_first_chunk_of_a_page_has_no_overlap_and_later_ones_link_back():
    markdown = f"# T\n\n{sentences(300, 1, 'a')}\n\n## B\n\n{sentences(1200, 2, 'b')}"
    chunks = run_markdown(markdown).chunks
    assert len(chunks) >= 3
    assert chunks[0].data.overlap_text.prev_chunk_id is None
    assert chunks[0].data.overlap_text.text == ""
    for before, chunk in zip(chunks, chunks[1:], strict=False):
        assert chunk.data.overlap_text.prev_chunk_id == before.chunk_id


def test_overlap_is_the_last_heading_line_and_last_sentence_of_the_previous_chunk():
    first = sentences(600, 1, "a")
    markdown = f"# T\n\n{first}\n\n## B\n\n{sentences(600, 2, 'b')}"
    chunks = run_markdown(markdown).chunks
    last = first.rsplit(". ", 1)[-1]
    assert chunks[1].data.overlap_text.text == f"# T\n\n{last}"


def test_a_continuation_chunk_takes_the_heading_in_force_from_the_breadcrumb():
    # The third chunk continues section B; the second chunk holds "## B" as its line.
    markdown = f"# T\n\n{sentences(300, 1, 'a')}\n\n## B\n\n{sentences(1200, 2, 'b')}"
    chunks = run_markdown(markdown).chunks
    assert chunks[2].data.overlap_text.text.startswith("## B\n\n")
    # A chunk without any heading line falls back to its breadcrumb.
    assert overlap("Plain text. Last one here.", "## Crumb") == "## Crumb\n\nLast one here."


def test_overlap_stays_within_its_token_limit_and_starts_at_a_whole_word():
    words = " ".join(f"w{i}" for i in range(300)) + "."
    text = overlap(f"## H\n\n{words}")
    assert count(text) <= 100
    head, tail = text.split("\n\n")
    assert head == "## H"
    assert tail.endswith("w299.")
    assert tail.split()[0] in words.split()  # no cut inside a word


def test_overlap_limit_is_configurable_and_holds_in_the_pipeline():
    long_sentence = " ".join(f"w{i}" for i in range(400)) + "."
    markdown = f"# T\n\n{long_sentence}\n\n{long_sentence.replace('w', 'v')}"
    default = run_pages(page(markdown)).chunks
    assert len(default) >= 2
    assert all(count(c.data.overlap_text.text) <= 100 for c in default)
    assert count(default[1].data.overlap_text.text) > 60  # the long sentence fills it
    options = ChunkerOptions(limits=Limits(overlap=30))
    short = run_pages(page(markdown), options=options).chunks
    assert all(0 < count(c.data.overlap_text.text) <= 30 for c in short[1:])


def test_a_heading_too_long_to_leave_room_gives_way_to_the_sentence():
    heading = "# " + " ".join(f"word{i}" for i in range(120))
    assert overlap(f"{heading}\n\nThe end is here now.") == "The end is here now."


def test_overlap_text_is_not_part_of_the_chunk_text_or_its_count():
    markdown = f"# T\n\n{sentences(600, 1, 'a')}\n\n## B\n\n{sentences(600, 2, 'b')}"
    second = run_markdown(markdown).chunks[1]
    assert second.data.overlap_text.text not in second.data.text
    assert second.metadata.token_count == count(second.data.text)


def test_overlap_never_crosses_pages():
    one = page(f"# One\n\n{sentences(300, 1)}", url="https://docs.example.com/one")
    two = page(f"# Two\n\n{sentences(300, 2)}", url="https://docs.example.com/two")
    chunks = run_pages(one, two).chunks
    assert [c.metadata.source_url for c in chunks] == [
        "https://docs.example.com/one",
        "https://docs.example.com/two",
    ]
    assert chunks[1].data.overlap_text.prev_chunk_id is None
    assert chunks[1].data.overlap_text.text == ""


def test_prev_chunk_id_skips_a_chunk_dropped_as_a_duplicate():
    shared = f"## Shared\n\n{sentences(600, 9, 's')}"
    first = page(f"# One\n\n{sentences(600, 1)}\n\n{shared}", url=URL + "/one")
    second = page(
        f"# Two\n\n{sentences(600, 2)}\n\n{shared}\n\n## Own\n\n{sentences(600, 3)}",
        url=URL + "/two",
    )
    run = run_pages(first, second)
    assert run.report.duplicate_chunks_dropped == 1
    two = [c for c in run.chunks if c.metadata.source_url.endswith("/two")]
    assert [c.metadata.chunk_index for c in two] == [0, 1]
    assert two[1].data.overlap_text.prev_chunk_id == two[0].chunk_id


# -- what counts as a heading and a sentence ---------------------------------------------


def test_a_comment_in_code_is_not_taken_for_a_heading():
    previous = "## Install\n\nRun this first:\n\n```bash\n# install the CLI\nnpm i supabase\n```"
    assert overlap(previous).startswith("## Install\n\n")


def test_a_dash_line_in_code_does_not_make_a_setext_heading():
    previous = "## Setup\n\nSome text here now.\n\n```yaml\ntitle: x\n---\nkey: v\n```"
    assert overlap(previous).startswith("## Setup\n\n")


def test_setext_headings_count_as_headings():
    assert overlap("Install the client\n---\n\nRun it now please.") == (
        "## Install the client\n\nRun it now please."
    )


def test_the_heading_is_its_clean_text_whatever_its_decoration():
    """The overlap reads a heading as the chunk's metadata does (`heading_text`)."""
    for line in (
        "## Use `rpc()` [\\#](\\#use-rpc)",
        "## [\u200b](https://x.io/p\\#use-rpc)  Use `rpc()`",
        '## Use `rpc()` [¶](https://x.io/p.html\\#use-rpc "Permalink to this headline")',
    ):
        assert overlap(f"{line}\n\nCall it now please.") == "## Use rpc()\n\nCall it now please."


def test_a_short_last_paragraph_is_not_replaced_by_a_heading():
    assert overlap("## Install the client\n\nRun it.") == "## Install the client\n\nRun it."


def test_last_sentence_of_the_last_paragraph():
    assert last_sentence("First one. Second one!\n\nThird here? Fourth one here.") == (
        "Fourth one here."
    )
    assert (
        last_sentence("Text before.\n\n- item one\n- item two here.")
        == "- item one - item two here."
    )
    assert last_sentence("## Only\n\n### Headings") == ""
    assert last_sentence("") == ""


def test_a_heading_after_code_counts_and_one_inside_an_unclosed_fence_does_not():
    closed = "## One\n\n~~~sh\n# not a heading\n~~~\n\n## Two\n\nAfter the code here."
    assert overlap(closed).startswith("## Two\n\n")
    unclosed = "## One\n\nText here now.\n\n```sh\n# not a heading\n\n## Nor this"
    assert overlap(unclosed).startswith("## One\n\n")


def test_an_indented_closing_line_does_not_close_the_fence():
    # The closing line must be the fence mark alone: "  ```" with spaces keeps the code open.
    previous = "## One\n\n```sh\necho\n  ```\n## Inside code\n```\n\nThe text after it."
    assert overlap(previous) == "## One\n\nThe text after it."


def test_fence_lines_are_not_read_as_the_last_sentence():
    assert last_sentence("Intro text here.\n\n```\nselect 1 from t;\n```") == "select 1 from t;"
