"""Every setting of a run, declared once.

Three sections: what is crawled (`CrawlSettings`), how the run is chunked, validated and
published (`RunSettings`), and whether and how it goes into the database
(`DatabaseSettings`). Everything else is derived from these models:

- the flows take the sections as parameters, so the deployment's run form shows each as a
  group of fields with these descriptions (`flows/rebuild.py`);
- the commands' options are built from the fields (`firechunk/commands/settings_options.py`:
  a field's `Cli` says its flag and metavar, its description is the help);
- a run's `run.json` records its `RunSettings` (`firechunk.run.stages.RunStart`), the page
  cache's key covers the chunker options built from them (`chunker_options`), and the
  expectation suites read their thresholds from them (`firechunk.validate.suites`).

A new setting is a field here and the code that uses it.

Kept free of Prefect, typer and the chunker: the command line imports it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from firechunk.crawl import DEFAULT_API_URL
from firechunk.layout import MAX_FOLDER, RUN_ID, collection_folder
from firechunk.schemas.api_version import ApiVersion
from firechunk.schemas.job import CrawlTarget

if TYPE_CHECKING:
    from firechunk.crawl import ClientOptions

SUPABASE_DOCS = "https://supabase.com/docs"
DEFAULT_ENCODING = "cl100k_base"
# The least `keep_runs` allowed: the published run and the one before it, which a run that
# started before the last publication may still be reading as its baseline.
MIN_KEEP = 2
# The shrink guard: the largest share of the last good run's pages or chunks a run may drop
# and still be published (`firechunk.run.shrink`), and the default share of its rows a load
# may remove from a collection, net (`firechunk load --max-shrink`, `firechunk.db.load`).
# More needs `allow_shrink`.
MAX_SHRINK = 0.2
# Fewer characters than this left to chunk are chunked in the run's own process when the
# run reuses pages or was not told how many workers to use: 2 MB is a few seconds of
# chunking, about what starting worker processes (or connecting to a cluster) costs before
# they chunk anything (`firechunk.run.stages`).
INLINE_CHARS = 2_000_000
DEFAULT_WORKERS = 2  # when not told, and there is more than INLINE_CHARS to chunk

TaskRunnerKind = Literal["process", "dask"]
EmbedderName = Literal["local", "openai"]


def _percent(share: float) -> str:
    """A share as the help says it: 0.2 is "20 %"."""
    return f"{share * 100:g} %"


@dataclass(frozen=True)
class Cli:
    """How a field shows on the command line: its flags (default: `--field-name`; a bool's
    default is an on-switch named for the field), metavar and environment variable."""

    flags: tuple[str, ...] = ()
    metavar: str | None = None
    envvar: str | None = None


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CrawlSettings(_Section):
    """What Firecrawl crawls."""

    site_url: Annotated[str, Cli(("--site",), "URL")] = Field(
        SUPABASE_DOCS,
        description="The documentation site Firecrawl crawls (not used when replaying a saved "
        "crawl).",
    )
    include_paths: Annotated[list[str], Cli(("--include",), "PATTERN")] = Field(
        default_factory=list,
        description="Only URL paths matching one of these Firecrawl path patterns (regexes, "
        "e.g. 'docs/guides/.*') are crawled.",
    )
    exclude_paths: Annotated[list[str], Cli(("--exclude",), "PATTERN")] = Field(
        default_factory=list, description="URL paths matching one of these patterns are skipped."
    )
    limit: Annotated[int | None, Cli(metavar="N")] = Field(
        None,
        ge=1,
        description="At most this many pages are crawled, which bounds the Firecrawl credits "
        "a run spends; empty for no limit.",
    )
    api_version: Annotated[ApiVersion, Cli(("--api",))] = Field(
        "v2", description="The Firecrawl API version."
    )
    api_url: Annotated[str | None, Cli(metavar="URL", envvar="FIRECRAWL_API_URL")] = Field(
        None,
        description="The Firecrawl API base URL, e.g. a self-hosted one; empty for "
        "https://api.firecrawl.dev.",
    )
    secret_block: Annotated[str, Cli(metavar="NAME")] = Field(
        "firecrawl-api-key",
        description="The Prefect Secret block holding the Firecrawl API key; without it, "
        "FIRECRAWL_API_KEY in the environment.",
    )
    max_wait: Annotated[float | None, Cli(metavar="SECONDS")] = Field(
        4 * 3600,
        gt=0,
        description="Seconds a Firecrawl job may run before the crawl stops waiting and the "
        "run fails (exit 3); the job is kept, so the next run resumes it. Empty to wait for "
        "ever.",
    )
    poll_interval: Annotated[float, Cli(metavar="SECONDS")] = Field(
        2.0, ge=0, description="The first wait between polls of a running job."
    )
    max_poll_interval: Annotated[float, Cli(metavar="SECONDS")] = Field(
        30.0, ge=0, description="The longest wait between polls (they back off up to it)."
    )
    request_timeout: Annotated[float, Cli(metavar="SECONDS")] = Field(
        60.0, gt=0, description="Seconds each request to Firecrawl may take."
    )
    retries: Annotated[int, Cli(metavar="N")] = Field(
        6, ge=1, description="Attempts per Firecrawl call (network errors, 429 and 5xx answers)."
    )
    retry_wait: Annotated[float, Cli(metavar="SECONDS")] = Field(
        1.0,
        ge=0,
        description="The first backoff between attempts; it doubles up to 30 s, plus jitter.",
    )

    def target(self) -> CrawlTarget:
        """What the crawl job is started with (and its name is made from)."""
        return CrawlTarget(
            url=self.site_url,
            include_paths=self.include_paths,
            exclude_paths=self.exclude_paths,
            limit=self.limit,
        )

    def client_options(self) -> ClientOptions:
        """How the crawl talks to Firecrawl: the API, the polling and the retries."""
        from firechunk.crawl import ClientOptions, RetryPolicy

        return ClientOptions(
            api_version=self.api_version,
            api_url=self.api_url or DEFAULT_API_URL,
            poll_interval=self.poll_interval,
            max_poll_interval=max(self.max_poll_interval, self.poll_interval),
            max_wait=self.max_wait,
            request_timeout=self.request_timeout,
            retry=RetryPolicy(
                attempts=self.retries,
                initial_wait=self.retry_wait,
                max_wait=max(30.0, self.retry_wait),
                jitter=min(1.0, self.retry_wait),
            ),
        )


class RunSettings(_Section):
    """How a run is chunked, validated and published; saved in its run.json. (Where it is
    written, the data directory and the run's id, are the run's own inputs, not settings.)"""

    collection: Annotated[str | None, Cli(metavar="NAME")] = Field(
        None,
        description="The doc set the run belongs to, its collection: its baseline, its "
        "latest, its shrink guard and its rows in the database are this collection's; empty "
        "for the crawl target's host and path (supabase.com/docs/guides/auth), or for a "
        "replayed crawl the path its pages share.",
    )
    full: Annotated[bool, Cli()] = Field(
        False,
        description="Chunk every page again instead of reusing what the last good run "
        "chunked (changes.json is still relative to that run).",
    )
    task_runner: Annotated[TaskRunnerKind, Cli()] = Field(
        "process",
        description="Where pages are chunked: processes on this machine, or a Dask cluster.",
    )
    dask_address: Annotated[str | None, Cli(metavar="ADDRESS")] = Field(
        None,
        description="The scheduler of an existing Dask cluster (tcp://host:8786); empty for "
        "a local cluster of `workers` processes.",
    )
    workers: Annotated[int | None, Cli(metavar="N")] = Field(
        None,
        ge=1,
        description="How many processes chunk pages side by side; empty for "
        f"{DEFAULT_WORKERS}, or none (this process) when under {INLINE_CHARS / 1e6:g} MB of "
        "pages is left to chunk.",
    )
    encoding: Annotated[str, Cli(metavar="NAME")] = Field(
        DEFAULT_ENCODING, description="The tiktoken encoding that counts tokens."
    )
    soft_tokens: Annotated[int, Cli(metavar="N")] = Field(
        800, ge=1, description="Chunks are packed up to this many tokens."
    )
    hard_tokens: Annotated[int, Cli(metavar="N")] = Field(
        1000,
        ge=1,
        description="No chunk is larger than this many tokens; the chunks suite checks it.",
    )
    min_tokens: Annotated[int, Cli(metavar="N")] = Field(
        100, ge=1, description="A fragment smaller than this many tokens joins a neighbour."
    )
    keep_runs: Annotated[int, Cli(metavar="N")] = Field(
        14,
        ge=0,
        description="How many finished runs and raw crawls are kept, the newest; older ones "
        "are removed as a run starts and once it is published (0 keeps them all).",
    )
    allow_shrink: Annotated[bool, Cli()] = Field(
        False,
        description=f"Publish a run that drops over {_percent(MAX_SHRINK)} of the last good "
        f"run's pages or chunks, and load one that shrinks its collection by over "
        f"{_percent(MAX_SHRINK)} (net).",
    )
    allow_partial: Annotated[bool, Cli()] = Field(
        False, description="Chunk a crawl whose status is not 'completed'."
    )
    max_failed_pages: Annotated[float, Cli(metavar="SHARE")] = Field(
        0.01,
        ge=0.0,
        le=1.0,
        description="The largest share of pages (0.01: 1 %) that may fail page-level "
        "expectations and be set aside (quarantined, their last good chunks kept) while the "
        "run still publishes.",
    )

    @field_validator("collection")
    @classmethod
    def _collection_is_a_name(cls, name: str | None) -> str | None:
        if name is not None:
            check_collection(name)
        return name

    @field_validator("keep_runs")
    @classmethod
    def _keeps_the_live_runs(cls, keep: int) -> int:
        check_keep(keep)
        return keep

    @model_validator(mode="before")
    @classmethod
    def _unset_limits_follow(cls, data: Any) -> Any:
        """A token limit not given is its field's default, lowered to the limit above it
        when that is smaller: `hard_tokens=500` alone is soft 500, min 100; `hard_tokens=50`
        is soft 50, min 50. A limit given is never changed (900 soft over 800 hard is an
        error), and the defaults are unchanged when the limit above is at least as large."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name, above in (("soft_tokens", "hard_tokens"), ("min_tokens", "soft_tokens")):
            limit = data.get(above, cls.model_fields[above].default)
            if name not in data and type(limit) is int and limit >= 1:
                data[name] = min(cls.model_fields[name].default, limit)
        return data

    @model_validator(mode="after")
    def _limits_in_order(self) -> RunSettings:
        check_token_limits(self.soft_tokens, self.hard_tokens, self.min_tokens)
        return self


