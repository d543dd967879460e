"""Where firechunk keeps its files: the data directory and the run directories in it.

    <data dir>/
        runs/<run-id>/          one run, passed or failed (`RunDir`)
        runs/.publish.lock      held while a run is published
        latest -> runs/<run-id> the last run published, of any collection (a relative symlink)
        collections/<name>/latest -> ../../runs/<run-id>
                                the last run of that collection (doc set) that passed;
                                <name> is the collection's name, percent-encoded
        raw/<crawl-id>/         a crawl's download and its crawl.json (`RawCrawl`)
        jobs/<name>.json        a crawl's job state (and its .lock)
        postgres/               the embedded database's cluster

Every module that reads or writes one of these paths takes it from here, so each name is
spelled once and no module imports a higher one for a file name. Only names, and reads as
small as "what does `latest` point at", live here: what to do with a run (publish it,
refuse it, prune it) is decided by the modules that use these paths. An `--out` run is a
`RunDir` outside any data directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from firechunk.atomic import write_json
from firechunk.schemas.publish import RunStatus

# The names of run directories: a run id becomes a directory under runs/, so it may hold
# nothing that leaves it; hidden entries (the publish lock, a removal under way) never match.
RUN_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*")
MAX_FOLDER = 255  # bytes of a file name on the usual file systems


def collection_folder(name: str) -> str:
    """The folder under collections/ that holds a collection's `latest`: its name with every
    character but letters, digits and `_.-~` percent-encoded (`supabase.com%2Fdocs%2Fguides`),
    a leading dot too, so that no name leaves collections/ or hides there."""
    folder = quote(name, safe="")
    return f"%2E{folder[1:]}" if folder.startswith(".") else folder


def collection_name(folder: str) -> str:
    """The collection whose folder this is (`collection_folder` undone)."""
    return unquote(folder)


@dataclass(frozen=True)
class RunDir:
    """One run's directory: what each stage writes there, and what a reader finds."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def run_json(self) -> Path:
        """The run's `RunStart`: written as it is claimed, never again (its start time)."""
        return self.path / "run.json"

    @property
    def run_lock(self) -> Path:
        """Locked by the process running the run for as long as it runs."""
        return self.path / ".run.lock"

    @property
    def status_json(self) -> Path:
        """The verdict: passed, failed, superseded or interrupted; none while it runs."""
        return self.path / "status.json"

    @property
    def state_file(self) -> Path:
        """The page cache: the plan, every page's outcome, the chunk rows' digests."""
        return self.path / "rebuild_state.sqlite"

    @property
    def chunks_json(self) -> Path:
        return self.path / "chunks.json"

    @property
    def chunks_parquet(self) -> Path:
        return self.path / "chunks.parquet"

    @property
    def pages_parquet(self) -> Path:
        return self.path / "pages.parquet"

    @property
    def quarantine_jsonl(self) -> Path:
        return self.path / "quarantine.jsonl"

    @property
    def report_json(self) -> Path:
        return self.path / "report.json"

    @property
    def changes_json(self) -> Path:
        return self.path / "changes.json"

    @property
    def manifest_json(self) -> Path:
        """The sha256 of every other file, written as the run is published."""
        return self.path / "manifest.json"

    @property
    def seconds_json(self) -> Path:
        """Seconds per stage, as the flows timed them, and their total."""
        return self.path / "seconds.json"

    @property
    def validation_dir(self) -> Path:
        return self.path / "validation"

    @property
    def validation_summary(self) -> Path:
        """The `ValidationOutcome` the publisher and the run's history read."""
        return self.validation_dir / "summary.json"

    @property
    def validation_results(self) -> Path:
        """GX's result of each suite, `<suite>.json` (`suite_result`)."""
        return self.validation_dir / "results"

    def suite_result(self, suite: str) -> Path:
        return self.validation_results / f"{suite}.json"

    @property
    def report_html(self) -> Path:
        """The validation results as one self-contained page, readable offline."""
        return self.validation_dir / "report.html"

    @property
    def data_docs_dir(self) -> Path:
        """GX's Data Docs site."""
        return self.validation_dir / "data_docs"

    @property
    def data_docs_index(self) -> Path:
        return self.data_docs_dir / "index.html"

    @property
    def tables_dir(self) -> Path:
        """The tables the suites check, written by the write stage (`table`)."""
        return self.validation_dir / "tables"

    def table(self, name: str) -> Path:
        return self.tables_dir / f"{name}.parquet"

    @property
    def data_dir(self) -> DataDir | None:
        """The data directory the run is in; None for a run elsewhere (`--out`)."""
        resolved = self.path.resolve()
        data_dir = DataDir(resolved.parent.parent)
        return data_dir if resolved.parent == data_dir.runs else None

    def read_status(self) -> RunStatus | None:
        """The run's verdict; None if it has none yet (it has not finished)."""
        if not self.status_json.is_file():
            return None
        return RunStatus.model_validate_json(self.status_json.read_bytes())

    def write_status(self, status: RunStatus) -> Path:
        return write_json(self.status_json, status.model_dump(mode="json"))


