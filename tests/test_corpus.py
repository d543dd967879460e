"""The issue's acceptance figures, on every real crawl of ../shared/corpus/."""

from __future__ import annotations

import pytest

from firechunk.crawlfile import read_crawl
from firechunk.quality import check_run
from firechunk.run.memory import chunk_crawl
from tests.corpus import CORPUS_DIR, corpus_params, needs_corpus

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module", params=corpus_params())
def corpus_run(request):
    crawl = read_crawl(request.param)
    return crawl, chunk_crawl(crawl, workers=2)


def test_every_page_is_accounted_for(corpus_run):
    crawl, run = corpus_run
    assert len(run.pages) == len(crawl.data)
    statuses = {p.status for p in run.pages}
    assert statuses <= {"chunked", "alias", "quarantined"}
    assert (
        run.report.pages_chunked + run.report.pages_aliased + run.report.pages_quarantined
        == len(crawl.data)
    )


def test_acceptance_figures(corpus_run):
    crawl, run = corpus_run
    figures = check_run(crawl, run)
    assert figures.chunks > 0
    assert figures.over_hard_limit == 0 and figures.max_tokens <= 1000
    assert figures.token_count_mismatches == 0
    assert figures.code_blocks_fitting > 0 and figures.code_blocks_split == 0, figures.examples
    assert figures.headings_h1_h2 > 0 and figures.headings_missing == 0, figures.examples
    assert figures.words_kept_pct >= 99.9, figures.examples
    assert figures.lines_checked > 0 and figures.lines_under_wrong_header == 0, figures.examples
    assert figures.duplicate_texts == 0
    assert figures.small_chunks_pct <= 2.0
    assert figures.header_only_chunks == 0
    assert figures.line_number_markers == 0
    assert figures.chrome_share_pct <= 2.0, figures.chrome_tokens


@needs_corpus
def test_spa_reference_urls_yield_one_page():
    """The Python reference returns one page for 49 URLs: its chunks must appear once."""
    crawl = read_crawl(CORPUS_DIR / "supabase-python-reference-2024-09.json")
    run = chunk_crawl(crawl, workers=1)
    assert len(crawl.data) == 49
    assert run.report.pages_chunked == 1
    assert run.report.pages_aliased == 48
    (primary,) = [p for p in run.pages if p.status == "chunked"]
    assert len(primary.aliases) == 48
    urls = {primary.canonical_url, *primary.aliases}
    for chunk in run.chunks:  # each chunk cites one of the page's URLs; the others are aliases
        assert {chunk.metadata.source_url, *chunk.metadata.aliases} == urls
        assert len(chunk.metadata.aliases) == 48


@needs_corpus
@pytest.mark.parametrize(
    ("section", "slug"),
    [
        ("Update data", "update"),
        ("Upsert data", "upsert"),
        ("Using filters", "using-filters"),
        ("Column is equal to a value", "eq"),
        ("Sign in a user through OTP", "auth-signinwithotp"),
    ],
)
def test_spa_reference_chunks_cite_the_url_of_their_section(section, slug):
    """One page served at 49 URLs: each function gets chunks of its own (small ones join
    a neighbour), and a chunk cites the URL that names its first section."""
    crawl = read_crawl(CORPUS_DIR / "supabase-python-reference-2024-09.json")
    run = chunk_crawl(crawl, workers=1)
    [chunk] = [c for c in run.chunks if c.metadata.sections[0][1:2] == [section]]
    assert chunk.metadata.source_url == f"https://supabase.com/docs/reference/python/{slug}"
    assert chunk.metadata.token_count < 400  # not packed with the functions beside it
    # "Update a user" holds the word "update", but its code never calls `update(`.
    updates = [c for c in run.chunks if "Update a user" in c.metadata.sections[0]]
    assert all(not c.metadata.source_url.endswith("/update") for c in updates)


def test_rerun_gives_identical_ids(corpus_run):
    crawl, run = corpus_run
    again = chunk_crawl(crawl, workers=1)
    assert [c.chunk_id for c in again.chunks] == [c.chunk_id for c in run.chunks]
    assert len({c.chunk_id for c in run.chunks}) == len(run.chunks)
