"""Reading and writing crawl result files in Firecrawl's shape (`{"status", "data": [...]}`).

A crawl file is the hand-off between the crawl stage and the chunk stage, and what a
replay reads with no network. It is read one page at a time (`CrawlReader`): a crawl of
20,000 pages is 160 MB of JSON, and no step needs all of its markdown at once. Bytes that
are not UTF-8 do not abort the read: they are replaced (U+FFFD) and the chunker
quarantines the pages that contain them.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import json
import re
import textwrap
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, BinaryIO

import ijson
import orjson
from ijson.common import ObjectBuilder
from pydantic import TypeAdapter, ValidationError

from firechunk.atomic import atomic_write
from firechunk.layout import RawCrawl
from firechunk.schemas.page import CrawledPage, CrawlResult, CrawlText


class CrawlFileError(ValueError):
    """The file is not a crawl result firechunk can read."""


def read_crawl(path: Path, *, allow_partial: bool = True) -> CrawlResult:
    """The crawl at `path`, every page in memory (`CrawlReader` reads it a page at a time).
    With `allow_partial` False, a crawl whose status is not "completed" is refused."""
    reader = CrawlReader(path, allow_partial=allow_partial)
    pages = list(reader)
    assert reader.summary is not None, "set once the pages are read"
    return reader.summary.model_copy(update={"data": pages})


def check_crawl(path: Path, *, allow_partial: bool = True) -> int:
    """The number of pages of the crawl at `path`, once each is read and checked as
    `read_crawl` checks it, a page at a time: a command's check before a run starts."""
    return sum(1 for _ in CrawlReader(path, allow_partial=allow_partial))


class CrawlReader:
    """A crawl file's pages, one validated `CrawledPage` at a time in crawl order, holding
    neither the file nor the pages already read. Each iteration reads the file again.

    A crawl's top-level fields may come before or after its pages, so the checks of the
    whole crawl are made once its last page is read: it has a `data` list, most of its
    pages carry markdown, and (with `allow_partial` False) its status is "completed" (a
    crawl cut short, failed or cancelled would drop every page it is missing when
    published). A refused crawl raises then, after its pages: act on them only once the
    iteration has ended. `summary` is then the crawl's top-level fields, with no pages.
    """

    def __init__(self, path: Path, *, allow_partial: bool = True) -> None:
        self.path = Path(path)
        self.allow_partial = allow_partial
        self.summary: CrawlResult | None = None

    def __iter__(self) -> Iterator[CrawledPage]:
        _check_path(self.path)
        fields: dict[str, object] = {}
        count = missing = 0
        for item in _raw_pages(self.path, fields):
            page = _page(self.path, count, item)
            count += 1
            missing += page.markdown is None
            yield page
        self.summary = _summary(self.path, fields, count, missing, self.allow_partial)


# JSON nested deeper than this is refused, as orjson refuses it: no crawl is.
MAX_DEPTH = 1024

_DATA = "data"  # the key of a crawl's pages
_OPEN = ("start_map", "start_array")
_CLOSE = ("end_map", "end_array")


def _raw_pages(path: Path, fields: dict[str, object]) -> Iterator[object]:
    """The items of the file's page list as parsed, streamed unless the file needs reading
    whole (`_needs_whole_read`); its other top-level fields into `fields`."""
    if _needs_whole_read(path):
        return _whole_file_items(path, fields)
    return _streamed_items(path, fields)


def _streamed_items(path: Path, fields: dict[str, object]) -> Iterator[object]:
    """The items of the file's page list, each built from ijson's events as it is read;
    the crawl's other top-level fields go into `fields` (`_DATA` too, once the page list
    is found)."""
    with path.open("rb") as file:
        try:
            yield from _items(path, ijson.parse(_Utf8Repaired(file), use_float=True), fields)
        except ijson.JSONError as error:
            reason = str(error.args[0] if error.args else error).strip().splitlines()[0]
            raise CrawlFileError(f"{path}: not JSON ({reason})") from None


