"""`changes.json`: what a vector database must do to go from the last good run to this one.

Written into every run directory by the write stage. Apply `delete` and `upsert` (the rows are
in this run's `chunks.parquet` / `chunks.json`) to the `collection` of a database that holds
the run named `baseline` there, and it holds this run. The baseline is always a run of the
same collection: `delete` never names another collection's chunk. With `baseline` null
there was no good run of the collection to compare with: every chunk of the run is in
`upsert` and nothing is deleted.

With `full_replacement` true the baseline's chunks could not be verified against its
manifest.json, so nothing is known of what the database holds: `upsert` has every chunk of
the run, `delete` is empty, and a consumer deletes every chunk it holds for the collection
that is not in `upsert`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class PageChange(BaseModel):
    """A page (by canonical URL) that appeared, changed or disappeared since the baseline."""

    url: str = Field(description="Canonical URL.")
    status: str | None = Field(
        default=None, description="chunked, alias or quarantined in this run; null if removed."
    )
    content_hash: str | None = Field(
        default=None, description="sha256 of the cleaned markdown in this run; null if removed."
    )
    previous_status: str | None = Field(
        default=None, description="Status in the baseline; null if the page is new."
    )
    previous_content_hash: str | None = Field(
        default=None, description="Content hash in the baseline; null if the page is new."
    )


class ChangeSet(BaseModel):
    run_id: str
    collection: str | None = Field(
        default=None,
        description="The collection (doc set) of the run and of its baseline: the one to "
        "apply the change set to. Null only in a change set written before runs named one.",
    )
    baseline: str | None = Field(
        description="Run id of the last good run this run is compared with; null when there "
        "was none, and then every chunk is an upsert."
    )
    full: bool = Field(
        description="True when a full rebuild was asked for (`--full`): every page chunked "
        "again. The change set is relative to `baseline` either way."
    )
    pages_rechunked: int = Field(description="Pages the chunker ran on in this run.")
    pages_reused: int = Field(description="Pages whose chunker outcome came from the baseline.")
    upsert: list[str] = Field(
        default_factory=list,
        description="Chunk ids to insert or overwrite: new ids, and ids whose row changed "
        "(e.g. its overlap or chunk_index, with the same text), in chunks.json order.",
    )
    delete: list[str] = Field(
        default_factory=list, description="Chunk ids of the baseline that this run no longer has."
    )
    full_replacement: bool = Field(
        default=False,
        description="True when the baseline's chunk files do not match its manifest.json "
        "(or it has none): `upsert` holds every chunk of the run and `delete` is empty. "
        "Delete every chunk held for the collection that is not in `upsert`, then upsert.",
    )
    full_replacement_reason: str | None = Field(
        default=None, description="Which baseline file could not be verified, and why."
    )
    pages_added: list[PageChange] = Field(default_factory=list)
    pages_changed: list[PageChange] = Field(
        default_factory=list, description="Same URL, other content or status."
    )
    pages_removed: list[PageChange] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing for the database to do, and no page came, went or changed."""
        return not (
            self.full_replacement
            or self.upsert
            or self.delete
            or self.pages_added
            or self.pages_changed
            or self.pages_removed
        )
