"""`firechunk load` and `firechunk search` against a real Postgres with pgvector: the
embedded one, one server for the session, a new database per test (tests/conftest.py).

Runs are real published runs of the bundled sample crawl and variants of it (a page
changed, a page removed); the embedder is the real local model, wrapped to count what it
embeds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.db.connect import connect
from firechunk.db.load import LoadGuards, LoadRefused, load_run
from firechunk.db.runs import RunNotLoadable, published_run
from firechunk.db.schema import CHUNKS_COLUMNS, has_tables, migrate
from firechunk.db.search import search
from firechunk.pipeline import Request, run_pipeline
from firechunk.schemas.publish import RunStatus
from firechunk.settings import DatabaseSettings, RunSettings

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "crawl.json"
REMOVED = "https://docs.example.com/docs/guides/webhooks"
CHANGED = "https://docs.example.com/docs/guides/queues/retries"


class Counting:
    """The real embedder, counting the chunks it embeds; `model` and `dimensions` may be
    changed (the vector cut to its first `dimensions` values, normalised again) to stand
    for another model."""

    def __init__(self, inner, model: str | None = None, dimensions: int | None = None):
        self.inner = inner
        self.model = model or inner.model
        self.dimensions = dimensions or inner.dimensions
        self.embedded = 0

    def windows(self, heading, text):
        self.embedded += 1  # a chunk is embedded: its windows are asked for
        return self.inner.windows(heading, text)

    def embed(self, texts, progress=None):
        vectors = self.inner.embed(texts, progress)[:, : self.dimensions]
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def crawl_variant(tmp: Path, name: str, edit=None) -> Path:
    crawl = json.loads(SAMPLE.read_text())
    if edit:
        edit(crawl["data"])
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(crawl))
    return path


def change_page(pages):
    page = next(p for p in pages if p["metadata"]["sourceURL"] == CHANGED)
    page["markdown"] += "\n\nA retried message keeps its original id and its delivery count.\n"


def remove_page(pages):
    pages[:] = [p for p in pages if p["metadata"]["sourceURL"] != REMOVED]


def change_and_remove(pages):
    change_page(pages)
    remove_page(pages)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One data directory, three published runs in order: the sample (a), a page changed
    (b), then a page removed too (c)."""
    tmp = tmp_path_factory.mktemp("runs")
    data_dir = tmp / "data"
    for run_id, edit in [("a", None), ("b", change_page), ("c", change_and_remove)]:
        crawl = crawl_variant(tmp, run_id, edit)
        night = run_pipeline(Request(replay=crawl, data_dir=data_dir, run_id=run_id))
        outcome, published = night.outcome, night.result
        assert outcome and outcome.success and published and published.published, run_id
    return data_dir


def held(url: str, data_dir: Path) -> dict[str, str]:
    """Chunk id -> text of every row the database holds."""
    with connect(url, data_dir) as conn:
        return dict(conn.execute("select chunk_id::text, text from firechunk_chunks").fetchall())


def run_texts(data_dir: Path, run_id: str) -> dict[str, str]:
    return {c.chunk_id: c.text for c in published_run(data_dir, run_id).chunks}


def load(url, data_dir, run_id, embedder, collection=None, **allowed):
    """`allowed`: the `LoadGuards` fields (allow_shrink, max_shrink, force_older)."""
    with connect(url, data_dir) as conn:
        conn.autocommit = True
        run = published_run(data_dir, run_id, collection)
        return load_run(conn, run, embedder, guards=LoadGuards(**allowed), say=lambda _: None)


