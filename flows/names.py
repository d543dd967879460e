"""Flow-run names that say what was built and when: `supabase.com/docs 2026-11-22 03:00 UTC`.

The date is the run's scheduled start, so a nightly run is named for the night it belongs
to even if a worker picked it up late.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import PurePath
from urllib.parse import urlsplit

from prefect.runtime import flow_run

SUPABASE_DOCS = "https://supabase.com/docs"


def site_and_date() -> str:
    """The flow-run name: the site (or the crawl file a run replays) and the UTC date."""
    parameters = flow_run.parameters or {}
    what = _site(parameters.get("site_url"))
    source = next(
        (parameters[key] for key in ("replay", "crawl_file", "run_dir") if parameters.get(key)),
        None,
    )
    if source:
        name = PurePath(str(source)).name
        what = f"{what} replay of {name}" if what else name
    when = flow_run.scheduled_start_time or datetime.now(UTC)
    return f"{what or 'run'} {when.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def _site(url: object) -> str:
    if not isinstance(url, str) or not url:
        return ""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    return f"{parts.netloc}{parts.path.rstrip('/')}"
