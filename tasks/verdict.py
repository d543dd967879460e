"""The verdict of a night in one line, the first thing the dashboard says about it.

An operator opening a run should not have to dig: passed (and what it changed), refused
(by what, and how much), failed validation (which expectation, the value and what is
allowed), crawl failed (why, and where the key is read from) or interrupted. Every kind
of night is told here and nowhere else; `tasks.dashboard` puts it on the first card and
`tasks.artifacts` in the descriptions. No Prefect here: a verdict is a value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from firechunk.crawl import API_KEY_ENV
from firechunk.layout import RunDir
from firechunk.schemas.validation import ExpectationOutcome, ValidationOutcome
from firechunk.words import counted

if TYPE_CHECKING:
    from firechunk.pipeline import Night, Request, StageName
    from firechunk.schemas.changes import ChangeSet
    from firechunk.schemas.publish import PublishResult

Kind = Literal[
    "passed", "refused", "superseded", "validation failed", "crawl failed", "failed", "interrupted"
]
# What each expectation allows, by (suite, name): `between 0.97 and 1.03`.
Rules = dict[tuple[str, str], str]
SHORT_VALUE = 8  # significant digits of a number an expectation observed


@dataclass(frozen=True)
class Verdict:
    """`headline`: one line, the first card's description; `details`: lines under it."""

    kind: Kind
    headline: str
    details: tuple[str, ...] = ()

    @property
    def good(self) -> bool:
        return self.kind == "passed"


def night_verdict(
    request: Request,
    night: Night,
    error: BaseException | None,
    stage: StageName,
    interrupted: bool = False,
) -> Verdict:
    """The verdict on `night`: from its publish result once there is one, else from the
    error that stopped it in `stage` (`interrupted`: Ctrl-C or SIGTERM)."""
    if interrupted:
        return Verdict(
            "interrupted",
            f"INTERRUPTED during {stage}: nothing published, the last good run stays latest",
        )
    if night.result is not None and error is None:
        return result_verdict(night.result, night)
    if error is None:  # a run written elsewhere (`out`): validated, never published
        return Verdict("passed", "PASSED · written, not published (an --out run)")
    return error_verdict(request, error, stage)


def result_verdict(result: PublishResult, night: Night | None = None) -> Verdict:
    """Passed, refused, superseded or failed validation, from the publish result."""
    if result.published:
        return Verdict("passed", " · ".join(_passed_parts(night)))
    if result.refused is not None:
        return Verdict(
            "refused",
            f"REFUSED: the shrink guard, {_dropped(result.refused)}",
            (f"It passed validation, but {result.refused}",),
        )
    if result.superseded_by is not None:
        return Verdict(
            "superseded",
            f"NOT PUBLISHED: superseded by run {result.superseded_by}",
            ("It passed, but another run was published while it ran.",),
        )
    return validation_verdict(result.validation, allowed_values(result.run_dir))


def validation_verdict(outcome: ValidationOutcome, rules: Rules) -> Verdict:
    """The first failing expectation in the headline (value, rows, allowed), all of them
    below."""
    failed = outcome.failed
    first = failed[0] if failed else None
    more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
    headline = "VALIDATION FAILED" + (f": {failing_line(first, rules)}{more}" if first else "")
    return Verdict(
        "validation failed", headline, tuple(failing_line(item, rules) for item in failed)
    )


def failing_line(item: ExpectationOutcome, rules: Rules) -> str:
    """`pages/page_tokens_in_chunks_ratio: token_ratio 1.0308 on 2 of 12 rows, allowed
    between 0.97 and 1.03`: which expectation, the value it saw, how many rows broke it
    and what it allows (`rules`, from `allowed_values`)."""
    where = f"{item.suite}/{item.name}"
    if item.error:
        return f"{where}: could not be evaluated ({item.error})"
    seen = readable(first_bad_value(item))
    rows = ""
    if item.unexpected_count is not None:
        rows = f" on {item.unexpected_count} of {counted(item.element_count or 0, 'row')}"
    value = f" {item.column or 'value'} {seen}" if seen else ""
    rule = rules.get((item.suite, item.name))
    allowed = f", allowed {rule}" if rule else ""
    return f"{where}:{value}{rows}{allowed}".rstrip(":")