def test_first_load_then_the_same_run_again_changes_and_embeds_nothing(db, runs, model):
    embedder = Counting(model)
    first = load(db, runs, "a", embedder)
    expected = run_texts(runs, "a")
    assert (first.inserted, first.deleted, first.embedded) == (len(expected), 0, len(expected))
    assert held(db, runs) == expected
    again = load(db, runs, "a", embedder)
    assert (again.inserted, again.updated, again.deleted, again.embedded) == (0, 0, 0, 0)
    assert embedder.embedded == len(expected)
    with connect(db, runs) as conn:
        row = conn.execute(
            "select run_id, model, dimensions, chunks from firechunk_sync"
        ).fetchone()
        assert row == ("a", model.model, 384, len(expected))
        norms = conn.execute("select vector_norm(embedding) from firechunk_vectors").fetchall()
        assert all(abs(norm - 1) < 1e-3 for (norm,) in norms)


def chunks_table_columns(conn) -> dict[str, str]:
    """The columns of firechunk_chunks a load writes (all but the generated `fts`), with
    their types as the loader declares them (`text[]`, not Postgres's `_text`)."""
    rows = conn.execute(
        "select column_name, udt_name from information_schema.columns "
        "where table_name = 'firechunk_chunks' and column_name != 'fts'"
    ).fetchall()
    return {name: "text[]" if udt == "_text" else udt for name, udt in rows}


def declared_columns() -> dict[str, str]:
    return {column.name: column.sql for column in CHUNKS_COLUMNS}


def test_a_new_database_has_the_columns_derived_from_the_chunk(db, tmp_path):
    """`schemas/chunk.py` (its `Stored` fields) and the loader's own columns declare what
    the table holds; the migrations must make exactly that."""
    with connect(db, tmp_path) as conn:
        migrate(conn, 384)
        assert chunks_table_columns(conn) == declared_columns()


def test_a_changed_page_embeds_only_its_new_chunks(db, runs, model):
    load(db, runs, "a", model)
    embedder = Counting(model)
    result = load(db, runs, "b", embedder)
    before, after = run_texts(runs, "a"), run_texts(runs, "b")
    new_ids = after.keys() - before.keys()
    assert new_ids and result.inserted == len(new_ids) == embedder.embedded
    assert result.deleted == len(before.keys() - after.keys())
    assert held(db, runs) == after


def test_a_removed_page_is_deleted(db, runs, model):
    load(db, runs, "b", model)
    result = load(db, runs, "c", model)
    assert result.deleted > 0 and result.inserted == 0
    assert held(db, runs) == run_texts(runs, "c")
    with connect(db, runs) as conn:
        assert conn.execute(
            "select count(*) from firechunk_chunks where url = %s", [REMOVED]
        ).fetchone() == (0,)


def test_a_skipped_night_and_a_hand_edit_heal_on_the_next_load(db, runs, model):
    load(db, runs, "a", model)
    with connect(db, runs) as conn:  # someone deletes a row and adds a stray one
        conn.execute(
            "delete from firechunk_chunks where chunk_index = 0 and url like %s", ["%/architecture"]
        )
        conn.execute(
            "insert into firechunk_chunks (chunk_id, collection, url, title, breadcrumb, text, "
            "token_count, chunk_index, overlap_text, metadata, row_sha256, embedded_sha256) "
            "select gen_random_uuid(), collection, url, title, breadcrumb, 'stray', "
            "token_count, chunk_index, overlap_text, metadata, row_sha256, embedded_sha256 "
            "from firechunk_chunks limit 1"
        )
        conn.commit()
    load(db, runs, "c", model)  # b was never loaded
    assert held(db, runs) == run_texts(runs, "c")


def test_rows_whose_text_is_unchanged_are_updated_without_embedding(db, runs, model):
    load(db, runs, "a", model)
    with connect(db, runs) as conn:  # what a changed overlap or index looks like to the loader
        conn.execute("update firechunk_chunks set row_sha256 = 'old', chunk_index = 99")
        conn.commit()
    embedder = Counting(model)
    result = load(db, runs, "a", embedder)
    assert result.updated == len(run_texts(runs, "a")) and embedder.embedded == 0
    with connect(db, runs) as conn:
        assert conn.execute("select max(chunk_index) from firechunk_chunks").fetchone()[0] < 99


