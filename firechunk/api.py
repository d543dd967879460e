"""firechunk as a library: the chunker, the crawl-level run, the load and the search as
functions, for a pipeline that has its own orchestration (LangChain, LlamaIndex, a script).

Everything here calls the code `firechunk chunk`, `load` and `search` run, so a library
caller gets the same chunks, ids and overlaps as the command line, and nothing is
reimplemented:

- `chunk_markdown`: one page, as `firechunk chunk` chunks it when it is the only page of
  its crawl: clean-up, the three passes, overlap, ids (`firechunk.run.outcomes`,
  `firechunk.run.rows`);
- `chunk_crawl`: a whole crawl in memory, with the steps that need every page: site
  chrome, aliases, single-page apps served at many URLs, repeated chunks dropped,
  quarantine (`firechunk.run.memory`, the same plan, worker and assembly as a written run);
- `load` and `search`: a published run into Postgres + pgvector, and hybrid search over
  it (`firechunk.db.load`, `firechunk.db.search`), with the CLI's database and embedder.

`ChunkConfig` holds the chunker's settings, `firechunk chunk`'s by default; a `Sizer`
(tiktoken's `TiktokenSizer`, or `HuggingFaceSizer` for an embedder's own word pieces)
measures the chunks. `import firechunk` stays light: the package exports these names
lazily, and the run's modules are imported by the functions that need them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firechunk.chunker.cleanup import RULES, CleanupOptions
from firechunk.chunker.page import ChunkerOptions, PageRejected
from firechunk.chunker.split import Limits
from firechunk.extras import require
from firechunk.schemas.chunk import Chunk
from firechunk.schemas.report import ChunkRun as ChunkedCrawl
from firechunk.settings import token_limits
from firechunk.tokens import DEFAULT_ENCODING, HuggingFaceSizer, Sizer
from firechunk.tokens import TokenCounter as TiktokenSizer

if TYPE_CHECKING:
    from firechunk.db.load import LoadResult
    from firechunk.db.search import Hit
    from firechunk.embedders import Embedder
    from firechunk.schemas.page import CrawlResult

__all__ = [
    "Chunk",
    "ChunkConfig",
    "ChunkedCrawl",
    "HuggingFaceSizer",
    "PageRejected",
    "Sizer",
    "TiktokenSizer",
    "chunk_crawl",
    "chunk_markdown",
    "load",
    "search",
]


_NOT_GIVEN: Any = None


@dataclass(frozen=True)
class ChunkConfig:
    """How pages are chunked. The defaults are what `firechunk chunk` uses, so a default
    config gives the chunks of the command line.

    - `soft_tokens`: chunks are packed up to this size; `hard_tokens`: no chunk is larger;
      `min_tokens`: a fragment smaller than this joins a neighbour. They are the run
      settings' fields (`firechunk.settings.RunSettings`), defaults and checks included: a
      limit not given is its default lowered to the limit above it when that is smaller
      (`ChunkConfig(hard_tokens=500)` is soft 500, min 100), and limits out of order raise
      the run settings' `ValidationError` (a `ValueError`).
    - `overlap`: whether a chunk carries the last heading and sentence of the chunk before
      it on its page (`overlap_text`, at most `overlap_tokens`; never part of its text).
      Off, `overlap_text.text` is empty; `prev_chunk_id` still links the chunks.
    - `encoding`: the tiktoken encoding that counts tokens, unless `sizer` is given: any
      `Sizer`, such as `HuggingFaceSizer.from_file("tokenizer.json")` to size chunks in
      the tokens of the embedder that reads them.
    - `cleanup`: whether the clean-up rules run at all; `cleanup_off`: the rules to skip
      (names in `CLEANUP_RULES`, e.g. {"page_toc"}).
    """

    # None: not given, set in __post_init__ from the run settings (`token_limits`).
    soft_tokens: int = _NOT_GIVEN
    hard_tokens: int = _NOT_GIVEN
    min_tokens: int = _NOT_GIVEN
    overlap: bool = True
    overlap_tokens: int = Limits.overlap
    encoding: str = DEFAULT_ENCODING
    sizer: Sizer | None = None
    cleanup: bool = True
    cleanup_off: frozenset[str] = field(default_factory=frozenset)

    CLEANUP_RULES = RULES  # a class constant, not a field

    def __post_init__(self) -> None:
        object.__setattr__(self, "cleanup_off", frozenset(self.cleanup_off))
        limits = token_limits(self.soft_tokens, self.hard_tokens, self.min_tokens)
        for name, value in zip(("soft_tokens", "hard_tokens", "min_tokens"), limits, strict=True):
            object.__setattr__(self, name, value)
        if self.overlap and self.overlap_tokens < 1:
            raise ValueError(f"overlap_tokens must be at least 1, got {self.overlap_tokens}")
        if unknown := sorted(self.cleanup_off - set(RULES)):
            raise ValueError(f"unknown clean-up rules {unknown}; the rules are {list(RULES)}")
        if self.sizer is not None and not isinstance(self.sizer, Sizer):
            raise TypeError(f"sizer must have encoding_name, count and tail: {self.sizer!r}")

    def options(self) -> ChunkerOptions:
        """The chunker's options (`firechunk.chunker.page.ChunkerOptions`)."""
        limits = Limits(
            soft=self.soft_tokens,
            hard=self.hard_tokens,
            min_tokens=self.min_tokens,
            overlap=self.overlap_tokens if self.overlap else 0,
        )
        rules = {rule: self.cleanup and rule not in self.cleanup_off for rule in RULES}
        return ChunkerOptions(limits=limits, cleanup=CleanupOptions(**rules))

    def measure(self) -> str | Sizer:
        """What counts the tokens: the sizer, else the encoding's name (what the run's
        workers take, `firechunk.run.outcomes.chunk_pages`)."""
        return self.sizer if self.sizer is not None else self.encoding


