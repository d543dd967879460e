"""Several doc sets in one data directory: each is declared (its collection), and everything
a run compares with is its own doc set's: the baseline, the page cache, the shrink guard,
supersession, `changes.json`, `firechunk runs`.

Small crawls of our own pages (an "auth" doc set, a "guides" doc set that holds some of the
same auth pages, and one on another host), chunked with `firechunk chunk` into one data
directory; the test marked `corpus` does the same with the shared corpus's real crawls.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from firechunk.cli import app
from firechunk.db.held import Held
from firechunk.run.collection import collection_of_target
from firechunk.run.manifest import damaged_files
from firechunk.settings import CrawlSettings
from tests.corpus import CORPUS_DIR
from tests.synthetic_runs import prose

AUTH = "https://docs.example.com/docs/guides/auth"
AUTH_COLLECTION = "docs.example.com/docs/guides/auth"
GUIDES = "https://docs.example.com/docs/guides"
OTHER = "https://help.example.org/manual"


def page(url: str, title: str, seed: int) -> dict:
    """A page of two sections of prose: ours, never the corpus's."""
    markdown = f"# {title}\n\n{prose(120, seed)}\n\n## How it works\n\n{prose(150, seed + 1000)}\n"
    return {"markdown": markdown, "metadata": {"sourceURL": url, "title": title}}


def crawl(path: Path, pages: list[dict]) -> Path:
    path.write_text(json.dumps({"status": "completed", "data": pages}))
    return path


def auth_pages() -> list[dict]:
    return [page(f"{AUTH}/topic-{n}", f"Auth topic {n}", n) for n in range(10)]


def guides_pages() -> list[dict]:
    """The guides hold the database guides and two of the auth pages: most of the auth
    doc set's pages are under the guides' path, none of theirs is missing from it."""
    database = [
        page(f"{GUIDES}/database/part-{n}", f"Database part {n}", 100 + n) for n in range(12)
    ]
    return database + auth_pages()[:2]


def other_pages() -> list[dict]:
    return [page(f"{OTHER}/chapter-{n}", f"Chapter {n}", 200 + n) for n in range(10)]


