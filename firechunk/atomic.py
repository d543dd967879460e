"""Atomic file output: a reader never sees a half-written file.

Every output of the pipeline goes through these helpers: the bytes are written to a
temporary file in the same directory, flushed to disk, then renamed over the target.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> Path:
    """Call `write` with a temporary binary file (what it returns is ignored), then
    rename it to `path`."""
    with atomic_open(path) as handle:
        write(handle)
    return Path(path)


@contextmanager
def atomic_open(path: Path) -> Iterator[IO[bytes]]:
    """A temporary binary file that becomes `path` when the `with` block ends without error.

    For outputs written piece by piece (a Parquet file row group by row group, a JSON array
    chunk by chunk): the whole file never has to be in memory, and a reader still sees the
    old file or the complete new one. On an error the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp_name, 0o644)  # mkstemp makes it private; outputs are for readers
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes) -> Path:
    return atomic_write(path, lambda handle: handle.write(data))


def write_text(path: Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, value: Any, *, indent: int | None = 2) -> Path:
    """`value` as JSON, written as it is encoded: a first run's change set names every
    chunk, and its text made whole first took 16 MiB at 20,000 pages."""

    def write(handle: IO[bytes]) -> None:
        text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
        try:
            json.dump(value, text, ensure_ascii=False, indent=indent)
            text.write("\n")
        finally:
            text.detach()  # flushes; the handle stays open for atomic_write to finish

    return atomic_write(path, write)


def write_jsonl(path: Path, rows: Iterable[Any]) -> Path:
    def write(handle: IO[bytes]) -> None:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")

    return atomic_write(path, write)