class DatabaseSettings(_Section):
    """Whether the published run is loaded into Postgres + pgvector, and how."""

    load: Annotated[bool, Cli()] = Field(
        False,
        description="Load the published run into Postgres + pgvector (the URL from the Secret "
        "block, else FIRECHUNK_DB_URL, else an embedded Postgres under the data directory).",
    )
    embedder: Annotated[EmbedderName, Cli()] = Field(
        "local",
        description="How chunks are embedded: local (all-MiniLM-L6-v2, int8 ONNX, on this "
        "machine) or openai (any OpenAI-compatible API; key from the Secret block "
        "openai-api-key, else OPENAI_API_KEY).",
    )
    embedding_model: Annotated[str | None, Cli(("--model",), "NAME")] = Field(
        None, description="The model the openai embedder asks for."
    )
    embedding_dimensions: Annotated[int | None, Cli(("--dimensions",), "N")] = Field(
        None, ge=1, description="The vector size asked of the openai embedder; empty for the "
        "model's own."
    )  # fmt: skip
    embedding_base_url: Annotated[str | None, Cli(("--base-url",), "URL")] = Field(
        None, description="The openai embedder's API base URL; empty for OpenAI's."
    )
    embedding_concurrency: Annotated[int | None, Cli(("--concurrency",), "N")] = Field(
        None, ge=1, description="Requests the openai embedder keeps in flight; empty for its "
        "default (4). A 429's Retry-After holds them all back."
    )  # fmt: skip
    db_secret_block: Annotated[str, Cli(metavar="NAME")] = Field(
        "firechunk-db-url",
        description="The Prefect Secret block holding the database URL; without it, "
        "FIRECHUNK_DB_URL, else an embedded Postgres under the data directory.",
    )

    @model_validator(mode="after")
    def _embedder_options_fit(self) -> DatabaseSettings:
        if self.embedder == "local" and (
            self.embedding_model
            or self.embedding_dimensions
            or self.embedding_base_url
            or self.embedding_concurrency
        ):
            raise ValueError(
                "--model, --dimensions, --base-url and --concurrency need --embedder openai"
            )
        if self.embedder == "openai" and not self.embedding_model:
            raise ValueError("--embedder openai needs --model")
        return self

    def embedder_options(self, api_key: str | None = None) -> dict[str, object]:
        """What `firechunk.embedders.make_embedder(self.embedder, ...)` takes; `api_key`:
        the openai embedder's key (None: OPENAI_API_KEY)."""
        if self.embedder != "openai":
            return {}
        options: dict[str, object] = {
            "model": self.embedding_model,
            "dimensions": self.embedding_dimensions,
        }
        if api_key is not None:
            options["api_key"] = api_key
        if self.embedding_base_url:
            options["base_url"] = self.embedding_base_url
        if self.embedding_concurrency:
            options["concurrency"] = self.embedding_concurrency
        return options