def test_a_failed_or_unfinished_run_is_never_loaded(runs, tmp_path):
    data_dir = tmp_path / "data"
    for run_id, status in [("bad", "failed"), ("late", "superseded")]:
        run_dir = data_dir / "runs" / run_id
        run_dir.mkdir(parents=True)
        (run_dir / "status.json").write_text(
            RunStatus(run_id=run_id, status=status).model_dump_json()
        )
        with pytest.raises(RunNotLoadable, match="only a published run"):
            published_run(data_dir, run_id)
    (data_dir / "runs" / "running").mkdir()
    with pytest.raises(RunNotLoadable, match="has not finished"):
        published_run(data_dir, "running")
    with pytest.raises(RunNotLoadable, match="no published run"):
        published_run(data_dir)
    result = CliRunner().invoke(app, ["load", "--data-dir", str(data_dir), "--run", "bad"])
    assert result.exit_code == 2 and "only a published run" in result.output


# `firechunk chunk`, killed the moment its run has passed validation (status.json written)
# and before it is published (manifest.json, then latest).
_KILLED_BEFORE_PUBLISHING = """
import os, signal, sys
import firechunk.run.stages as stages
from firechunk.cli import app

stages.write_manifest = lambda run_dir: os.kill(os.getpid(), signal.SIGKILL)
app(["chunk", sys.argv[1], "--data-dir", sys.argv[2], "--run-id", "killed", "--workers", "1"])
"""


def test_a_run_killed_after_validation_and_before_publishing_is_not_loaded(db, tmp_path):
    data_dir = tmp_path / "data"
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BEFORE_PUBLISHING, str(SAMPLE), str(data_dir)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=300,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    run_dir = data_dir / "runs" / "killed"
    assert RunStatus.model_validate_json((run_dir / "status.json").read_text()).status == "passed"
    assert not (run_dir / "manifest.json").exists() and not (data_dir / "latest").exists()

    result = CliRunner().invoke(
        app, ["load", "--data-dir", str(data_dir), "--db", db, "--run", "killed"]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "error: run killed passed validation but was never published (no manifest.json): "
        "only a published run is loaded (firechunk load --run latest)"
    ]
    with connect(db, data_dir) as conn:
        assert conn.execute("select to_regclass('firechunk_chunks')").fetchone() == (None,)


def test_the_shrink_guard_stops_a_load_that_deletes_too_much(db, runs, model, tmp_path):
    load(db, runs, "a", model)
    small = tmp_path / "data"
    keep_two = lambda pages: pages.__setitem__(slice(2, None), [])  # noqa: E731
    crawl = crawl_variant(tmp_path, "tiny", keep_two)
    same = published_run(runs, "a").collection
    run_pipeline(
        Request(run=RunSettings(collection=same), replay=crawl, data_dir=small, run_id="tiny")
    )
    before = held(db, runs)
    with pytest.raises(LoadRefused, match="--allow-shrink"):
        load(db, small, "tiny", model, collection=same)
    assert held(db, runs) == before
    result = load(db, small, "tiny", model, collection=same, allow_shrink=True)
    assert result.deleted > 0 and held(db, runs) == run_texts(small, "tiny")


def test_a_new_model_re_embeds_everything_and_new_dimensions_reshape_the_column(db, runs, model):
    load(db, runs, "a", model)
    count = len(run_texts(runs, "a"))
    other = Counting(model, model="another-model", dimensions=128)
    said: list[str] = []
    with connect(db, runs) as conn:
        conn.autocommit = True
        result = load_run(conn, published_run(runs, "a"), other, say=said.append)
        assert result.reembedded_all and other.embedded == count
        assert "model changed" in said[0] and said[0].index("model changed") < len(said[0])
        assert conn.execute(
            "select vector_dims(embedding) from firechunk_vectors limit 1"
        ).fetchone() == (128,)
        assert conn.execute("select model, dimensions from firechunk_sync").fetchone() == (
            "another-model",
            128,
        )
    assert held(db, runs) == run_texts(runs, "a")