def first_bad_value(item: ExpectationOutcome) -> object:
    """The value that broke the expectation: the observed one for a table-level check,
    else the checked column's value in its first failing row."""
    if item.observed_value is not None:
        return item.observed_value
    if not item.examples:
        return None
    example = item.examples[0]
    if item.column in example:
        return example[item.column]
    return example.get("value", None)


def readable(value: object) -> str:
    """A value as a person reads it: numbers short, numpy's `np.float64(1.03)` as `1.03`,
    no Python repr of a dict."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{SHORT_VALUE}g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return ", ".join(f"{key} {readable(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(readable(item) for item in value)
    text = re.sub(r"np\.\w+\(([^()]*)\)", r"\1", str(value))
    return text.replace("\n", " ")


def allowed_values(run_dir: Path) -> Rules:
    """What each expectation of the run allows, `(suite, name)` -> `between 0.97 and 1.03`,
    from GX's results in the run (thresholds the run's own settings filled in)."""
    allowed: Rules = {}
    for path in sorted(RunDir(run_dir).validation_results.glob("*.json")):
        try:
            results = json.loads(path.read_text(encoding="utf-8"))["results"]
        except (OSError, ValueError, KeyError):
            continue
        for result in results:
            config = result.get("expectation_config") or {}
            name = str((config.get("meta") or {}).get("name", config.get("type")))
            rule = _rule(config.get("kwargs") or {})
            if rule:
                allowed[(path.stem, name)] = rule
    return allowed


def _rule(kwargs: dict[str, Any]) -> str:
    """An expectation's thresholds in words."""
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if low is not None and high is not None:
        return f"between {readable(low)} and {readable(high)}"
    if low is not None:
        return f"at least {readable(low)}"
    if high is not None:
        return f"at most {readable(high)}"
    if "value_set" in kwargs:
        return f"one of {readable(kwargs['value_set'])}"
    if "regex" in kwargs:
        return f"matching `{kwargs['regex']}`"
    return ""


def error_verdict(request: Request, error: BaseException, stage: StageName) -> Verdict:
    """A night stopped by an error: the crawl's, with where the key comes from, or
    another stage's."""
    from firechunk.crawl.errors import CrawlError, MissingApiKeyError

    message = str(error) or type(error).__name__
    if isinstance(error, CrawlError):
        key = (
            f"The Firecrawl key is read from the Prefect Secret block "
            f"{request.crawl.secret_block!r} (`firechunk` deployments), else ${API_KEY_ENV}."
        )
        if isinstance(error, MissingApiKeyError):
            return Verdict(
                "crawl failed",
                f"CRAWL FAILED: no Firecrawl API key (Secret block "
                f"{request.crawl.secret_block!r} or ${API_KEY_ENV})",
                (message, key),
            )
        return Verdict("crawl failed", f"CRAWL FAILED: {message}", (key,))
    return Verdict("failed", f"FAILED during {stage}: {type(error).__name__}: {message}")


def _passed_parts(night: Night | None) -> list[str]:
    parts = ["PASSED", "published"]
    if night is None:
        return parts
    if night.loaded is not None:
        parts.append("loaded")
    else:
        parts.append("not loaded")
    if night.written is None:
        return parts
    changes = night.written.changes()
    if changes.baseline is None:
        parts.append(f"first run: {counted(len(changes.pages_added), 'page')}")
    else:
        parts.append(pages_changed(changes))
    return parts


def pages_changed(changes: ChangeSet) -> str:
    """`3 pages changed` (added, changed or removed), or `no page changed`."""
    total = len(changes.pages_added) + len(changes.pages_changed) + len(changes.pages_removed)
    return f"{counted(total, 'page')} changed" if total else "no page changed"


def _dropped(refused: str) -> str:
    """`9 of 13 pages dropped` from the shrink guard's sentence (`firechunk.run.shrink`)."""
    found = re.findall(r"(\d+) of its (\d+) (pages|chunks)", refused)
    if not found:
        return refused
    return ", ".join(f"{part} of {whole} {what} dropped" for part, whole, what in found)
