"""The change set of a run against the last good run, for the vector database.

Chunks are compared by id and by the sha256 of their line in `chunks.json`: an id that is
new, or whose row differs in any field (an overlap or a position that moved while the text
stayed), is an upsert; an id of the baseline that the run no longer has is a delete. A
baseline written before change sets existed has no row digests: then every chunk of the
run is an upsert (never wrong for a database, only more work), and deletes are still exact.

Pages are compared by canonical URL, status and content: a quarantined page has no cleaned
content, so its raw markdown hash stands for it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow.parquet as pq

from firechunk.atomic import write_json
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
    pages_rechunked: int,
    pages_reused: int,
) -> ChangeSet:
    """Compare the run's chunk rows and pages with those of `baseline` (id, run dir)."""
    before_rows: dict[str, str | None] = {}
    before_pages: dict[str, tuple[str, str]] = {}
    if baseline is not None:
        before_rows = baseline_chunk_rows(baseline[1])
        before_pages = baseline_pages(baseline[1])
    after_pages = page_versions(
        (p.canonical_url or p.url, p.status, p.content_hash, p.raw_hash) for p in pages
    )
    return ChangeSet(
        run_id=run_id,
        baseline=baseline[0] if baseline else None,
        full=full,
        pages_rechunked=pages_rechunked,
        pages_reused=pages_reused,
        upsert=[cid for cid, sha in chunk_rows.items() if before_rows.get(cid) != sha],
        delete=[cid for cid in before_rows if cid not in chunk_rows],
        pages_added=[
            PageChange(url=url, status=status, content_hash=content)
            for url, (status, content, _) in after_pages.items()
            if url not in before_pages
        ],
        pages_changed=[
            PageChange(
                url=url,
                status=status,
                content_hash=content,
                previous_status=before_pages[url][0],
                previous_content_hash=before_pages[url][1],
            )
            for url, (status, content, version) in after_pages.items()
            if url in before_pages and before_pages[url][2] != version
        ],
        pages_removed=[
            PageChange(url=url, previous_status=status, previous_content_hash=content)
            for url, (status, content, _) in before_pages.items()
            if url not in after_pages
        ],
    )


def write_changes(run_dir: Path, changes: ChangeSet) -> Path:
    return write_json(Path(run_dir) / CHANGES_JSON, changes.model_dump(mode="json"))


def baseline_chunk_rows(run_dir: Path) -> dict[str, str | None]:
    """Chunk id -> row digest of a published run (digest None if the run kept none)."""
    state = Path(run_dir) / STATE_FILE
    if state.is_file():
        try:
            return dict(read_chunk_rows(state))
        except sqlite3.Error:  # damaged: the ids alone, every chunk then an upsert
            pass
    ids = pq.read_table(Path(run_dir) / CHUNKS_PARQUET, columns=["chunk_id"]).column(0)
    return dict.fromkeys(ids.to_pylist())


def baseline_pages(run_dir: Path) -> dict[str, tuple[str, str, tuple[str, str]]]:
    columns = ["url", "canonical_url", "status", "content_hash", "raw_hash"]
    table = pq.read_table(Path(run_dir) / PAGES_PARQUET, columns=columns).to_pydict()
    return page_versions(
        (canonical or url, status, content, raw)
        for url, canonical, status, content, raw in zip(*table.values(), strict=True)
    )


def page_versions(pages) -> dict[str, tuple[str, str, tuple[str, str]]]:
    """Canonical URL -> (status, content hash, version) from (url, status, content, raw).

    URL variants of one page share its canonical URL: the chunked (or quarantined) record
    speaks for it, an alias record only when there is no other. The version is what is
    compared: the content hash, or the raw hash of a quarantined page (which has none).
    """
    found: dict[str, tuple[str, str, tuple[str, str]]] = {}
    for url, status, content, raw in sorted(pages, key=lambda page: page[1] == "alias"):
        found.setdefault(url, (status, content, (status, content or raw)))
    return found