def test_search_finds_the_chunk_that_answers(db, runs, model):
    load(db, runs, "a", model)
    question = "what happens to a message after too many failed deliveries"
    with connect(db, runs) as conn:
        collection = published_run(runs, "a").collection
        hits = search(conn, collection, question, model, k=5)
        assert hits[0].url == CHANGED
        assert hits[0].by_vector is not None and hits[0].by_text is not None
    asked = ["search", question, "--data-dir", str(runs), "--db", db, "-k", "5"]
    result = CliRunner().invoke(app, asked)
    assert result.exit_code == 0, result.output
    print(result.output)  # what a person reads, shown by pytest -s
    lines = result.output.splitlines()
    assert lines[0].startswith("1. 100%  ") and lines[1] == f"   {CHANGED}"
    assert "====" not in result.output and "| --- |" not in result.output
    ranked = [line for line in lines if re.match(r"\d+\. \d+%  ", line)]
    assert [int(line.split(".")[0]) for line in ranked] == [1, 2, 3, 4, 5]  # in rank order
    shares = [int(line.split()[1].rstrip("%")) for line in ranked]
    assert shares == sorted(shares, reverse=True) and shares[0] == 100

    best = CliRunner().invoke(app, [*asked, "--min-score", "1"])
    assert best.exit_code == 0, best.output
    ranked = [line for line in best.output.splitlines() if re.match(r"\d+\. \d+%  ", line)]
    assert len(ranked) == 1 and ranked[0].startswith("1. 100%  ")  # no tie with the best
    found = CliRunner().invoke(app, [*asked, "--min-score", "1", "--json"])
    assert [json.loads(line)["rank"] for line in found.output.splitlines()] == [1]
    assert json.loads(found.output)["text"] == hits[0].text and json.loads(found.output)["snippet"]
    assert json.loads(found.output)["match"] == 100


@pytest.mark.parametrize("question", ["", "  \t "])
def test_an_empty_question_is_bad_input(db, runs, model, question):
    load(db, runs, "a", model)
    result = CliRunner().invoke(app, ["search", question, "--data-dir", str(runs), "--db", db])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: the question is empty: ask what you are looking for, e.g. firechunk search "
        '"how are failed messages retried"'
    ]


_KILLED_LOAD = """
import sys, time
from pathlib import Path
import firechunk.db.load as loader
from firechunk.db.connect import connect
from firechunk.db.runs import published_run
from firechunk.embedders import local_embedder

def stall(*_):  # every row is applied, nothing committed yet
    Path(sys.argv[3]).write_text("applied")
    time.sleep(120)

loader._record = stall
with connect(sys.argv[1], Path(sys.argv[2])) as conn:
    conn.autocommit = True
    loader.load_run(conn, published_run(Path(sys.argv[2]), "c"), local_embedder())
"""


def test_kill_9_during_a_load_leaves_the_previous_run_and_the_next_load_completes(
    db, runs, model, tmp_path
):
    load(db, runs, "a", model)
    marker = tmp_path / "applied"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_LOAD, db, str(runs), str(marker)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "the load never reached its last step"
    with connect(db, runs) as conn:  # uncommitted: readers still see run a
        assert conn.execute("select run_id from firechunk_sync").fetchone() == ("a",)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert held(db, runs) == run_texts(runs, "a")
    result = load(db, runs, "c", model)  # the lock died with the session: this one runs
    assert result.run_id == "c" and held(db, runs) == run_texts(runs, "c")


