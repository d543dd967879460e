"""Reading and writing crawl result files in Firecrawl's shape (`{"status", "data": [...]}`).

A crawl file is the hand-off between the crawl stage and the chunk stage, and what a
replay reads with no network. Bytes that are not UTF-8 do not abort the read: they are
replaced (U+FFFD) and the chunker quarantines the pages that contain them.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from firechunk.atomic import write_json
from schemas.page import CrawlResult


class CrawlFileError(ValueError):
    """The file is not a crawl result firechunk can read."""


def read_crawl(path: Path) -> CrawlResult:
    path = Path(path)
    if not path.is_file():
        raise CrawlFileError(f"{path}: no such crawl file")
    document = _parse(path.read_bytes(), path)
    if isinstance(document, list):  # a bare list of pages is accepted too
        document = {"data": document}
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise CrawlFileError(f"{path}: expected Firecrawl's crawl shape with a 'data' list")
    try:
        return CrawlResult.model_validate(document)
    except ValueError as error:
        raise CrawlFileError(f"{path}: {error}") from error


def _parse(raw: bytes, path: Path) -> object:
    """The file's JSON. orjson reads the bytes as they are (no decoded copy of a file of
    tens of MB: 50 MB less peak memory for 5,000 pages); a file it refuses, for bytes
    that are not UTF-8 or a lone surrogate escape, is decoded leniently and read again."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as error:
        raise CrawlFileError(f"{path}: not JSON ({error})") from error


def write_crawl(path: Path, crawl: CrawlResult) -> Path:
    return write_json(path, crawl.to_firecrawl_json())
