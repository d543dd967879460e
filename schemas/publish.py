"""The fate of a run: its `status.json` on disk, and what publishing it returns."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from firechunk.schemas.validation import ValidationOutcome

# "superseded": passed, but `latest` moved to another run while it ran, so its change set
# (relative to the run latest pointed at when it started) was not published.
# "interrupted": Ctrl-C or SIGTERM stopped it before it was published.
RunState = Literal["passed", "failed", "superseded", "interrupted"]


class RunStatus(BaseModel):
    """`data/runs/<run-id>/status.json`: read it to know whether a run may be trusted."""

    run_id: str
    status: RunState = Field(
        description="'passed' only if every expectation passed; only a passed run is ever "
        "published (`data/latest` says which one is)."
    )
    finished_at: str = Field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"),
        description="UTC, ISO 8601.",
    )
    evaluated_expectations: int = 0
    failed_expectations: list[str] = Field(
        default_factory=list, description="'suite/name' of each expectation that failed."
    )
    error: str | None = Field(
        default=None, description="Why writing or validating the run stopped, if it did."
    )


class PublishResult(BaseModel):
    run_id: str
    run_dir: Path
    published: bool
    latest: Path = Field(description="The `latest` link; it points at this run only if published.")
    validation: ValidationOutcome
    superseded_by: str | None = Field(
        default=None,
        description="Set when the run passed but was not published: the run `latest` moved "
        "to while this one ran.",
    )
    refused: str | None = Field(
        default=None,
        description="Set when the run passed but publishing was refused (the shrink guard), "
        "with the reason and the way to override it.",
    )
