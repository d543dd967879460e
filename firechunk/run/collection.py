"""The collection a run's chunks go into in the vector database, named in its report.json.

A database holds several doc sets (a site's guides, its reference, another product's
docs), one per data directory; each is a collection that owns its rows. A run names its
collection so that every night of a data directory loads into the same one:

- the baseline's collection, when most of the run's pages are inside it (the name never
  drifts because one night's crawl reached a page outside the usual path); a crawl of
  another site, or of another section of the same site, put in the same data directory
  names its own;
- otherwise one derived from the run's pages: the host most of them are on, and the
  longest path prefix all of that host's pages share (`supabase.com/docs/guides/auth`).

`firechunk load --collection` (flow parameter `database.collection`) names another.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from firechunk.layout import RunDir


def default_collection(urls: Iterable[str]) -> str:
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


def run_collection(run_dir: Path, urls: Iterable[str]) -> str:
    """The collection a run's report names; derived from `urls` for a run written before
    reports named one."""
    try:
        named = orjson.loads(RunDir(run_dir).report_json.read_bytes()).get("collection")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        named = None
    return named if isinstance(named, str) and named else default_collection(urls)


def collection_for_run(baseline_dir: Path | None, urls: Iterable[str]) -> str:
    """The collection a new run names: its baseline's when most of its pages are inside
    it, else one derived from its pages."""
    urls = list(urls)
    if baseline_dir is not None:
        named = run_collection(baseline_dir, urls)
        if 2 * sum(_inside(url, named) for url in urls) > len(urls):
            return named
    return default_collection(urls)


def same_collection(run_dir: Path, other_dir: Path) -> bool:
    """Whether two runs' reports name one collection: the same doc set."""
    return run_collection(run_dir, ()) == run_collection(other_dir, ())


def _inside(url: str, collection: str) -> bool:
    """Whether `url` is on the collection's host, under its path."""
    host, *path = collection.split("/")
    part = urlsplit(url)
    return part.netloc.lower() == host and _segments(part.path)[: len(path)] == tuple(path)


def _segments(path: str) -> tuple[str, ...]:
    return tuple(segment for segment in path.split("/") if segment)


def _common_prefix(left: tuple[str, ...], right: tuple[str, ...]) -> tuple[str, ...]:
    shared = 0
    while shared < min(len(left), len(right)) and left[shared] == right[shared]:
        shared += 1
    return left[:shared]