def test_the_rebuild_flow_loads_with_the_url_from_a_secret_block_and_never_shows_it(
    prefect_api, server, tmp_path
):
    from prefect.blocks.system import Secret

    from firechunk.flows.rebuild import rebuild
    from tests.prefect_helpers import SAMPLE_CRAWL, artifacts_of, logs_of

    password = "canary-db-password-7f3a"
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"create database {name}")
        admin.execute(f"create role loader_{name} login password '{password}' superuser")
    url = server.replace("postgres:@/postgres?", f"loader_{name}:{password}@/{name}?")
    Secret(value=url).save("firechunk-db-url-test", overwrite=True)
    data_dir = tmp_path / "data"
    state = rebuild(
        replay=SAMPLE_CRAWL, data_dir=data_dir, run=RunSettings(workers=1), run_id="night-1",
        database=DatabaseSettings(load=True, db_secret_block="firechunk-db-url-test"),
        return_state=True,
    )  # fmt: skip
    assert state.is_completed(), state.message
    expected = run_texts(data_dir, "night-1")
    assert held(url, data_dir) == expected
    flow_run_id = state.state_details.flow_run_id
    rows = {
        row["figure"]: row["value"] for row in _table(artifacts_of(flow_run_id)["rebuild-load"])
    }
    assert rows["rows inserted"] == rows["chunks embedded"] == len(expected)
    assert rows["rows deleted"] == 0 and isinstance(rows["seconds"], float)
    logs = logs_of(flow_run_id)
    assert any("Secret block 'firechunk-db-url-test'" in message for message in logs)
    assert not [message for message in logs if password in message]
    assert not [
        p for p in data_dir.rglob("*") if p.is_file() and password.encode() in p.read_bytes()
    ]


def _table(artifact) -> list[dict]:
    return json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data


# Sessions idle in a transaction this long are ended. Generous, so the load's own steps
# inside its transaction never come near it on a loaded machine; its embedding, before
# the transaction, takes longer (`Slow`).
IDLE_IN_TRANSACTION_SECONDS = 10


class Slow(Counting):
    """The real embedder, taking its time: what a first load of thousands of chunks does."""

    def __init__(self, inner, pause: float):
        super().__init__(inner)
        self.pause = pause

    def embed(self, texts, progress=None):
        time.sleep(self.pause)
        self.pause = 0.0  # once is enough to outlast the timeout
        return super().embed(texts, progress)


def test_embedding_happens_outside_the_transaction(db, runs, model):
    """A server that ends sessions idle in a transaction still takes a load whose embedding
    takes longer than that."""
    with psycopg.connect(db, autocommit=True) as admin:
        name = admin.info.dbname
        timeout = f"{IDLE_IN_TRANSACTION_SECONDS}s"
        admin.execute(
            f"alter database {name} set idle_in_transaction_session_timeout = '{timeout}'"
        )
    result = load(db, runs, "a", Slow(model, pause=IDLE_IN_TRANSACTION_SECONDS + 1))
    assert result.inserted == len(run_texts(runs, "a")) and held(db, runs) == run_texts(runs, "a")


def test_a_dry_run_says_what_the_load_would_do_and_changes_nothing(db, runs, model):
    """`load --dry-run` before a first load: every chunk to insert and embed, an estimate
    of the time, nothing written (not even the tables); after the load, nothing to do; a
    load the shrink guard would refuse says so."""

    def dry_run(*extra: str) -> dict:
        asked = ["load", "--data-dir", str(runs), "--db", db, "--dry-run", "--json", *extra]
        result = CliRunner().invoke(app, asked)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    expected = run_texts(runs, "a")
    before = dry_run("--run", "a")
    assert (before["inserted"], before["updated"], before["deleted"]) == (len(expected), 0, 0)
    assert before["to_embed"] == len(expected) and before["windows"] >= len(expected)
    assert before["seconds"] > 0 and before["refused"] is None
    with connect(db, runs) as conn:
        assert not has_tables(conn)  # nothing made, nothing loaded
    load(db, runs, "a", model)
    after = dry_run("--run", "a")
    assert (after["inserted"], after["updated"], after["deleted"], after["windows"]) == (0, 0, 0, 0)
    shrunk = dry_run("--run", "c", "--max-shrink", "0")
    assert shrunk["deleted"] > shrunk["inserted"] and "--allow-shrink" in shrunk["refused"]
    said = CliRunner().invoke(app, ["load", "--data-dir", str(runs), "--db", db, "--dry-run"])
    assert "nothing was changed" in said.output and held(db, runs) == expected
