"""`validation/report.html`: a run's validation results as one self-contained page.

GX's Data Docs load their styles and scripts from CDNs, so on a machine without internet
(a worker, an air-gapped operator) they render as an empty page. This page has its CSS
inline and no link, image or script from anywhere: it reads the same offline, from a
copied run directory or a mail attachment. It is written beside `summary.json` at
validation time (`firechunk.validate.suites.record_outcome`), and can be made again from the
files of any run (`write_report_from_files`).

Data values (URLs of pages, chunk texts) are shown as text, never as links.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from firechunk.atomic import write_text
from firechunk.layout import RunDir
from firechunk.schemas.validation import ExpectationOutcome, ValidationOutcome

_VALUE_CHARS = 300  # an observed value or example cell longer than this is cut
_HIDDEN_KWARGS = {"batch_id"}  # GX's own bookkeeping, not part of the rule

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem;
       color: #1f2328; background: #fff; }
h1 { font-size: 1.6rem; margin: 0 0 .3rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .5rem; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1rem; margin: 1.2rem 0 .3rem; }
.verdict { display: inline-block; padding: .1rem .6rem; border-radius: 1rem; color: #fff;
           font-weight: 600; }
.passed { background: #1a7f37; } .failed { background: #cf222e; } .error { background: #9a6700; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0 1rem; }
th, td { border: 1px solid #d0d7de; padding: .3rem .5rem; text-align: left;
         vertical-align: top; }
th { background: #f6f8fa; }
tr.bad td { background: #ffebe9; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace;
            word-break: break-all; white-space: pre-wrap; }
.muted { color: #59636e; }
.box { border: 1px solid #cf222e; border-radius: .4rem; padding: .2rem 1rem .6rem;
       margin: .8rem 0; }
"""


def write_report(
    run_dir: Path,
    outcome: ValidationOutcome,
    results: dict[str, dict[str, Any]],
    run_id: str | None = None,
) -> Path:
    """Write the run's `validation/report.html` (atomically) from the outcome and GX's
    results."""
    return write_text(RunDir(run_dir).report_html, render_report(outcome, results, run_id))


def write_report_from_files(
    run_dir: Path, outcome: ValidationOutcome | None = None, run_id: str | None = None
) -> Path:
    """Make the page from a run's `validation/results/*.json` and `outcome` (by default its
    `validation/summary.json`: a run validated before the page existed, or whose page was
    deleted)."""
    run = RunDir(run_dir)
    if outcome is None:
        outcome = ValidationOutcome.model_validate_json(run.validation_summary.read_bytes())
    results = {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(run.validation_results.glob("*.json"))
    }
    return write_report(run_dir, outcome, results, run_id)


