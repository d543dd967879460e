"""The vector database stays right when several doc sets share it, when edits replace many
chunks, when loads race, and when a page carries text Postgres cannot take.

Real published runs of the sample crawl and variants of it, a real Postgres with pgvector
(the embedded one) and the real local embedder, as in tests/test_database.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.db.connect import connect
from firechunk.db.load import LoadGuards, LoadRefused, LoadSuperseded, load_run
from firechunk.db.rename import rename_in_database
from firechunk.db.runs import MAX_FIELD_CHARS, published_run
from firechunk.db.schema import _MIGRATIONS, SIZES, SIZES_FROM_CHUNKS, TERMS, TERMS_FROM_CHUNKS
from firechunk.db.search import loaded_collections, search
from firechunk.pipeline import Request, run_pipeline
from firechunk.settings import RunSettings
from tests.test_database import Counting, chunks_table_columns, crawl_variant, declared_columns

ROOT = Path(__file__).resolve().parents[1]
GUIDES = "https://docs.example.com/docs/guides/"


def publish(
    data_dir: Path, tmp: Path, run_id: str, edit=None, allow_shrink=False, collection=None
) -> Path:
    """The sample, edited by `edit`, published as run `run_id` of `data_dir`; its
    collection `collection`, else the one its pages name."""
    crawl = crawl_variant(tmp, f"{data_dir.name}-{run_id}", edit)
    settings = RunSettings(allow_shrink=allow_shrink, collection=collection)
    night = run_pipeline(Request(run=settings, replay=crawl, data_dir=data_dir, run_id=run_id))
    outcome, published = night.outcome, night.result
    assert outcome and outcome.success and published and published.published, run_id
    return data_dir


def load(url, data_dir, run_id, embedder, collection=None, only_if_latest=False, **allowed):
    """`allowed`: the `LoadGuards` fields (allow_shrink, max_shrink, force_older)."""
    with connect(url, data_dir) as conn:
        conn.autocommit = True
        run = published_run(data_dir, run_id, collection)
        guards = LoadGuards(**allowed)
        return load_run(
            conn, run, embedder, guards=guards, only_if_latest=only_if_latest, say=lambda _: None
        )


def rows(url: str, data_dir: Path, collection: str | None = None) -> dict[str, str]:
    """Chunk id -> text of the rows of `collection` (every row when None)."""
    query = "select chunk_id::text, text from firechunk_chunks"
    with connect(url, data_dir) as conn:
        if collection is None:
            return dict(conn.execute(query).fetchall())
        return dict(conn.execute(query + " where collection = %s", [collection]).fetchall())


def texts(data_dir: Path, run_id: str) -> dict[str, str]:
    return {c.chunk_id: c.text for c in published_run(data_dir, run_id).chunks}


def guides_only(pages):
    pages[:] = [p for p in pages if p["metadata"]["sourceURL"].startswith(GUIDES)]


def rename_product(pages):
    for page in pages:
        page["markdown"] = page["markdown"].replace("Acme", "Zenith")


def keep_three(pages):
    pages[:] = pages[:3]


@pytest.fixture(scope="module")
def renamed(tmp_path_factory) -> Path:
    """A data directory with two published runs: the sample (a), then the sample with the
    product renamed on every page (b): most chunk ids change, no page goes."""
    tmp = tmp_path_factory.mktemp("renamed")
    publish(tmp / "data", tmp, "a")
    return publish(tmp / "data", tmp, "b", rename_product)


@pytest.fixture(scope="module")
def guides(tmp_path_factory) -> Path:
    """A data directory whose one run holds the sample's guides only."""
    tmp = tmp_path_factory.mktemp("guides")
    return publish(tmp / "data", tmp, "g", guides_only)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """A data directory whose one run holds the sample's first three pages, declared as the
    whole sample's doc set."""
    tmp = tmp_path_factory.mktemp("small")
    return publish(tmp / "data", tmp, "small", keep_three, collection="docs.example.com/docs")


