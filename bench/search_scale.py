"""Search time as the collection grows: synthetic collections of 13,500 to 270,000 chunks.

    python bench/search_scale.py [--sizes 13500,50000,135000,270000] [--work /tmp/search-scale]
                                 [--windows-up-to 135000] [--questions 60]

Each size is a collection in an embedded Postgres of its own under `--work` (kept: a second
invocation only measures, after bringing the schema up to date as a load would). Its chunks
are made from the real pages of the corpus (`firechunk.crawlfile.read_crawl`): a span of a
page's words with one word in ten replaced by a word of another page and one in twenty by a
made-up one, so the vocabulary grows with the collection as a real one does. Each chunk has
1 + Poisson(2.7) windows (3.7 on average) of random unit vectors; sizes above
`--windows-up-to` chunks get none (building HNSW over a million windows takes this 2-core
machine too long), so there the vector side is not measured. Rows go in by COPY, the
indexes are built after.

The questions of bench/questions.jsonl are asked with one fixed random unit vector, not
embedded: what is timed is the server. Each is timed as `EXPLAIN ANALYZE` reports it
(Postgres's "Execution Time" plus "Planning Time", no network or client), for the whole
search query (`firechunk.db.search.QUERY`) and for each side on its own (`TEXT_SIDE`,
`VECTOR_SIDE`); p50 and p95 per size are printed.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated

import numpy as np
import psycopg
import typer

from firechunk.crawlfile import read_crawl
from firechunk.db.connect import connect
from firechunk.db.schema import CHUNKS, VECTORS, migrate
from firechunk.db.search import QUERY, TEXT_SIDE, VECTOR_SIDE, query_params, set_vector_options

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path("/work/shared/corpus")
DIMENSIONS = 384  # all-MiniLM-L6-v2's, the local embedder's
COLLECTION = "scale"
SEED = 35
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]{1,30}")
_CHUNK_COLUMNS = (
    "collection, chunk_id, url, title, breadcrumb, heading, text, overlap_text, token_count, "
    "chunk_index, metadata, row_sha256, embedded_sha256"
)


def page_words(corpus: Path) -> list[tuple[str, list[str]]]:
    """(title, words) of every page of every crawl in `corpus`."""
    pages = []
    for path in sorted(corpus.glob("*.json")):
        for page in read_crawl(path).data:
            words = _WORD.findall(str(page.markdown or ""))
            if len(words) >= 40:
                title = str(getattr(page.metadata, "title", None) or path.stem)
                pages.append((title, words))
    return pages


def synthetic_text(rng: random.Random, words: list[str], pool: list[str]) -> str:
    """A span of a page's words, varied: some replaced by another page's, some made up."""
    length = rng.randint(60, 260)
    start = rng.randrange(max(1, len(words) - length))
    out = []
    for word in words[start : start + length]:
        roll = rng.random()
        if roll < 0.10:
            word = rng.choice(pool)
        elif roll < 0.15:
            word = f"{rng.choice(pool)}{rng.randrange(10_000)}"
        out.append(word)
    return " ".join(out)


def fill(conn: psycopg.Connection, chunks: int, with_windows: bool) -> None:
    """COPY `chunks` synthetic chunks (and their windows) into an empty database, then
    build the indexes, as a first load leaves them."""
    rng = random.Random(SEED)
    vectors = np.random.default_rng(SEED)
    pages = page_words(CORPUS)
    pool = [word for _, words in pages for word in words[::7]]
    conn.execute(f"drop index if exists {CHUNKS}_fts")
    conn.execute(f"drop index if exists {VECTORS}_embedding")
    ids = []
    with conn.cursor().copy(f"copy {CHUNKS} ({_CHUNK_COLUMNS}) from stdin") as copy:
        for n in range(chunks):
            title, words = rng.choice(pages)
            text = synthetic_text(rng, words, pool)
            chunk_id = uuid.UUID(int=rng.getrandbits(128))
            ids.append(chunk_id)
            url = f"https://example.com/{n // 3}"
            copy.write_row(
                (COLLECTION, chunk_id, url, title, [title], title, text, "",
                 len(text.split()), n % 3, "{}", "", "")
            )  # fmt: skip
    if with_windows:
        with conn.cursor().copy(f"copy {VECTORS} from stdin (format binary)") as copy:
            copy.set_types(["text", "uuid", "int2", "vector"])
            for chunk_id in ids:
                for window in range(1 + vectors.poisson(2.7)):
                    vector = vectors.standard_normal(DIMENSIONS).astype(np.float32)
                    copy.write_row((COLLECTION, chunk_id, window, vector / np.linalg.norm(vector)))
    conn.execute(f"create index {CHUNKS}_fts on {CHUNKS} using gin (fts)")
    conn.execute("set maintenance_work_mem = '2GB'")
    conn.execute(
        f"create index {VECTORS}_embedding on {VECTORS} using hnsw (embedding vector_cosine_ops)"
    )
    conn.execute(f"analyze {CHUNKS}")
    conn.execute(f"analyze {VECTORS}")


def server_ms(conn: psycopg.Connection, query: str, params: dict[str, object]) -> float:
    """Planning plus execution time of `query`, as EXPLAIN ANALYZE reports them."""
    row = conn.execute(f"explain (analyze, format json) {query}", params).fetchone()
    assert row is not None
    plan = row[0][0]
    return float(plan["Planning Time"] + plan["Execution Time"])


def percentiles(times: list[float]) -> str:
    cuts = statistics.quantiles(times, n=20)
    return f"p50 {statistics.median(times):7.1f} ms  p95 {cuts[18]:7.1f} ms"


def measure(conn: psycopg.Connection, questions: list[str], with_windows: bool) -> None:
    """Each question through the whole query and each side alone; p50/p95 printed."""
    rng = np.random.default_rng(SEED)
    vector = rng.standard_normal(DIMENSIONS).astype(np.float32)
    vector /= np.linalg.norm(vector)
    set_vector_options(conn)
    queries = {"text side (BM25)": f"with {TEXT_SIDE} select * from lexical"}
    if with_windows:
        queries["vector side"] = f"with {VECTOR_SIDE} select * from semantic"
        queries["search (hybrid)"] = QUERY
    for question in questions[:3]:  # warm the caches
        server_ms(conn, QUERY, query_params(COLLECTION, question, vector, 10))
    for name, query in queries.items():
        times = [
            server_ms(conn, query, query_params(COLLECTION, question, vector, 10))
            for question in questions
        ]
        print(f"  {name:<18} {percentiles(times)}", flush=True)


def main(
    sizes: Annotated[str, typer.Option(help="Collection sizes in chunks, comma-separated.")] = (
        "13500,50000,135000,270000"
    ),
    work: Annotated[Path, typer.Option(help="One database per size, kept.")] = Path(
        "/tmp/search-scale"
    ),
    windows_up_to: Annotated[int, typer.Option(help="Largest size given windows.")] = 135_000,
    questions: Annotated[int, typer.Option(help="Questions asked per size.")] = 60,
) -> None:
    lines = (ROOT / "bench" / "questions.jsonl").read_text().splitlines()
    asked = [json.loads(line)["question"] for line in lines][:questions]
    for size in (int(each) for each in sizes.split(",")):
        with_windows = size <= windows_up_to
        with connect(None, work / str(size)) as conn:
            conn.autocommit = True
            with conn.transaction():
                fresh = conn.execute(f"select to_regclass('{CHUNKS}')").fetchone() == (None,)
                migrate(conn, DIMENSIONS)
            if fresh:
                started = time.perf_counter()
                fill(conn, size, with_windows)
                print(f"{size}: built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            count = conn.execute(f"select count(*) from {VECTORS}").fetchone()
            print(f"{size} chunks, {count[0] if count else 0} windows:", flush=True)
            measure(conn, asked, with_windows)


if __name__ == "__main__":
    typer.run(main)
