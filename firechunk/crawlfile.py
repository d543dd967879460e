"""Reading and writing crawl result files in Firecrawl's shape (`{"status", "data": [...]}`).

A crawl file is the hand-off between the crawl stage and the chunk stage, and what a
replay reads with no network. Bytes that are not UTF-8 do not abort the read: they are
replaced (U+FFFD) and the chunker quarantines the pages that contain them.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from pydantic import ValidationError

from firechunk.atomic import write_json
from firechunk.layout import RawCrawl
from firechunk.schemas.page import CrawlResult


class CrawlFileError(ValueError):
    """The file is not a crawl result firechunk can read."""


def read_crawl(path: Path, *, allow_partial: bool = True) -> CrawlResult:
    """The crawl at `path`. With `allow_partial` False, a crawl whose status is not
    "completed" (cut short, failed, cancelled) is refused: publishing it would drop every
    page it is missing."""
    path = Path(path)
    _check_path(path)
    document = _parse(path.read_bytes(), path)
    if isinstance(document, list):  # a bare list of pages is accepted too
        document = {"data": document}
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise CrawlFileError(f"{path}: expected Firecrawl's crawl shape with a 'data' list")
    try:
        crawl = CrawlResult.model_validate(document)
    except RecursionError:
        raise CrawlFileError(f"{path}: nested too deeply to be a crawl") from None
    except ValidationError as error:
        raise CrawlFileError(
            f"{path}: not Firecrawl's crawl shape: {_first_problem(error)}"
        ) from None
    _check_markdown(path, crawl)
    if not allow_partial and crawl.status != "completed":
        raise CrawlFileError(
            f"{path}: the crawl's status is {crawl.status!r}, not 'completed' "
            f"({len(crawl.data)} pages); publishing it would drop the pages it lacks. "
            "Use --allow-partial (flow parameter run.allow_partial) to chunk it anyway."
        )
    return crawl


def _first_problem(error: ValidationError) -> str:
    """pydantic's report in one line: where the first problem is, what it is, how many more."""
    problems = error.errors(include_url=False)
    first = problems[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where or 'the document'}: {first['msg']}{more}"


def _check_path(path: Path) -> None:
    """Refuse what is not a crawl file before reading it, naming the file that is meant:
    the raw download beside a crawl.json, or the folder that holds one."""
    if path.is_dir():
        inside = RawCrawl(path).crawl_json
        there = f" ({inside})" if inside.is_file() else ", e.g. data/raw/<crawl-id>/crawl.json"
        raise CrawlFileError(f"{path} is a directory, not a crawl file: give its crawl.json{there}")
    if path.suffix == ".jsonl":
        beside = RawCrawl(path.parent).crawl_json
        state = (
            "it is there"
            if beside.is_file()
            else "written once the download completes: rerun `firechunk crawl` to finish it"
        )
        raise CrawlFileError(
            f"{path} is the raw download (one page a line), not a crawl file: "
            f"use crawl.json beside it ({beside}, {state})"
        )
    if not path.is_file():
        raise CrawlFileError(f"{path}: no such crawl file")


def _check_markdown(path: Path, crawl: CrawlResult) -> None:
    """Refuse a crawl most of whose pages carry no `markdown`: it was run without the
    markdown format, and chunking it would quarantine every page and fail validation. A
    few pages without it in a crawl that has it are the chunker's to quarantine one by one."""
    missing = sum(page.markdown is None for page in crawl.data)
    if crawl.data and missing * 2 > len(crawl.data):
        raise CrawlFileError(
            f"{path}: {missing} of its {len(crawl.data)} pages carry no 'markdown': the crawl "
            "was run without the markdown format; crawl again with Firecrawl's "
            '`formats: ["markdown"]` (its default, which `firechunk crawl` uses)'
        )


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
    except RecursionError:
        raise CrawlFileError(f"{path}: JSON nested too deeply to be a crawl") from None


def write_crawl(path: Path, crawl: CrawlResult) -> Path:
    return write_json(path, crawl.to_firecrawl_json())