def _items(
    path: Path, events: Iterator[tuple[str, str, object]], fields: dict[str, object]
) -> Iterator[object]:
    """Split ijson's events into the page list's items and the other top-level fields.

    A page is an item of the top-level `data` list, or of the top-level list of a bare
    list of pages. Only the value being built (one page, one field) is held."""
    first = next(events, ("", "end", None))
    if first[1] == "start_array":  # a bare list of pages is accepted too
        fields[_DATA] = []
        page_prefix = "item"
    elif first[1] == "start_map":
        page_prefix = f"{_DATA}.item"
    else:
        raise _not_a_crawl(path)
    depth = 1
    key = ""  # the top-level key whose value is being read
    builder: ObjectBuilder | None = None
    built_at = 0  # the depth the value being built started at
    is_page = False  # whether that value is a page, or a top-level field
    for prefix, event, value in events:
        if event in _OPEN:
            depth += 1
            if depth > MAX_DEPTH:
                raise CrawlFileError(f"{path}: JSON nested too deeply to be a crawl")
        elif event in _CLOSE:
            depth -= 1
        if builder is None:
            if prefix == "":  # the document's own keys, and its end
                if event == "map_key":
                    key = str(value)
                continue
            if prefix == _DATA and key == _DATA:
                if event not in ("start_array", "end_array"):
                    raise _not_a_crawl(path)
                fields[_DATA] = []
                continue
            builder, built_at = ObjectBuilder(), depth - (event in _OPEN)
            is_page = prefix == page_prefix
        builder.event(event, value)
        if depth == built_at:
            if is_page:
                yield builder.value
            else:
                fields[key] = builder.value
            builder = None


def _not_a_crawl(path: Path) -> CrawlFileError:
    return CrawlFileError(f"{path}: expected Firecrawl's crawl shape with a 'data' list")


def _whole_file_items(path: Path, fields: dict[str, object]) -> Iterator[object]:
    """The items of the file's page list, the file parsed whole (`_parse`); the other
    top-level fields into `fields`, as `_streamed_items` gives them."""
    document = _parse(path.read_bytes(), path)
    if isinstance(document, list):  # a bare list of pages is accepted too
        document = {_DATA: document}
    if not isinstance(document, dict) or not isinstance(document.get(_DATA), list):
        raise _not_a_crawl(path)
    pages = document.pop(_DATA)
    fields.update(document)
    fields[_DATA] = []
    yield from pages


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_BLOCK = 1 << 20


def _needs_whole_read(path: Path) -> bool:
    """Whether the file escapes half a surrogate pair, which the streaming parser reads as
    "?" where the page model makes it U+FFFD. Such a file is rare, and read whole
    (`_whole_file_items`). A pair cut by the end of a block reads as half a pair: the file
    is then read whole too."""
    tail = b""  # the end of the block before: an escape cut in two is whole here
    with path.open("rb") as file:
        while block := file.read(_BLOCK):
            if _half_a_pair(tail + block):
                return True
            tail = block[-5:]
    return False


def _half_a_pair(text: bytes) -> bool:
    """Whether `text` escapes a high surrogate not followed at once by a low one, or a low
    one not preceded by a high one."""
    high_ends = -1  # where the high surrogate before ends, awaiting its low one
    for escape in _SURROGATE_ESCAPE.finditer(text):
        if escape.group()[3:4] in b"89abAB":
            if high_ends >= 0:
                return True
            high_ends = escape.end()
        elif escape.start() != high_ends:
            return True
        else:
            high_ends = -1
    return high_ends >= 0


