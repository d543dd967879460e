"""What validating a run found: one outcome per expectation, and the verdict over all suites.

These models are what the publisher and the CLI read; the raw GX results are kept beside
them on disk (`<run-dir>/validation/results/<suite>.json`) for anyone who needs every detail.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from firechunk.schemas.report import SetAsidePage


class ExpectationOutcome(BaseModel):
    """One expectation of one suite, as it ran on the run's data."""

    suite: str = Field(description="Suite name, which is also the table it checked.")
    name: str = Field(description="The expectation's `meta.name` in the suite file.")
    expectation_type: str
    column: str | None = Field(default=None, description="Column(s) checked, if any.")
    success: bool
    element_count: int | None = Field(default=None, description="Rows the expectation looked at.")
    unexpected_count: int | None = Field(default=None, description="Rows that broke it.")
    observed_value: Any = Field(default=None, description="For table-level expectations.")
    examples: list[dict[str, Any]] = Field(
        default_factory=list, description="A few failing rows: id columns and the bad value."
    )
    error: str | None = Field(default=None, description="Set when GX could not evaluate it.")
    page_scoped: bool = Field(
        default=False,
        description="Its failures belong to pages (`meta.page_scoped` in the suite file): the "
        "pages can be set aside instead of failing the run.",
    )
    failed_urls: list[str] = Field(
        default_factory=list,
        description="Every page URL its failing rows name (page-scoped expectations only).",
    )


class ValidationOutcome(BaseModel):
    """The verdict on a run: it passes only if every expectation of every suite passed."""

    success: bool
    evaluated_expectations: int
    successful_expectations: int
    seconds: float = Field(
        description="Wall time: tables, GX (with its import on a process's first validation), "
        "results and Data Docs."
    )
    suites: list[str] = Field(default_factory=list)
    expectations: list[ExpectationOutcome] = Field(default_factory=list)
    data_docs_index: str | None = Field(
        default=None, description="Data Docs index.html, relative to the run directory."
    )
    pages_set_aside: list[SetAsidePage] = Field(
        default_factory=list,
        description="Pages that failed page-level expectations and were quarantined, the run "
        "written again and validated again (`max_failed_pages`).",
    )
    set_aside_refused: str | None = Field(
        default=None, description="Why the failures could not be set aside page by page."
    )

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [outcome for outcome in self.expectations if not outcome.success]
