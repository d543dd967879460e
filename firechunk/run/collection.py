"""The collection a run belongs to: its doc set, declared once and recorded in its run.json.

A data directory and a database hold several doc sets (a site's guides, each client
reference, another product's docs). A run's collection is declared by the `collection`
setting (`firechunk.settings.RunSettings`); left empty, it is derived from what is crawled,
never from another run:

- for a crawl, the target: the site's host and path, narrowed to the path every include
  pattern starts with (`supabase.com/docs` with `docs/guides/auth/.*` is
  `supabase.com/docs/guides/auth`);
- for a replayed crawl (a crawl file), its pages: the host most of them are on and the
  path all of that host's pages share.

The run's start records the name in its run.json; everything that compares runs (the
baseline, the page cache, the shrink guard, supersession, changes.json, the load, `firechunk
runs`) takes it from there. A collection is renamed only by `firechunk rename-collection`.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from firechunk.crawlfile import source_urls
from firechunk.layout import RunDir
from firechunk.schemas.job import CrawlTarget
from firechunk.settings import RunSettings

# A pattern's literal start: path segments up to the first one holding a regex character.
_REGEX = re.compile(r"[.*+?()\[\]{}|\\^$]")


def collection_of_target(target: CrawlTarget) -> str:
    """The host and path of the site, then the path every include pattern starts with,
    where all of them start under the site's path."""
    site = urlsplit(target.url if "://" in target.url else f"https://{target.url}")
    path = _segments(site.path)
    literal = [_literal(pattern) for pattern in target.include_paths]
    if literal and all(prefix[: len(path)] == path for prefix in literal):
        path = functools.reduce(_common_prefix, literal)
    return "/".join([site.netloc.lower(), *path])


def collection_of_crawl(crawl_file: Path) -> str:
    """The collection a crawl file's pages name (`collection_of_urls`), read from the page
    URLs alone (`firechunk.crawlfile.source_urls`): no need to read the pages to name it."""
    return collection_of_urls(source_urls(crawl_file))


def collection_of_urls(urls: Iterable[str]) -> str:
    """The host most URLs are on, plus the path all of its URLs share.

    A crawl of a section names the section, its landing page included
    (`/docs/guides/auth` and `/docs/guides/auth/sessions` share `docs/guides/auth`); a
    crawl of one page names the folder that holds it.
    """
    parts = [urlsplit(url) for url in urls]
    hosts = Counter(part.netloc.lower() for part in parts if part.netloc)
    if not hosts:
        return "unknown"
    host = hosts.most_common(1)[0][0]
    paths = {_segments(part.path) for part in parts if part.netloc.lower() == host}
    shared = functools.reduce(_common_prefix, paths)
    if len(paths) == 1:
        shared = shared[:-1]
    return "/".join([host, *shared])


def legacy_site(urls: Iterable[str]) -> str:
    """The name version 1 of the database schema gave a run: the scheme and host most of
    its URLs are on."""
    hosts = Counter(f"{part.scheme}://{part.netloc}" for part in map(urlsplit, urls))
    return hosts.most_common(1)[0][0] if hosts else "unknown"


def run_collection(run_dir: Path) -> str | None:
    """The collection a run was started as (its run.json); for a run started before runs
    recorded one, the one its report.json named; None when neither says."""
    run = RunDir(run_dir)
    recorded = _json(run.run_json).get("settings")
    named = recorded.get("collection") if isinstance(recorded, dict) else None
    if not named:
        named = _json(run.report_json).get("collection")
    return named if isinstance(named, str) and named else None


def _json(path: Path) -> dict:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _literal(pattern: str) -> tuple[str, ...]:
    """`docs/guides/.*` -> (docs, guides): the segments before the first regex character."""
    segments = _segments(pattern.lstrip("^"))
    plain = [index for index, segment in enumerate(segments) if _REGEX.search(segment)]
    return segments[: plain[0]] if plain else segments


def _segments(path: str) -> tuple[str, ...]:
    return tuple(segment for segment in path.split("/") if segment)


def _common_prefix(left: tuple[str, ...], right: tuple[str, ...]) -> tuple[str, ...]:
    shared = 0
    while shared < min(len(left), len(right)) and left[shared] == right[shared]:
        shared += 1
    return left[:shared]


def declared(settings: RunSettings, source: Path | CrawlTarget | None) -> RunSettings:
    """`settings` with their collection: the one declared, else the one `source` (a crawl
    file, or the target of a crawl) names. A ValueError when neither says."""
    if settings.collection:
        return settings
    if source is None:
        raise ValueError("a run needs its collection: declare it, or give the crawl it chunks")
    if isinstance(source, CrawlTarget):
        named = collection_of_target(source)
    else:
        named = collection_of_crawl(source)
    return RunSettings.model_validate({**settings.model_dump(), "collection": named})
