"""The change set of a run against the last good run of its collection, for the vector
database: another collection's run is never its baseline, so it never deletes another doc
set's chunk.

Chunks are compared by id and by the sha256 of their line in `chunks.json`: an id that is
new, or whose row differs in any field (an overlap or a position that moved while the text
stayed), is an upsert; an id of the baseline that the run no longer has is a delete.

Only baseline files that match its manifest.json are read for that (`verified_chunk_rows`):
a delete or a skipped upsert computed from a file edited after publication leaves the
database out of step with the run, silently. The row digests come from the baseline's page
cache when the manifest covers it; otherwise every chunk of the run is an upsert (never
wrong for a database, only more work) and deletes come from the verified chunks.json. With
no manifest, or a chunk file a loader reads that is not as published, nothing about the
baseline's chunks is known: the change set is a full replacement (`ChangeSet`).

Pages are compared by canonical URL, status and content (a polars join of this run's pages
table with the baseline's `pages.parquet`): a quarantined page has no cleaned content, so
its raw markdown hash stands for it. The page lists tell people (and the shrink guard) what
changed; the database acts on chunk ids alone.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl

from firechunk.atomic import write_json
from firechunk.layout import RunDir
from firechunk.run.baseline import WAY_OUT, BaselineError, published_digests
from firechunk.run.cache import read_chunk_rows
from firechunk.schemas.changes import ChangeSet, PageChange


def change_set(
    run_id: str,
    collection: str,
    chunk_rows: dict[str, str],
    pages_file: Path,
    *,
    baseline: tuple[str, Path] | None,
    full: bool,
    baseline_damaged: tuple[str, ...] = (),
    pages_rechunked: int,
    pages_reused: int,
) -> ChangeSet:
    """Compare the run's chunk rows and pages (its `pages_file`, pages.parquet) with those
    of `baseline` (id, run dir).

    `baseline_damaged` is what the run found as it started; the baseline's chunk files are
    checked against its manifest again as they are read, so one changed since counts too.
    """
    before_rows: dict[str, str | None] = {}
    distrust: str | None = None
    before_pages = _versions(pl.DataFrame(schema=_PAGE_COLUMNS))
    if baseline is not None:
        try:
            before_rows = verified_chunk_rows(baseline[1])
        except Unverified as why:
            distrust = f"baseline run {baseline[0]}: {why}"
        before_file = RunDir(baseline[1]).pages_parquet
        before_pages = _versions(_read_baseline(before_file, lambda: _read_pages(before_file)))
    after_pages = _versions(_read_pages(pages_file))
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
        collection=collection,
        baseline=baseline[0] if baseline else None,
        full=full,
        pages_rechunked=pages_rechunked,
        pages_reused=pages_reused,
        upsert=[cid for cid, sha in chunk_rows.items() if before_rows.get(cid) != sha],
        delete=[cid for cid in before_rows if cid not in chunk_rows],
        full_replacement=distrust is not None,
        full_replacement_reason=distrust,
        pages_added=_page_changes(added, before=False),
        pages_changed=_page_changes(changed),
        pages_removed=_page_changes(removed, now=False),
    )


def _read_pages(path: Path) -> pl.DataFrame:
    """The columns of a run's pages.parquet that a change set compares."""
    return pl.read_parquet(path, columns=list(_PAGE_COLUMNS)).cast(_PAGE_COLUMNS)


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


_PAGE_COLUMNS = pl.Schema(
    {
        "url": pl.String,
        "canonical_url": pl.String,
        "status": pl.String,
        "content_hash": pl.String,
        "raw_hash": pl.String,
    }
)


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
    return write_json(RunDir(run_dir).changes_json, changes.model_dump(mode="json"))


def read_changes(run_dir: Path) -> ChangeSet:
    return ChangeSet.model_validate_json(RunDir(run_dir).changes_json.read_bytes())


class Unverified(Exception):
    """The baseline's chunks cannot be told from files its manifest vouches for; the
    message says which file and why."""


def verified_chunk_rows(run_dir: Path) -> dict[str, str | None]:
    """Chunk id -> row digest of a published run, read only from files its manifest.json
    vouches for; digest None (the chunk is then an upsert) when the page cache is not
    covered by it. Unverified when the chunk ids themselves cannot be.

    A database holds what a loader read from chunks.json or chunks.parquet, so both must be
    as published: were either edited, the database may hold that version or the published
    one, and no diff is right for both."""
    run = RunDir(run_dir)
    recorded = published_digests(run_dir)
    if recorded is None:
        raise Unverified(
            f"its {run.manifest_json.name} is missing or unreadable: no file can be verified"
        )
    _check(run.chunks_parquet, recorded)
    if _matches(run.state_file, recorded):
        _check(run.chunks_json, recorded)
        try:
            return dict(read_chunk_rows(run.state_file))
        except sqlite3.Error:
            pass  # a cache without chunk digests: the ids come from chunks.json
    return _chunk_ids(run.chunks_json, recorded)


def _matches(path: Path, recorded: dict[str, str]) -> bool:
    """Whether the manifest records `path` and it still has that sha256."""
    return path.name in recorded and _sha256(path) == recorded[path.name]


def _check(path: Path, recorded: dict[str, str]) -> None:
    """Unverified unless `path` has the sha256 the manifest records for it."""
    if path.name not in recorded:
        raise Unverified(_unrecorded(path))
    if not _matches(path, recorded):
        raise Unverified(_changed(path))


def _chunk_ids(path: Path, recorded: dict[str, str]) -> dict[str, str | None]:
    """The chunk ids of a `chunks.json` (one row a line), hashed as they are read, so the
    ids returned are those of the bytes checked against the manifest."""
    if path.name not in recorded:
        raise Unverified(_unrecorded(path))
    digest = hashlib.sha256()
    ids: dict[str, str | None] = {}  # no digests: each chunk is then an upsert
    readable = True
    try:
        with open(path, "rb") as handle:
            for line in handle:
                digest.update(line)
                row = line.rstrip(b"\n").removesuffix(b",")
                if readable and row not in (b"[", b"]"):
                    try:
                        ids[orjson.loads(row)["chunk_id"]] = None
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        readable = False
    except OSError:
        raise Unverified(_changed(path)) from None
    if digest.hexdigest() != recorded[path.name]:
        raise Unverified(_changed(path))
    if not readable:
        raise Unverified(f"its {path.name} is not one chunk row a line")
    return ids


def _unrecorded(path: Path) -> str:
    """`path`, a file of a run, is not among those the run's manifest records."""
    return f"its {_manifest_name(path)} does not record {path.name}"


def _changed(path: Path) -> str:
    return f"its {path.name} is missing or changed since it was published ({_manifest_name(path)})"


def _manifest_name(path: Path) -> str:
    """The name of the manifest of the run `path` (a file in it) belongs to."""
    return RunDir(path.parent).manifest_json.name


def _sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


def baseline_chunk_rows(run_dir: Path, damaged: tuple[str, ...] = ()) -> dict[str, str | None]:
    """Chunk id -> row digest of a published run, from its page cache; from its
    chunks.parquet, ids alone (digest None: every chunk then an upsert), when the cache is
    damaged or unreadable. Deletes stay exact either way."""
    run = RunDir(run_dir)
    state = run.state_file
    if state.is_file() and state.name not in damaged:
        try:
            return dict(read_chunk_rows(state))
        except sqlite3.Error:
            pass
    parquet = run.chunks_parquet
    if parquet.name in damaged:
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