@pytest.fixture(scope="module")
def crawls(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("crawls")
    return {
        "auth": crawl(folder / "auth.json", auth_pages()),
        "guides": crawl(folder / "guides.json", guides_pages()),
        "other": crawl(folder / "other.json", other_pages()),
    }


def chunk(crawl_file: Path, data_dir: Path, *options: str):
    """`firechunk chunk` in this process, as run N+1 of the data directory: the run's
    directory and the command's result."""
    runs = data_dir / "runs"
    run_id = f"run-{len(list(runs.glob('run-*'))) + 1:02d}" if runs.is_dir() else "run-01"
    result = CliRunner().invoke(
        app,
        ["chunk", str(crawl_file), "--data-dir", str(data_dir), "--run-id", run_id, *options],
    )
    return runs / run_id, result


def read(run_dir: Path, name: str) -> dict:
    return json.loads((run_dir / name).read_text())


def test_auth_then_guides_then_auth_each_publish_as_themselves(crawls, tmp_path):
    """Issue 32, item 1: the third run is the auth doc set again, not a shrink of the
    guides; it reuses every page of the first run and changes nothing."""
    data_dir = tmp_path / "data"
    first, done = chunk(crawls["auth"], data_dir)
    assert done.exit_code == 0, done.output
    guides, done = chunk(crawls["guides"], data_dir)
    assert done.exit_code == 0, done.output
    third, done = chunk(crawls["auth"], data_dir)

    assert done.exit_code == 0, done.output
    assert read(third, "status.json")["status"] == "passed"
    assert read(third, "report.json")["collection"] == AUTH_COLLECTION
    assert read(guides, "report.json")["collection"] == "docs.example.com/docs/guides"
    changes = read(third, "changes.json")
    assert changes["baseline"] == first.name
    assert (changes["pages_rechunked"], changes["upsert"], changes["delete"]) == (0, [], [])


def test_a_doc_set_of_another_site_deletes_nothing_of_the_one_before(crawls, tmp_path):
    """Issue 32, item 2: a doc set chunked into a data directory whose latest run is
    another doc set compares with nothing: no baseline, no deletes, no pages removed."""
    data_dir = tmp_path / "data"
    assert chunk(crawls["auth"], data_dir)[1].exit_code == 0
    other, done = chunk(crawls["other"], data_dir)

    assert done.exit_code == 0, done.output
    changes = read(other, "changes.json")
    assert changes["baseline"] is None
    assert (changes["delete"], changes["pages_removed"]) == ([], [])
    assert changes["collection"] == "help.example.org/manual"


def test_runs_of_one_collection_are_not_behind_for_another_collections_runs(
    crawls, tmp_path, monkeypatch
):
    """Issue 32, item 4: the database holds the auth doc set's only run; two runs of the
    guides published since are not runs the auth collection is behind by."""
    data_dir = tmp_path / "data"
    auth, _ = chunk(crawls["auth"], data_dir)
    chunk(crawls["guides"], data_dir)
    chunk(crawls["other"], data_dir)
    held = Held("docs.example.com/docs/guides/auth", run_id=auth.name, chunks=10)
    monkeypatch.setattr("firechunk.db.held.read_held", lambda url, data, collection: held)

    shown = CliRunner().invoke(
        app, ["runs", "--data-dir", str(data_dir), "--collection", held.collection]
    )

    assert shown.exit_code == 0, shown.output
    first_line = shown.output.splitlines()[0]
    assert first_line.endswith(": up to date"), first_line
    assert "help.example.org" not in shown.output


def test_a_collection_is_renamed_only_by_its_command_and_carries_on(crawls, tmp_path):
    """Renamed, the auth doc set's next run declared under the new name reuses every page of
    its last run; the runs record the new name and their manifests still vouch for them."""
    data_dir = tmp_path / "data"
    first, _ = chunk(crawls["auth"], data_dir)
    chunk(crawls["guides"], data_dir)
    renamed = CliRunner().invoke(
        app, ["rename-collection", AUTH_COLLECTION, "auth", "--data-dir", str(data_dir)]
    )
    assert renamed.exit_code == 0, renamed.output
    assert read(first, "run.json")["settings"]["collection"] == "auth"
    assert damaged_files(first) == []

    next_run, done = chunk(crawls["auth"], data_dir, "--collection", "auth")

    assert done.exit_code == 0, done.output
    changes = read(next_run, "changes.json")
    assert (changes["collection"], changes["baseline"]) == ("auth", first.name)
    assert (changes["pages_rechunked"], changes["upsert"], changes["delete"]) == (0, [], [])
    unknown = CliRunner().invoke(
        app, ["rename-collection", "no.such/name", "x", "--data-dir", str(data_dir)]
    )
    assert unknown.exit_code == 2 and "no collection 'no.such/name'" in unknown.output


def test_a_run_of_a_declared_collection_compares_only_with_that_collection(crawls, tmp_path):
    """The same pages under two declared names are two doc sets: the second is a first run."""
    data_dir = tmp_path / "data"
    chunk(crawls["auth"], data_dir, "--collection", "staging")
    second, done = chunk(crawls["auth"], data_dir, "--collection", "production")
    assert done.exit_code == 0, done.output
    changes = read(second, "changes.json")
    assert (changes["baseline"], changes["pages_rechunked"]) == (None, 10)
    assert (data_dir / "collections" / "staging" / "latest").is_symlink()
    assert os.readlink(data_dir / "collections" / "production" / "latest") == "../../runs/run-02"


def test_the_collection_a_crawl_target_names():
    """The site's host and path, narrowed to where every include pattern starts."""
    site = "https://supabase.com/docs"
    named = {
        (): "supabase.com/docs",
        ("docs/guides/auth/.*",): "supabase.com/docs/guides/auth",
        ("^/docs/guides/auth/.*", "docs/guides/auth"): "supabase.com/docs/guides/auth",
        ("docs/guides/.*", "docs/reference/javascript/.*"): "supabase.com/docs",
        ("blog/.*",): "supabase.com/docs",  # outside the site's path: the site
    }
    for include, expected in named.items():
        target = CrawlSettings(site_url=site, include_paths=list(include)).target()
        assert collection_of_target(target) == expected, include


# --- the shared corpus ----------------------------------------------------------------------

SEQUENCE = ("supabase-auth-2024-09", "supabase-guides-2026", "supabase-auth-2024-09")
CREWAI = "crewai-docs-mintlify-2025"


@pytest.mark.corpus
@pytest.mark.skipif(
    not all((CORPUS_DIR / f"{name}.json").is_file() for name in (*SEQUENCE, CREWAI)),
    reason=f"the auth, guides and CrewAI crawls of the shared corpus are not at {CORPUS_DIR}",
)
def test_the_corpus_doc_sets_share_one_data_directory(tmp_path):
    """auth, guides, auth, crewai into one data directory with `firechunk chunk`: each
    publishes as itself without --allow-shrink, no changes.json deletes a chunk of another
    doc set, and a second unchanged run of each chunks no page."""
    data_dir = tmp_path / "data"
    collections: dict[str, str] = {}
    chunk_ids: dict[str, set[str]] = {}
    for name in (*SEQUENCE, CREWAI):
        run_dir, done = chunk(CORPUS_DIR / f"{name}.json", data_dir)
        assert done.exit_code == 0, done.output
        collection = read(run_dir, "report.json")["collection"]
        assert collections.setdefault(name, collection) == collection
        deleted = set(read(run_dir, "changes.json")["delete"])
        assert deleted <= chunk_ids.get(collection, set()), name  # its own last run's only
        chunk_ids[collection] = {row["chunk_id"] for row in read(run_dir, "chunks.json")}
    assert len(set(collections.values())) == 3

    for name in (SEQUENCE[0], SEQUENCE[1], CREWAI):
        run_dir, done = chunk(CORPUS_DIR / f"{name}.json", data_dir)
        assert done.exit_code == 0, done.output
        changes = read(run_dir, "changes.json")
        assert changes["pages_rechunked"] == 0, name
        assert (changes["upsert"], changes["delete"]) == ([], []), name
    assert os.readlink(data_dir / "latest") == f"runs/{run_dir.name}"