@pytest.fixture
def own_copy(renamed, tmp_path) -> Path:
    """The renamed data directory copied, for a test that changes its files or starts an
    embedded database in it."""
    return Path(shutil.copytree(renamed, tmp_path / "data", symlinks=True))


def test_two_doc_sets_sharing_chunks_load_side_by_side_and_search_apart(db, model, renamed, guides):
    everything = renamed
    whole, part = texts(everything, "a"), texts(guides, "g")
    assert part.keys() < whole.keys()  # the guides' chunks are also the whole site's
    first = load(db, everything, "a", model)
    second = load(db, guides, "g", model)
    assert first.collection == "docs.example.com/docs"
    assert second.collection == "docs.example.com/docs/guides"
    assert (second.inserted, second.deleted) == (len(part), 0)
    again = load(db, everything, "a", model)
    assert not again.changed
    assert rows(db, everything, first.collection) == whole
    assert rows(db, everything, second.collection) == part
    with connect(db, everything) as conn:
        held = {c.name: (c.run_id, c.chunks) for c in loaded_collections(conn)}
        assert held == {first.collection: ("a", len(whole)), second.collection: ("g", len(part))}
        question = "what does the reporting schema hold"
        in_guides = search(conn, second.collection, question, model, k=5)
        assert in_guides and all(hit.url.startswith(GUIDES) for hit in in_guides)
        in_all = search(conn, first.collection, question, model, k=5)
        assert "/reference/sql/reporting-schema" in in_all[0].url


def searched(db: str, data_dir: Path, question: str, *options: str):
    """`firechunk search QUESTION --json` on the database `db`."""
    asked = ["search", question, "--db", db, "--data-dir", str(data_dir), "--json", *options]
    return CliRunner().invoke(app, asked)


def test_search_collection_searches_that_collection_and_no_other(db, model, renamed, guides):
    question = "what does the reporting schema hold"
    everything = load(db, renamed, "a", model).collection
    unknown = searched(db, renamed, question, "--collection", "no.such.name")
    assert unknown.exit_code == 2, unknown.stdout[:300]
    assert unknown.stderr.strip().splitlines() == [
        f"error: collection 'no.such.name' is not loaded; loaded: {everything}"
    ]
    part = load(db, guides, "g", model).collection
    for collection, ids in [(part, texts(guides, "g")), (everything, texts(renamed, "a"))]:
        found = searched(db, renamed, question, "--collection", collection, "-k", "10")
        assert found.exit_code == 0, found.output
        hits = [json.loads(line) for line in found.stdout.splitlines()]
        assert hits and {hit["chunk_id"] for hit in hits} <= ids.keys(), collection
    assert not all(hit["url"].startswith(GUIDES) for hit in hits)  # the whole site's answer
    unknown = searched(db, renamed, question, "--collection", "no.such.name")
    assert unknown.exit_code == 2 and f"loaded: {everything}, {part}" in unknown.stderr


def test_an_edit_across_every_page_loads_without_allow_shrink(db, model, renamed):
    data_dir = renamed
    before, after = texts(data_dir, "a"), texts(data_dir, "b")
    replaced = before.keys() - after.keys()
    assert len(replaced) > 0.5 * len(before)  # most chunks got new ids: it looks like loss
    load(db, data_dir, "a", model)
    result = load(db, data_dir, "b", model)
    assert result.deleted == len(replaced) and result.inserted == len(after.keys() - before.keys())
    assert rows(db, data_dir) == after


def test_a_real_shrink_is_still_refused(db, model, renamed, small):
    before, after = texts(renamed, "a"), texts(small, "small")
    assert len(after) < 0.5 * len(before)
    same = load(db, renamed, "a", model).collection
    with pytest.raises(LoadRefused, match="--allow-shrink"):
        load(db, small, "small", model, collection=same)
    assert rows(db, renamed) == before
    load(db, small, "small", model, collection=same, allow_shrink=True)
    assert rows(db, renamed) == after