DEFAULT_CONFIG = ChunkConfig()


def chunk_markdown(
    markdown: str,
    *,
    url: str | None = None,
    title: str | None = None,
    config: ChunkConfig = DEFAULT_CONFIG,
) -> list[Chunk]:
    """The chunks of one page of markdown, in page order: exactly those `firechunk chunk`
    writes for the page when it is the only page of its crawl (a test holds them equal).

    `url` names the page: chunk ids are uuid5 of its canonical form and the text, and each
    chunk's `sourceUrl` is that URL; without one, ids come from the text alone and
    `sourceUrl` is "". `title` is `page_title` (default: the URL), and the `h1` of text
    above the page's first H1. A page that cannot be chunked (empty, binary, HTML, only
    headings, an unusable URL or title) raises `PageRejected`, whose `reason` is the one a
    run's quarantine records.
    """
    from firechunk.run.outcomes import page_outcome, page_sizer
    from firechunk.run.plan import PageInput
    from firechunk.run.rows import page_chunks
    from firechunk.run.titles import clean_title, page_problem
    from firechunk.schemas.page import CrawledPage
    from firechunk.urls import canonical_url

    # Read as a crawl reads a page (a lone surrogate becomes U+FFFD), titled as a run titles it.
    page = CrawledPage.model_validate({"markdown": markdown, "metadata": {"title": title}})
    url = url or ""
    title = clean_title(page.metadata.title) or url
    if url and (problem := page_problem(url, title)):
        raise PageRejected(*problem)
    # Nothing validates it, and it has no report and no other page to be an alias of.
    options = replace(config.options(), validation_facts=False, page_figures=False)
    outcome = page_outcome(
        PageInput(0, url, title, page.markdown), page_sizer(config.measure()), options
    )
    if not outcome.chunked:
        raise PageRejected(outcome.reason or "unknown", outcome.detail)
    _, chunks = page_chunks(
        canonical_url(url) if url else "",
        title,
        outcome.drafts,
        [draft.text_hash for draft in outcome.drafts],
        aliases=[],
        seen={},
    )
    return chunks


def chunk_crawl(
    crawl: str | Path | CrawlResult | Mapping[str, Any] | Iterable[Mapping[str, Any]],
    *,
    config: ChunkConfig = DEFAULT_CONFIG,
    workers: int = 1,
) -> ChunkedCrawl:
    """Every page of a crawl chunked in memory, with the steps that need the whole crawl:
    site chrome removed, pages with the same content chunked once (aliases), a page served
    at many URLs cited by section, repeated chunks dropped, unusable pages quarantined.

    `crawl`: the path of a saved crawl (Firecrawl's crawl JSON, as `firechunk crawl` saves
    it; a partial crawl is read too), that JSON loaded (a dict with `data`), or its list of
    pages (`{"markdown", "metadata": {"sourceURL", "title"}}`). `workers` > 1 chunks on that
    many processes (worth it from a few hundred kB of markdown on).

    The result holds the chunks (as `chunks.json` of `firechunk chunk` on the same crawl
    holds them), the page records, the quarantined pages and the report. Nothing is written,
    reused, validated or published: that is `firechunk chunk`'s business.
    """
    from firechunk.run.memory import chunk_crawl as run_in_memory

    return run_in_memory(
        _crawl_of(crawl), workers=workers, encoding=config.measure(), options=config.options()
    )


