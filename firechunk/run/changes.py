"""The change set of a run against the last good run, for the vector database.

Chunks are compared by id and by the sha256 of their line in `chunks.json`: an id that is
new, or whose row differs in any field (an overlap or a position that moved while the text
stayed), is an upsert; an id of the baseline that the run no longer has is a delete. A
baseline written before change sets existed has no row digests: then every chunk of the
run is an upsert (never wrong for a database, only more work), and deletes are still exact.

Pages are compared by canonical URL, status and content (a polars join of this run's pages
table with the baseline's `pages.parquet`): a quarantined page has no cleaned content, so
its raw markdown hash stands for it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import polars as pl

from firechunk.atomic import write_json
from firechunk.run.baseline import WAY_OUT, BaselineError
from firechunk.run.cache import STATE_FILE, read_chunk_rows
from firechunk.run.write import CHUNKS_PARQUET, PAGES_PARQUET
from schemas.changes import ChangeSet, PageChange
from schemas.report import PageRecord

CHANGES_JSON = "changes.json"


def change_set(
    run_id: str,
    chunk_rows: dict[str, str],
    pages: list[PageRecord],
    *,
    baseline: tuple[str, Path] | None,
    full: bool,
    baseline_damaged: tuple[str, ...] = (),
    pages_rechunked: int,
    pages_reused: int,
) -> ChangeSet:
    """Compare the run's chunk rows and pages with those of `baseline` (id, run dir), of
    whose files `baseline_damaged` changed since it was published."""
    before_rows: dict[str, str | None] = {}
    before_pages = _versions(pl.DataFrame(schema=_PAGE_COLUMNS))
    if baseline is not None:
        before_rows = baseline_chunk_rows(baseline[1], baseline_damaged)
        pages_file = Path(baseline[1]) / PAGES_PARQUET
        before_pages = _versions(
            _read_baseline(
                pages_file, lambda: pl.read_parquet(pages_file, columns=list(_PAGE_COLUMNS))
            )
        )
    rows = [{column: getattr(page, column) for column in _PAGE_COLUMNS} for page in pages]
    after_pages = _versions(pl.DataFrame(rows, schema=_PAGE_COLUMNS))
    joined = after_pages.join(
        before_pages, on="key", how="full", suffix="_before", maintain_order="left_right"
    )
    added = joined.filter(pl.col("key_before").is_null())
    removed = joined.filter(pl.col("key").is_null())
    changed = joined.filter(
        pl.col("key").is_not_null()
        & pl.col("key_before").is_not_null()
        & (pl.col("version") != pl.col("version_before"))
    )
    return ChangeSet(
        run_id=run_id,
        baseline=baseline[0] if baseline else None,
        full=full,
        pages_rechunked=pages_rechunked,
        pages_reused=pages_reused,
        upsert=[cid for cid, sha in chunk_rows.items() if before_rows.get(cid) != sha],
        delete=[cid for cid in before_rows if cid not in chunk_rows],
        pages_added=_page_changes(added, before=False),
        pages_changed=_page_changes(changed),
        pages_removed=_page_changes(removed, now=False),
    )


def _page_changes(
    joined: pl.DataFrame, *, now: bool = True, before: bool = True
) -> list[PageChange]:
    """The pages of `joined`, with this run's side (`now`) and the baseline's (`before`)."""
    return [
        PageChange(
            url=row["key"] if now else row["key_before"],
            status=row["status"] if now else None,
            content_hash=row["content_hash"] if now else None,
            previous_status=row["status_before"] if before else None,
            previous_content_hash=row["content_hash_before"] if before else None,
        )
        for row in joined.iter_rows(named=True)
    ]


_PAGE_COLUMNS = {
    "url": pl.String,
    "canonical_url": pl.String,
    "status": pl.String,
    "content_hash": pl.String,
    "raw_hash": pl.String,
}


def _versions(pages: pl.DataFrame) -> pl.DataFrame:
    """One row per canonical URL (`key`), in page order: status, content hash, `version`.

    URL variants of one page share its canonical URL: the chunked (or quarantined) record
    speaks for it, an alias record only when there is no other. The version is what is
    compared: the content hash, or the raw hash of a quarantined page (which has none).
    """
    return (
        pages.with_columns(
            key=pl.coalesce(pl.col("canonical_url").replace("", None), pl.col("url")),
            version=pl.concat_str(
                pl.col("status"),
                pl.coalesce(pl.col("content_hash").replace("", None), pl.col("raw_hash")),
                separator=" ",
            ),
            alias=pl.col("status") == "alias",
        )
        .sort("alias", maintain_order=True)
        .unique("key", keep="first", maintain_order=True)
        .select("key", "status", "content_hash", "version")
    )


def write_changes(run_dir: Path, changes: ChangeSet) -> Path:
    return write_json(Path(run_dir) / CHANGES_JSON, changes.model_dump(mode="json"))


def read_changes(run_dir: Path) -> ChangeSet:
    return ChangeSet.model_validate_json((Path(run_dir) / CHANGES_JSON).read_bytes())


def baseline_chunk_rows(run_dir: Path, damaged: tuple[str, ...] = ()) -> dict[str, str | None]:
    """Chunk id -> row digest of a published run, from its page cache; from its
    chunks.parquet, ids alone (digest None: every chunk then an upsert), when the cache is
    damaged or unreadable. Deletes stay exact either way."""
    state = Path(run_dir) / STATE_FILE
    if state.is_file() and STATE_FILE not in damaged:
        try:
            return dict(read_chunk_rows(state))
        except sqlite3.Error:
            pass
    parquet = Path(run_dir) / CHUNKS_PARQUET
    if CHUNKS_PARQUET in damaged:
        raise BaselineError(
            f"{parquet} and {state.name} changed since the run was published "
            f"(manifest.json): its chunks cannot be told. {WAY_OUT[0].upper()}{WAY_OUT[1:]}"
        )
    ids = _read_baseline(parquet, lambda: pl.read_parquet(parquet, columns=["chunk_id"]))
    return dict.fromkeys(ids["chunk_id"].to_list())


def _read_baseline(path: Path, read: Callable[[], pl.DataFrame]) -> pl.DataFrame:
    """A baseline file, or a BaselineError naming it and the way out."""
    try:
        return read()
    except Exception as error:  # polars and pyarrow raise many kinds for a damaged file
        why = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise BaselineError(f"{path} cannot be read ({why}): {WAY_OUT}") from None