class RacedBy(Counting):
    """The real embedder; while the older load embeds (outside its transaction), the newer
    run is loaded and committed on another connection."""

    def __init__(self, inner, race):
        super().__init__(inner)
        self.race = race

    def embed(self, texts, progress=None):
        if self.race:
            race, self.race = self.race, None
            race()
        return super().embed(texts, progress)


def test_an_older_run_never_replaces_a_newer_one(db, model, renamed):
    data_dir = renamed
    newer = texts(data_dir, "b")
    # the older load commits after the newer one: refused at its commit
    racer = RacedBy(model, lambda: load(db, data_dir, "b", model))
    with pytest.raises(LoadSuperseded, match="--force-older"):
        load(db, data_dir, "a", racer)
    assert rows(db, data_dir) == newer
    # the older load starts after the newer one committed: refused before it embeds
    counting = Counting(model)
    with pytest.raises(LoadSuperseded):
        load(db, data_dir, "a", counting)
    assert counting.embedded == 0 and rows(db, data_dir) == newer
    load(db, data_dir, "a", model, force_older=True)
    assert rows(db, data_dir) == texts(data_dir, "a")


def test_the_flow_loads_a_run_only_while_it_is_latest(db, model, renamed):
    data_dir = renamed
    with pytest.raises(LoadSuperseded, match="no longer the latest"):
        load(db, data_dir, "a", model, only_if_latest=True)
    assert rows(db, data_dir) == {}
    assert load(db, data_dir, "b", model, only_if_latest=True).run_id == "b"


def test_text_postgres_cannot_take_is_cleaned_and_bounded(db, model, own_copy):
    data_dir = own_copy
    chunks_json = data_dir / "runs" / "a" / "chunks.json"
    chunks = json.loads(chunks_json.read_text())
    chunks[0]["metadata"]["page_title"] = "Getting\x00started"
    chunks[0]["metadata"]["breadcrumb"] = ["Getting\x00started"]
    chunks[0]["data"]["text"] = "Before\x00after. " + chunks[0]["data"]["text"]
    chunks[1]["metadata"]["page_title"] = "word " * 120_000
    chunks_json.write_text(json.dumps(chunks))
    load(db, data_dir, "a", model)
    with connect(db, data_dir) as conn:
        found = conn.execute(
            "select title, breadcrumb, text, metadata->>'page_title' from firechunk_chunks "
            "where chunk_id = %s",
            [chunks[0]["chunk_id"]],
        ).fetchone()
        assert found[0] == found[3] == "Gettingstarted" and found[1] == ["Gettingstarted"]
        assert found[2].startswith("Beforeafter. ")
        (title,) = conn.execute(
            "select title from firechunk_chunks where chunk_id = %s", [chunks[1]["chunk_id"]]
        ).fetchone()
        assert len(title) == MAX_FIELD_CHARS


def test_a_version_1_database_keeps_its_rows_under_their_site(db, model, renamed):
    """Rows a v1 loader stored under scheme and host become the run's collection, without
    embedding anything again."""
    data_dir = renamed
    run = published_run(data_dir, "a")
    with connect(db, data_dir) as conn:
        conn.execute("create table firechunk_schema (version integer not null)")
        for statement in _MIGRATIONS[1]:
            conn.execute(statement.replace("{dimensions}", "384"))
        conn.execute("insert into firechunk_schema values (1)")
        vectors = model.embed([chunk.embedded_text for chunk in run.chunks])
        for chunk, vector in zip(run.chunks, vectors, strict=True):  # one vector a chunk
            conn.execute(
                "insert into firechunk_chunks (chunk_id, site, url, title, breadcrumb, text, "
                "token_count, chunk_index, overlap_text, metadata, row_sha256, "
                "embedded_sha256, embedding) values (%s, %s, %s, %s, %s, %s, %s, %s, '', "
                "'{}', %s, %s, %s)",
                [
                    chunk.chunk_id, "https://docs.example.com", chunk.url, chunk.title,
                    list(chunk.breadcrumb), chunk.text, chunk.token_count, chunk.chunk_index,
                    chunk.row_sha256, chunk.embedded_sha256, vector,
                ],
            )  # fmt: skip
        conn.execute(
            "insert into firechunk_sync values ('https://docs.example.com', 'a', now(), %s, "
            "384, %s, 0, 0, 0, 0, 0)",
            [model.model, len(run.chunks)],
        )
        conn.commit()
    counting = Counting(model)
    result = load(db, data_dir, "a", counting)
    assert counting.embedded == 0 and not result.changed
    assert rows(db, data_dir, "docs.example.com/docs") == texts(data_dir, "a")
    with connect(db, data_dir) as conn:  # migrated, it has the columns a new one has
        assert chunks_table_columns(conn) == declared_columns()