@dataclass(frozen=True)
class DataDir:
    """A data directory: its runs, the `latest` link, raw crawls, job states, database."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def runs(self) -> Path:
        return self.path / "runs"

    @property
    def latest(self) -> Path:
        """The symlink to the last run published, whichever its collection (relative,
        `runs/<run-id>`): the run of a data directory that holds one doc set."""
        return self.path / "latest"

    @property
    def collections(self) -> Path:
        return self.path / "collections"

    def collection_latest(self, collection: str) -> Path:
        """The symlink to the last run of `collection` that passed (relative,
        `../../runs/<run-id>`): the baseline of its next run."""
        return self.collections / collection_folder(collection) / "latest"

    def collection_names(self) -> list[str]:
        """The collections that have a `latest`, by name."""
        if not self.collections.is_dir():
            return []
        return sorted(
            collection_name(folder.name)
            for folder in self.collections.iterdir()
            if (folder / "latest").is_symlink()
        )

    def published_runs(self) -> set[Path]:
        """The run directories `latest` and every collection's `latest` point at, resolved."""
        links = [self.latest, *(self.collection_latest(name) for name in self.collection_names())]
        return {link.resolve() for link in links if link.is_symlink()}

    @property
    def publish_lock(self) -> Path:
        """Beside the runs, out of sight: held while a run is published."""
        return self.runs / ".publish.lock"

    @property
    def raw(self) -> Path:
        """One folder per crawl (`RawCrawl`), named by the crawl's job id."""
        return self.path / "raw"

    @property
    def jobs(self) -> Path:
        return self.path / "jobs"

    def job_state(self, name: str) -> Path:
        """The state of the crawl `name`: what to resume (never the API key)."""
        return self.jobs / f"{name}.json"

    def job_lock(self, name: str) -> Path:
        """Held while a process works on the crawl `name`."""
        return self.jobs / f"{name}.lock"

    @property
    def postgres(self) -> Path:
        """The embedded Postgres cluster (`firechunk.db.embedded`)."""
        return self.path / "postgres"

    def run(self, run_id: str) -> RunDir:
        return RunDir(self.runs / run_id)

    def run_dirs(self) -> list[Path]:
        """The run directories under runs/, by name: not the publish lock, nor a hidden
        directory left by a removal."""
        if not self.runs.is_dir():
            return []
        return [
            path
            for path in sorted(self.runs.iterdir())
            if RUN_ID.fullmatch(path.name) and path.is_dir()
        ]

    def latest_run(self, collection: str | None = None) -> Path | None:
        """The run directory `latest` (of `collection`, when given) points at, resolved;
        None when that link is no symlink."""
        link = self.latest if collection is None else self.collection_latest(collection)
        return link.resolve() if link.is_symlink() else None

    @staticmethod
    def new_link(link: Path, tag: str) -> Path:
        """A new link made beside `link` (a `latest`), to be renamed over it in one step."""
        return link.with_name(f".{link.name}.{tag}.tmp")

    def new_latest_links(self) -> list[Path]:
        """What `new_link` made and nothing renamed yet (a publication killed midway)."""
        pattern = f".{self.latest.name}.*.tmp"
        return sorted([*self.path.glob(pattern), *self.collections.glob(f"*/{pattern}")])


@dataclass(frozen=True)
class RawCrawl:
    """One crawl's folder under raw/: its pages as they came, then the whole crawl."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def pages_jsonl(self) -> Path:
        """The pages, appended batch by batch as they are downloaded."""
        return self.path / "pages.jsonl"

    @property
    def crawl_json(self) -> Path:
        """The whole crawl in Firecrawl's shape, once the download is complete."""
        return self.path / "crawl.json"