def _crawl_of(crawl: Any) -> CrawlResult:
    from firechunk.crawlfile import read_crawl
    from firechunk.schemas.page import CrawlResult

    if isinstance(crawl, CrawlResult):
        return crawl
    if isinstance(crawl, str | Path):
        return read_crawl(Path(crawl))
    if isinstance(crawl, Mapping):
        return CrawlResult.model_validate(crawl)
    return CrawlResult.model_validate({"data": list(crawl)})


def load(
    run: str | Path = "data",
    *,
    db: str | None = None,
    collection: str | None = None,
    embedder: str | Embedder = "local",
    allow_shrink: bool = False,
    max_shrink: float | None = None,
    force_older: bool = False,
    say: Callable[[str], None] = lambda line: None,
    **embedder_options: Any,
) -> LoadResult:
    """Make a collection of the database hold exactly one published run, as `firechunk
    load` does: diff against what it holds, embed what is new, apply in one transaction.

    `run`: a data directory (its `latest` run is loaded) or a run directory under its
    `runs/` (that run, if it passed validation). `db`: a Postgres URL with pgvector (default:
    FIRECHUNK_DB_URL, else the embedded Postgres under the data directory). `collection`:
    the doc set of a data directory whose `latest` is loaded (default: the data directory's
    `latest`); a run always loads into its own collection. `embedder`: "local", "openai"
    (with `model=...`, ...), or an object with the `firechunk.embedders.Embedder`
    interface. `say` gets the lines the command would print.
    """
    require("psycopg", "pgvector", needed_by="firechunk.load")
    from firechunk.db.connect import connection, database_url
    from firechunk.db.load import LoadGuards, load_run
    from firechunk.db.runs import published_run
    from firechunk.settings import MAX_SHRINK

    data_dir, run_id = _run_of(Path(run))
    chosen = published_run(data_dir, run_id, collection)
    built = _embedder(embedder, embedder_options)
    guards = LoadGuards(
        allow_shrink=allow_shrink,
        max_shrink=MAX_SHRINK if max_shrink is None else max_shrink,
        force_older=force_older,
    )
    with connection(database_url(db), data_dir) as conn:
        return load_run(
            conn,
            chosen,
            built,
            guards=guards,
            only_if_latest=run_id == "latest",
            say=say,
        )


def search(
    question: str,
    *,
    db: str | None = None,
    data_dir: str | Path = "data",
    collection: str | None = None,
    k: int = 5,
    embedder: str | Embedder = "local",
    **embedder_options: Any,
) -> list[Hit]:
    """The `k` best chunks for `question`, as `firechunk search` finds them: BM25 and
    vectors fused by reciprocal rank. `collection`: default, the only one loaded; it must
    have been loaded with the same embedder. Each `Hit` has rank, score, chunk_id, url,
    title, breadcrumb and text."""
    require("psycopg", "pgvector", needed_by="firechunk.search")
    from firechunk.db.connect import connection, database_url
    from firechunk.db.search import chosen_collection
    from firechunk.db.search import search as run_search

    built = _embedder(embedder, embedder_options)
    with connection(database_url(db), Path(data_dir), create=False) as conn:
        return run_search(conn, chosen_collection(conn, collection, built), question, built, k)


def _embedder(embedder: str | Embedder, options: dict[str, Any]) -> Embedder:
    from firechunk.embedders import make_embedder

    if isinstance(embedder, str):
        return make_embedder(embedder, **options)
    if options:
        raise TypeError(f"embedder options {sorted(options)} go with an embedder's name")
    return embedder


def _run_of(path: Path) -> tuple[Path, str]:
    """(data directory, "latest" or a run id) for a data directory or a run directory."""
    from firechunk.db.runs import RunNotLoadable
    from firechunk.layout import DataDir, RunDir

    run = RunDir(path)
    latest = DataDir(path).latest.name
    if not run.status_json.is_file():
        return path, latest  # a data directory (published_run says if it has no run)
    if path.name == latest:
        return path.parent, latest
    if run.data_dir is None:
        where = DataDir(Path("DIR")).run("<run-id>").path
        raise RunNotLoadable(
            f"{path} is not a run of a data directory ({where}): only a published run is "
            "loaded; a run written with --out never is"
        )
    return run.data_dir.path, path.resolve().name