class _Utf8Repaired:
    """A binary file whose bytes that are not UTF-8 read as U+FFFD: ijson stops at them."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read(self, size: int = -1) -> bytes:
        while True:
            block = self._file.read(size)
            text = self._decoder.decode(block, final=not block)
            if text or not block:
                return text.encode("utf-8")


def source_urls(path: Path) -> Iterator[str]:
    """The `sourceURL` of each page that has one as a string, read a page at a time and
    without validating the pages: all that naming a crawl's collection needs
    (`firechunk.run.collection`). A file that is not a crawl stops the URLs there: reading
    it as a crawl says what is wrong with it."""
    with contextlib.suppress(CrawlFileError):
        for item in _raw_pages(Path(path), {}):
            metadata = item.get("metadata") if isinstance(item, dict) else None
            url = metadata.get("sourceURL") if isinstance(metadata, dict) else None
            if isinstance(url, str):
                yield _TEXT.validate_python(url)


_TEXT: TypeAdapter[str] = TypeAdapter(CrawlText)


def _page(path: Path, index: int, item: object) -> CrawledPage:
    """The crawl's `index`-th page, validated."""
    try:
        return CrawledPage.model_validate(item)
    except RecursionError:
        raise CrawlFileError(f"{path}: nested too deeply to be a crawl") from None
    except ValidationError as error:
        problem = _first_problem(error, (_DATA, index))
        raise CrawlFileError(f"{path}: not Firecrawl's crawl shape: {problem}") from None


def _summary(
    path: Path, fields: dict[str, object], pages: int, missing: int, allow_partial: bool
) -> CrawlResult:
    """The crawl's top-level fields, once its `pages` are read (`missing` of them without
    markdown), checked as a whole."""
    if _DATA not in fields:
        raise _not_a_crawl(path)
    try:
        summary = CrawlResult.model_validate(fields)
    except ValidationError as error:
        raise CrawlFileError(
            f"{path}: not Firecrawl's crawl shape: {_first_problem(error, ())}"
        ) from None
    _check_markdown(path, pages, missing)
    if not allow_partial and summary.status != "completed":
        raise CrawlFileError(
            f"{path}: the crawl's status is {summary.status!r}, not 'completed' "
            f"({pages} pages); publishing it would drop the pages it lacks. "
            "Use --allow-partial (flow parameter run.allow_partial) to chunk it anyway."
        )
    return summary


def _first_problem(error: ValidationError, at: tuple[str | int, ...]) -> str:
    """pydantic's report in one line: where the first problem is (in a value found `at`
    that place of the document), what it is, how many more."""
    problems = error.errors(include_url=False)
    first = problems[0]
    loc = (*at, *first["loc"])
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
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


def _check_markdown(path: Path, pages: int, missing: int) -> None:
    """Refuse a crawl most of whose `pages` carry no `markdown` (`missing` of them): it was
    run without the markdown format, and chunking it would quarantine every page and fail
    validation. A few pages without it in a crawl that has it are the chunker's to
    quarantine one by one."""
    if pages and missing * 2 > pages:
        raise CrawlFileError(
            f"{path}: {missing} of its {pages} pages carry no 'markdown': the crawl "
            "was run without the markdown format; crawl again with Firecrawl's "
            '`formats: ["markdown"]` (its default, which `firechunk crawl` uses)'
        )


def _parse(raw: bytes, path: Path) -> object:
    """The file's JSON, read whole. orjson reads the bytes as they are; a file it refuses
    (for a lone surrogate escape) is decoded leniently and read again."""
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


def write_crawl(path: Path, crawl: CrawlResult, pages: Iterable[CrawledPage] = ()) -> Path:
    """crawl.json: `crawl` with `pages` after its own, in Firecrawl's crawl response shape
    and as `json.dumps(..., indent=2)` writes it, but a page at a time: a finished job's
    pages come from its page log and are never held together."""
    head = crawl.model_copy(update={"data": []}).to_firecrawl_json()
    del head["data"]
    opening = json.dumps(head, ensure_ascii=False, indent=2).removesuffix("\n}")

    def write(handle: IO[bytes]) -> None:
        handle.write(f'{opening},\n  "data": ['.encode())
        separator = "\n"
        for page in itertools.chain(crawl.data, pages):
            text = json.dumps(page.to_firecrawl_json(), ensure_ascii=False, indent=2)
            handle.write((separator + textwrap.indent(text, "    ")).encode())
            separator = ",\n"
        handle.write(b"]\n}\n" if separator == "\n" else b"\n  ]\n}\n")

    return atomic_write(path, write)