def render_report(
    outcome: ValidationOutcome, results: dict[str, dict[str, Any]], run_id: str | None = None
) -> str:
    """The whole page: the verdict, every failed expectation with its rule and failing rows,
    then every expectation of every suite."""
    rules = _rules(results)
    title = f"Validation {'passed' if outcome.success else 'FAILED'}" + (
        f": run {run_id}" if run_id else ""
    )
    body = [_heading(outcome, title), *_set_aside(outcome), *_failures(outcome, rules)]
    for suite in outcome.suites:
        body += _suite_table(suite, [item for item in outcome.expectations if item.suite == suite],
                             rules)  # fmt: skip
    written = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    body.append(
        f'<p class="muted">Written {written} from <code>summary.json</code> and '
        "<code>results/*.json</code> beside this file (GX's own results, every detail).</p>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _heading(outcome: ValidationOutcome, title: str) -> str:
    verdict = "passed" if outcome.success else "failed"
    return (
        f"<h1>{escape(title)}</h1>\n"
        f'<p><span class="verdict {verdict}">{verdict.upper()}</span> '
        f"{outcome.successful_expectations} of {outcome.evaluated_expectations} expectations "
        f"passed in {outcome.seconds:.1f} s; suites: {escape(', '.join(outcome.suites))}.</p>"
    )


def _set_aside(outcome: ValidationOutcome) -> list[str]:
    """The pages that failed page-level expectations and were quarantined, or why the
    failures could not be set aside page by page."""
    parts = []
    if outcome.pages_set_aside:
        parts.append(
            f"<h2>Pages set aside ({len(outcome.pages_set_aside)})</h2>\n<p>They failed "
            "page-level expectations and were quarantined; the run was written and validated "
            "again without them (max_failed_pages).</p>\n<table><tr><th>page</th>"
            "<th>failed</th><th>kept from the last good run</th></tr>"
        )
        for page in outcome.pages_set_aside:
            kept = f"{page.chunks_carried} chunks of run {page.carried_from}"
            parts.append(
                f"<tr><td>{escape(page.url)}</td><td>{escape(', '.join(page.expectations))}"
                f"</td><td>{escape(kept) if page.chunks_carried else 'nothing'}</td></tr>"
            )
        parts.append("</table>")
    if outcome.set_aside_refused:
        parts.append(f"<p>Not set aside page by page: {escape(outcome.set_aside_refused)}.</p>")
    return parts


def _failures(outcome: ValidationOutcome, rules: dict[tuple[str, str], dict]) -> list[str]:
    """A box per failed expectation: what it requires, what it found, a few failing rows."""
    if not outcome.failed:
        return []
    parts = [f"<h2>Failed expectations ({len(outcome.failed)})</h2>"]
    for item in outcome.failed:
        rule = rules.get((item.suite, item.name), {})
        parts.append(
            f'<div class="box"><h3>{escape(item.suite)} / {escape(item.name)}</h3>\n'
            f"<p><code>{escape(item.expectation_type)}</code>"
            + (f" on <code>{escape(item.column)}</code>" if item.column else "")
            + f" {escape(_kwargs(rule.get('kwargs')))}</p>\n"
            + (f"<p>{escape(rule['notes'])}</p>\n" if rule.get("notes") else "")
            + f"<p>Found: {escape(_found(item))}</p>\n"
            + _examples(item.examples)
            + "</div>"
        )
    return parts


def _suite_table(
    suite: str, items: list[ExpectationOutcome], rules: dict[tuple[str, str], dict]
) -> list[str]:
    passed = sum(item.success for item in items)
    rows = [
        f"<h2>Suite {escape(suite)}: {passed} of {len(items)} passed</h2>",
        "<table><thead><tr><th>expectation</th><th>rule</th><th>result</th>"
        "<th>unexpected rows</th><th>observed</th></tr></thead><tbody>",
    ]
    for item in items:
        rule = rules.get((suite, item.name), {})
        result = "passed" if item.success else ("error" if item.error else "failed")
        unexpected = (
            f"{item.unexpected_count} of {item.element_count}"
            if item.unexpected_count is not None
            else ""
        )
        observed = item.error or ("" if item.observed_value is None else item.observed_value)
        title = f' title="{escape(rule["notes"])}"' if rule.get("notes") else ""
        rows.append(
            f'<tr class="{"" if item.success else "bad"}"><td{title}>{escape(item.name)}</td>'
            f"<td><code>{escape(item.expectation_type)}</code>"
            + (f"<br>column <code>{escape(item.column)}</code>" if item.column else "")
            + f"<br>{escape(_kwargs(rule.get('kwargs')))}</td>"
            f'<td><span class="verdict {result}">{result}</span></td>'
            f'<td class="num">{escape(unexpected)}</td>'
            f"<td><code>{escape(_short(observed))}</code></td></tr>"
        )
    rows.append("</tbody></table>")
    return rows


def _examples(examples: list[dict[str, Any]]) -> str:
    """Failing rows as a table of their id columns and the bad value."""
    if not examples:
        return ""
    columns = list(dict.fromkeys(key for row in examples for key in row))
    head = "".join(f"<th>{escape(column)}</th>" for column in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td><code>{escape(_short(row.get(c, '')))}</code></td>" for c in columns)
        + "</tr>"  # fmt: skip
        for row in examples
    )
    return f"<p>First failing rows:</p><table><tr>{head}</tr>{body}</table>\n"


def _rules(results: dict[str, dict[str, Any]]) -> dict[tuple[str, str], dict]:
    """Each expectation's configuration (kwargs, notes) by (suite, meta.name)."""
    rules = {}
    for suite, result in results.items():
        for item in result.get("results", []):
            config = item.get("expectation_config") or {}
            name = (config.get("meta") or {}).get("name", config.get("type", ""))
            rules[(suite, name)] = config
    return rules


def _kwargs(kwargs: dict[str, Any] | None) -> str:
    """The rule's parameters, without the column (shown apart) and GX's bookkeeping."""
    shown = {
        key: value
        for key, value in (kwargs or {}).items()
        if key not in _HIDDEN_KWARGS and key != "column" and value is not None
    }
    return ", ".join(f"{key}={_short(value)}" for key, value in shown.items())


def _found(item: ExpectationOutcome) -> str:
    if item.error:
        return f"GX could not evaluate it: {item.error}"
    if item.unexpected_count is not None:
        return f"{item.unexpected_count} of {item.element_count} rows break it"
    return f"observed {_short(item.observed_value)}"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"