SECTIONS: tuple[type[_Section], ...] = (CrawlSettings, RunSettings, DatabaseSettings)


def check_run_id(run_id: str | None) -> None:
    """A run id names a directory under runs/: nothing that could leave it."""
    if run_id is not None and not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r}: use letters, digits, '.', '_' and '-' only")


def check_collection(name: str) -> None:
    """A collection's name is one line of text that names a folder of the data directory
    (`firechunk.layout.collection_folder`)."""
    if not name.strip() or name != name.strip():
        raise ValueError(f"collection {name!r}: a name without blanks at either end")
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        raise ValueError(f"collection {name!r}: no control characters")
    if len(collection_folder(name)) > MAX_FOLDER:
        raise ValueError(f"collection {name[:40]!r}…: too long for a folder name")


def check_keep(keep: int) -> None:
    """0 keeps every run, else at least `MIN_KEEP`."""
    if keep != 0 and keep < MIN_KEEP:
        raise ValueError(f"keep_runs must be 0 (keep every run) or at least {MIN_KEEP}, got {keep}")


def check_token_limits(soft_tokens: int, hard_tokens: int, min_tokens: int) -> None:
    """The token limits are in order: min_tokens <= soft_tokens <= hard_tokens."""
    if not min_tokens <= soft_tokens <= hard_tokens:
        raise ValueError(
            "the token limits need min_tokens <= soft_tokens <= hard_tokens, got "
            f"{min_tokens}, {soft_tokens}, {hard_tokens}"
        )


def token_limits(
    soft_tokens: int | None = None, hard_tokens: int | None = None, min_tokens: int | None = None
) -> tuple[int, int, int]:
    """(soft, hard, min) as `RunSettings` takes them, for a caller of the chunker that is no
    run (`firechunk.ChunkConfig`): a limit left None is not given, and follows as it does in
    the run settings; bad limits raise the run settings' own `ValidationError`."""
    given = {"soft_tokens": soft_tokens, "hard_tokens": hard_tokens, "min_tokens": min_tokens}
    settings = RunSettings.model_validate(
        {name: value for name, value in given.items() if value is not None}
    )
    return settings.soft_tokens, settings.hard_tokens, settings.min_tokens
