"""Flow-run names that say which deployment built what, and when:
`supabase-nightly: supabase.com/docs (guides, reference/cli) 2026-11-22 03:00 UTC`, or for
a replayed crawl `manual-rebuild: docs.example.com/docs replay of crawl.json 2026-11-22
03:00 UTC` (no deployment: the flow called directly, `firechunk rebuild --prefect`).

A name stays the same from night to night of one deployment and collection: a crawl is
named by its settings, a replay by the collection its run declares (`run.collection`), and
only without one by the site its pages share (which a night that lost pages would change).
The date is the run's scheduled start, so a nightly run is named for the night it belongs
to even if a worker picked it up late.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prefect.runtime import deployment, flow_run

from firechunk.run.collection import collection_of_crawl
from firechunk.settings import CrawlSettings, RunSettings

MAX_SECTIONS = 4  # include patterns named; the rest are counted
_REGEX_TAIL = re.compile(r"(/\?|/?\.\*|/?\*|\$|/)+$")


def site_and_date() -> str:
    """The flow-run name: what the run builds (see `what_is_built`) and the UTC date."""
    when = flow_run.scheduled_start_time or datetime.now(UTC)
    built = what_is_built(flow_run.parameters or {})
    by = f"{deployment.name}: " if deployment.name else ""
    return f"{by}{built} {when.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def what_is_built(parameters: dict[str, Any]) -> str:
    """The site a run's pages come from: for a crawl, the `crawl` settings' site and include
    patterns (`supabase.com/docs (guides, reference/cli)`); for a replayed crawl, the site
    its own pages are on (the site's default is not what a replay holds), then the file."""
    if not parameters.get("replay"):
        crawl = _crawl_settings(parameters.get("crawl"))
        return _crawled(crawl.site_url, crawl.include_paths) if crawl else "run"
    source = Path(str(parameters["replay"]))
    site = _declared_collection(parameters.get("run")) or _crawl_site(source)
    return f"{site} replay of {source.name}" if site else source.name


def _crawl_settings(value: object) -> CrawlSettings | None:
    """The flow run's `crawl` parameter (the settings, or their JSON as the API keeps
    them; absent: the defaults), or None when it is not one."""
    if isinstance(value, CrawlSettings):
        return value
    try:
        return CrawlSettings.model_validate(value or {})
    except ValueError:
        return None


def _declared_collection(value: object) -> str:
    """The collection the flow run's `run` parameter declares (the settings, or their JSON
    as the API keeps them); empty when it names none."""
    if isinstance(value, RunSettings):
        return value.collection or ""
    if isinstance(value, dict):
        return str(value.get("collection") or "")
    return ""


def _crawled(url: object, include_paths: object) -> str:
    """`host/path (pattern, pattern)`: each include pattern without the site's path and
    the regex tail, so the name says which sections were crawled."""
    site = _site(url)
    if not site or not isinstance(include_paths, list) or not include_paths:
        return site
    prefix = site.partition("/")[2]
    sections = [_section(str(pattern), prefix) for pattern in include_paths]
    shown = sections[:MAX_SECTIONS]
    more = len(sections) - len(shown)
    return f"{site} ({', '.join(shown)}{f', +{more} more' if more else ''})"


def _section(pattern: str, prefix: str) -> str:
    """`docs/guides/.*` under `supabase.com/docs` is `guides`."""
    bare = pattern.lstrip("^").strip("/")
    if prefix and bare.startswith(f"{prefix}/"):
        bare = bare[len(prefix) + 1 :]
    bare = _REGEX_TAIL.sub("", bare)
    return bare or pattern


def _crawl_site(crawl_file: Path) -> str:
    """The host and shared path of the crawl's pages (`firechunk.run.collection`), read from
    the page URLs alone: a name must not wait for a whole crawl to be parsed. Empty when the
    file cannot be read or names no page."""
    try:
        named = collection_of_crawl(crawl_file)
    except OSError:
        return ""
    return "" if named == "unknown" else named


def _site(url: object) -> str:
    if not isinstance(url, str) or not url:
        return ""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    return f"{parts.netloc}{parts.path.rstrip('/')}"
