"""What validating a run found: one outcome per expectation, and the verdict over all suites.

These models are what the publisher and the CLI read; the raw GX results are kept beside
them on disk (`<run-dir>/validation/results/<suite>.json`) for anyone who needs every detail.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


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

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [outcome for outcome in self.expectations if not outcome.success]