def firechunk(*args: str | bytes, data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "firechunk.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def test_a_question_that_is_not_utf8_is_bad_input(tmp_path):
    done = firechunk("search", b"caf\xe9", data_dir=tmp_path)
    assert done.returncode == 2, done.stderr
    assert b"not valid UTF-8" in done.stderr and b"Traceback" not in done.stderr


def test_a_damaged_embedded_database_says_how_to_rebuild_it(own_copy):
    data_dir = own_copy
    runner = CliRunner()
    loaded = runner.invoke(app, ["load", "--data-dir", str(data_dir)])
    assert loaded.exit_code == 0, loaded.output
    listed = runner.invoke(app, ["collections", "--data-dir", str(data_dir)])
    assert listed.exit_code == 0 and "docs.example.com/docs" in listed.output
    with connect(None, data_dir) as conn:
        (relation,) = conn.execute("select pg_relation_filepath('firechunk_chunks')").fetchone()
    (data_dir / "postgres" / relation).unlink()
    found = runner.invoke(app, ["search", "retries", "--data-dir", str(data_dir)])
    assert found.exit_code == 3, found.output
    assert "damaged" in found.output and "firechunk load" in found.output
    assert "Traceback" not in found.output


_KILLED = """
import sys, time
from pathlib import Path
import firechunk.db.load as loader
from firechunk.cli import app

data_dir, moment, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])
real = getattr(loader, moment)

def stalled(*args, **kwargs):
    result = real(*args, **kwargs) if moment == "_apply" else None
    marker.write_text(moment)  # embedding begun, or every row copied and not committed
    time.sleep(300)
    return result

setattr(loader, moment, stalled)
app(["load", "--data-dir", data_dir])
"""


@pytest.mark.parametrize("moment", ["_embed", "_apply"])
def test_a_load_killed_while_embedding_or_copying_leaves_the_database_whole(
    own_copy, tmp_path, moment
):
    """SIGKILL mid-load, then `firechunk load` again: the database holds latest, and no
    Postgres process of the data directory outlives the second load."""
    from tests.test_embedded_postgres import no_server_left, wait_until

    data_dir = own_copy
    runner = CliRunner()
    loaded = runner.invoke(app, ["load", "--data-dir", str(data_dir), "--run", "a"])
    assert loaded.exit_code == 0, loaded.output
    marker = tmp_path / "reached"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED, str(data_dir), moment, str(marker)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert wait_until(lambda: marker.exists() or child.poll() is not None, 300)
        assert marker.exists(), "the load never got there"
    finally:
        child.kill()
        child.wait()
    again = runner.invoke(app, ["load", "--data-dir", str(data_dir)])
    assert again.exit_code == 0, again.output
    assert wait_until(lambda: no_server_left(data_dir))
    assert rows(None, data_dir) == texts(data_dir, "b")
    assert wait_until(lambda: no_server_left(data_dir))


def test_two_doc_sets_of_one_data_directory_load_apart(db, model, tmp_path):
    """The whole sample and its guides chunked into one data directory and loaded into one
    database: each load touches only its own collection, and the whole sample's next run
    (its baseline its own last run, not the guides') loads without a refusal."""
    data_dir = tmp_path / "data"
    publish(data_dir, tmp_path, "all-1")
    publish(data_dir, tmp_path, "guides-1", guides_only)
    whole = load(db, data_dir, "latest", model, "docs.example.com/docs")
    guides = load(db, data_dir, "latest", model)  # the data directory's latest: the guides
    assert (whole.run_id, guides.run_id) == ("all-1", "guides-1")
    assert guides.collection == "docs.example.com/docs/guides"
    guide_rows = rows(db, data_dir, guides.collection)
    assert guide_rows == texts(data_dir, "guides-1")

    publish(data_dir, tmp_path, "all-2", change_one_page)
    changes = json.loads((data_dir / "runs" / "all-2" / "changes.json").read_text())
    assert (changes["baseline"], changes["collection"]) == ("all-1", whole.collection)
    again = load(db, data_dir, "latest", model)

    assert (again.collection, again.run_id) == (whole.collection, "all-2")
    assert again.changed and again.deleted == len(changes["delete"])
    assert rows(db, data_dir, whole.collection) == texts(data_dir, "all-2")
    assert rows(db, data_dir, guides.collection) == guide_rows
    with connect(db, data_dir) as conn:
        held = {c.name: c.run_id for c in loaded_collections(conn)}
    assert held == {whole.collection: "all-2", guides.collection: "guides-1"}


def change_one_page(pages):
    pages[0]["markdown"] += "\n\nEvery message keeps its id when it is delivered again.\n"


def test_a_renamed_collection_keeps_its_rows_and_embeds_nothing_again(db, model, tmp_path):
    data_dir = tmp_path / "data"
    publish(data_dir, tmp_path, "a")
    first = load(db, data_dir, "latest", model)
    renamed = CliRunner().invoke(
        app,
        ["rename-collection", first.collection, "acme", "--data-dir", str(data_dir), "--db", db],
    )
    assert renamed.exit_code == 0, renamed.output
    assert f"{first.collection} is now acme: latest run a" in renamed.output

    counting = Counting(model)
    again = load(db, data_dir, "latest", counting, "acme")
    assert (again.collection, again.changed, counting.embedded) == ("acme", False, 0)
    assert rows(db, data_dir, first.collection) == {}
    taken = CliRunner().invoke(
        app, ["rename-collection", "other", "acme", "--data-dir", str(data_dir), "--db", db]
    )
    assert taken.exit_code == 2 and "has a collection 'acme' already" in taken.output


def assert_statistics_kept(url: str, data_dir: Path) -> None:
    """The term statistics the tables keep are those computed from the chunks held."""
    with connect(url, data_dir) as conn:
        for kept, counted in ((TERMS, TERMS_FROM_CHUNKS), (SIZES, SIZES_FROM_CHUNKS)):
            held = set(conn.execute(f"select * from {kept}").fetchall())
            assert held == set(conn.execute(counted).fetchall()), kept


def test_the_term_statistics_follow_every_change_of_the_chunks(db, model, renamed, guides):
    load(db, renamed, "a", model)
    shared = load(db, guides, "g", model).collection  # holds chunks the other one holds
    assert_statistics_kept(db, renamed)
    load(db, renamed, "b", model)  # most chunks replaced: inserts and deletes
    assert_statistics_kept(db, renamed)
    with connect(db, renamed) as conn:
        conn.autocommit = True
        assert rename_in_database(conn, shared, "handbook") > 0
        conn.execute(
            "update firechunk_chunks set title = 'Zenith ledger' "
            "where collection = 'handbook' and chunk_index = 0"
        )
        assert_statistics_kept(db, renamed)
        conn.execute("delete from firechunk_chunks where collection = 'handbook'")
        assert (
            conn.execute(f"select 1 from {SIZES} where collection = 'handbook'").fetchone() is None
        )
    assert_statistics_kept(db, renamed)
    load(db, renamed, "a", model, force_older=True)  # and back
    assert_statistics_kept(db, renamed)
