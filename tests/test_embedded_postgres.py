"""The embedded Postgres (`firechunk.db.embedded`) with real processes: nothing outside the
data directory changes when run as root, a killed command never keeps the server running,
a read finds no cluster rather than making one, and its failures are one line with their
exit code.

Each test has a data directory of its own; waits poll up to a generous deadline, since the
machine may be busy.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from firechunk.db.connect import connect, embedded_server
from tests.disks import mounts_unavailable, on_small_disk, read_only

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "crawl.json"
FIRECHUNK = Path(sys.executable).with_name("firechunk")
DEADLINE = 60


def firechunk(
    *args: str, within: Callable[[list[str]], list[str]] = list, **options
) -> subprocess.CompletedProcess[str]:
    """The installed `firechunk`, with no database URL or data directory inherited;
    `within`: the command line it runs in (`tests.disks`); `options` for subprocess.run."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("FIRECHUNK_DB_URL", "FIRECHUNK_DATA_DIR")
    }
    command = [str(FIRECHUNK)] if FIRECHUNK.exists() else [sys.executable, "-m", "firechunk.cli"]
    return subprocess.run(
        within(command + list(args)),
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, **options,
    )  # fmt: skip


def wait_until(done: Callable[[], bool], seconds: float = DEADLINE) -> bool:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def processes_naming(path: Path) -> list[str]:
    """The command lines of the running processes that name `path` (the postmaster names
    its data directory, initdb the directory it builds)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in line and proc.name != str(os.getpid()):
            found.append(line)
    return found


def no_server_left(data_dir: Path) -> bool:
    return wait_until(lambda: not processes_naming(data_dir))


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# What running as root must leave alone: every directory from the data directory's parent
# up to /, pgserver's binaries, and the system's users and groups.
def outside_state(data_dir: Path) -> dict[str, object]:
    state: dict[str, object] = {}
    for path in [*data_dir.parent.parents, data_dir.parent]:
        state[str(path)] = _owner_and_mode(path)
    spec = importlib.util.find_spec("pgserver")
    assert spec is not None and spec.origin is not None
    install = Path(spec.origin).parent / "pginstall"
    for path in [install, *install.rglob("*")]:
        state[str(path)] = _owner_and_mode(path)
    for name in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"):
        if Path(name).exists():
            state[name] = Path(name).read_bytes()
    return state


def _owner_and_mode(path: Path) -> tuple[int, int, int]:
    info = path.lstat()
    return info.st_mode, info.st_uid, info.st_gid


@pytest.mark.skipif(os.geteuid() != 0, reason="checks what running as root changes (CI is root)")
def test_as_root_nothing_outside_the_data_directory_changes(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)  # no other user could pass; the server needs no one to
    data_dir = private / "data"
    before = outside_state(data_dir)

    chunked = firechunk("chunk", str(SAMPLE), "--data-dir", str(data_dir), "--workers", "1")
    assert chunked.returncode == 0, chunked.stderr
    loaded = firechunk("load", "--data-dir", str(data_dir))
    assert loaded.returncode == 0, loaded.stderr
    found = firechunk("search", "failed deliveries", "--data-dir", str(data_dir), "-k", "1")
    assert found.returncode == 0, found.stderr
    assert re.match(r"1\. \d+%  .+\n   https://docs\.example\.com/\S+\n", found.stdout), (
        found.stdout
    )

    assert outside_state(data_dir) == before
    assert no_server_left(data_dir)
    assert (data_dir / "postgres").stat().st_uid == 0  # root's files, no other user's


@pytest.mark.skipif(os.geteuid() != 0, reason="checks what running as root changes (CI is root)")
@pytest.mark.skipif(not shutil.which("make"), reason="runs `make demo`")
def test_as_root_make_demo_changes_nothing_outside_its_data_directory(tmp_path):
    """`make demo` as README gives it, into a data directory of the test's own (DEMO), with
    this venv (VENV) and an install stamp newer than pyproject.toml, so nothing installs."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    demo = private / "demo"
    stamp = tmp_path / "installed"
    stamp.touch()
    venv = Path(sys.executable).parent.parent
    before = outside_state(demo)

    env = {
        k: v for k, v in os.environ.items() if k not in ("FIRECHUNK_DB_URL", "FIRECHUNK_DATA_DIR")
    }
    made = subprocess.run(
        ["make", "--no-print-directory", "demo", f"VENV={venv}", f"STAMP={stamp}", f"DEMO={demo}"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert re.search(r"^1\. \d+%  .+\n   https://docs\.example\.com/\S+\n", made.stdout, re.M), (
        made.stdout
    )
    assert (demo / "latest" / "chunks.json").is_file()

    assert outside_state(demo) == before
    assert no_server_left(demo)
    assert (demo / "postgres").stat().st_uid == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="checks what running as root needs")
def test_as_root_without_user_namespaces_it_says_what_to_do_instead(tmp_path):
    data_dir = tmp_path / "data"
    with embedded_server(data_dir):
        pass
    env = {**os.environ, "PATH": str(FIRECHUNK.parent)}  # no unshare to be found
    env.pop("FIRECHUNK_DB_URL", None)
    result = subprocess.run(
        [str(FIRECHUNK), "search", "anything", "--data-dir", str(data_dir)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith("error: the embedded Postgres cannot run as root here (")
    assert line.endswith("pass --db or FIRECHUNK_DB_URL, or run firechunk as a non-root user")


_AS_NOBODY = """
import os, sys
from pathlib import Path
import psycopg
from firechunk.db.connect import embedded_server
with embedded_server(Path(sys.argv[1])) as url, psycopg.connect(url) as conn:
    print(os.geteuid(), conn.execute("select 1").fetchone()[0])
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"), reason="becomes nobody with unshare"
)
def test_not_root_the_binaries_run_directly(tmp_path):
    data_dir = tmp_path / "data"
    nobody = ["unshare", "--user", "--map-user=65534", "--map-group=65534", "--"]
    result = subprocess.run(
        [*nobody, sys.executable, "-c", _AS_NOBODY, str(data_dir)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["65534", "1"]
    assert no_server_left(data_dir)


_HOLD = """
import sys, time
from pathlib import Path
from firechunk.db.connect import connect
with connect(None, Path(sys.argv[1])) as conn:
    conn.execute("select 1")
    Path(sys.argv[2]).write_text("holding")
    time.sleep(600)
"""


def _building(data_dir: Path) -> bool:
    return any(data_dir.glob(".postgres-init-*"))


def _starting(data_dir: Path) -> bool:
    return (data_dir / "postgres" / "postmaster.pid").exists()


@pytest.mark.parametrize("moment", ["initdb", "start", "holding"])
def test_a_killed_command_never_keeps_the_server_running(tmp_path, moment):
    data_dir = tmp_path / "data"
    marker = tmp_path / "holding"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(data_dir), str(marker)], cwd=ROOT)
    reached = {
        "initdb": lambda: _building(data_dir),
        "start": lambda: _starting(data_dir),
        "holding": marker.exists,
    }[moment]
    try:
        assert wait_until(lambda: reached() or holder.poll() is not None, seconds=120)
        assert holder.poll() is None, "the holder ended before it could be killed"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    if moment == "holding":
        assert processes_naming(data_dir / "postgres"), "the killed holder's server runs on"

    with connect(None, data_dir) as conn:  # the next command that uses the database
        assert conn.execute("select 1").fetchone() == (1,)

    assert no_server_left(data_dir), processes_naming(data_dir)
    with embedded_server(data_dir):  # once a killed initdb has ended, its directory goes
        pass
    assert not _building(data_dir) and no_server_left(data_dir)


def test_the_server_runs_until_its_last_holder_leaves(tmp_path):
    data_dir = tmp_path / "data"
    with embedded_server(data_dir) as url:
        other = subprocess.run(
            [sys.executable, "-c", _JOIN, str(data_dir)], cwd=ROOT, capture_output=True, text=True
        )
        assert other.returncode == 0, other.stderr
        with psycopg.connect(url) as conn:  # the other command left; this one still holds
            assert conn.execute("select 1").fetchone() == (1,)
    assert no_server_left(data_dir)


_JOIN = """
import sys
from pathlib import Path
from firechunk.db.connect import connect
with connect(None, Path(sys.argv[1])) as conn:
    conn.execute("select 1")
"""


def test_a_server_killed_with_sigkill_starts_again(tmp_path):
    """Its postmaster.pid stays behind, naming a dead process or one not reaped yet."""
    data_dir = tmp_path / "data"
    with embedded_server(data_dir):
        pid = int((data_dir / "postgres" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
    with embedded_server(data_dir) as url, psycopg.connect(url) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
    assert no_server_left(data_dir)


def test_search_on_an_empty_data_directory_makes_no_cluster(tmp_path):
    data_dir = tmp_path / "data"
    result = firechunk("search", "anything", "--data-dir", str(data_dir))
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(
        f"error: nothing has been loaded into the database in {data_dir}/ yet: "
        f"run `firechunk load --data-dir {data_dir}` first"
    )
    assert not (data_dir / "postgres").exists()


@pytest.mark.parametrize("url", ["not-a-url", "host=db.example password=s3cret-pw junk"])
def test_a_database_url_that_is_not_one_is_bad_input(tmp_path, url):
    result = firechunk("search", "anything", "--data-dir", str(tmp_path), "--db", url)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "is not a Postgres URL" in line and "postgresql://user@host:port/db" in line
    assert "s3cret-pw" not in line
    assert not (tmp_path / "postgres").exists()


def test_damaged_database_files_are_one_line_naming_the_cause_and_the_way_out(tmp_path):
    data_dir = tmp_path / "data"
    with embedded_server(data_dir):
        pass
    (data_dir / "postgres" / "global" / "pg_control").unlink()
    result = firechunk("search", "anything", "--data-dir", str(data_dir))
    assert result.returncode == 3
    line = one_line(result.stderr)
    assert line.startswith(f"error: the database files under {data_dir / 'postgres'} are damaged (")
    assert "pg_control" in line
    assert line.endswith(
        "move it aside and run `firechunk load` to rebuild it from the published run"
    )
    assert no_server_left(data_dir)


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A data directory whose one run, the sample's, is published; nothing loaded yet."""
    from firechunk.pipeline import Request, run_pipeline

    data_dir = tmp_path_factory.mktemp("published") / "data"
    night = run_pipeline(Request(replay=SAMPLE, data_dir=data_dir, run_id="sample"))
    outcome, result = night.outcome, night.result
    assert outcome and outcome.success and result is not None and result.published
    return data_dir


def copy_of(data_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(data_dir, tmp_path / "data", symlinks=True))


def test_a_read_only_data_directory_is_bad_input_for_load_and_search(published, tmp_path):
    """Read-only for real: a read-only bind mount as root (whom permission bits do not
    stop), the directories' permission bits otherwise."""
    data_dir = copy_of(published, tmp_path)
    cluster = data_dir / "postgres"
    with embedded_server(data_dir):  # a database for search to read
        pass
    if mounts_unavailable() is None:
        within, cause = functools.partial(read_only, data_dir), "Read-only file system"
    else:
        within, cause = list, "Permission denied"
        for directory in (data_dir, cluster):
            directory.chmod(0o555)
    try:
        for command in (["load"], ["search", "retries"]):
            done = firechunk(*command, "--data-dir", str(data_dir), within=within)
            assert done.returncode == 2, done.stderr
            assert one_line(done.stderr) == (
                f"error: the embedded database directory {cluster} is not writable ({cause}); "
                "make it writable, or give another database with --db or FIRECHUNK_DB_URL"
            )
    finally:
        data_dir.chmod(0o755)
        cluster.chmod(0o700)
    assert no_server_left(data_dir)


def _files_of_1_mb_at_most() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))


def test_a_failed_initdb_says_its_cause_not_its_clean_up(published, tmp_path, model):
    """initdb writes a WAL segment of 16 MB; a command whose files may not pass 1 MB
    (RLIMIT_FSIZE, which its children inherit) sees initdb's bootstrap fail, and initdb's
    last line only says it removed what it made. `model`: the embedder's graph is cached
    already, so the load writes no big file of its own."""
    data_dir = copy_of(published, tmp_path)
    done = firechunk("load", "--data-dir", str(data_dir), preexec_fn=_files_of_1_mb_at_most)
    assert done.returncode == 3, done.stderr
    line = one_line(done.stderr)
    assert line.startswith(
        f"error: could not create the embedded database in {data_dir / 'postgres'}: "
        'could not write to file "pg_wal/xlogtemp.'
    ), line
    assert line.endswith(
        ": File too large; choose another data directory (--data-dir), or pass --db or "
        "FIRECHUNK_DB_URL"
    ), line
    assert not (data_dir / "postgres").exists() and not any(data_dir.glob(".postgres-init-*"))


@pytest.mark.skipif(mounts_unavailable() is not None, reason=str(mounts_unavailable()))
def test_initdb_on_a_full_disk_says_so_and_how_to_free_it(published, tmp_path, model):
    """The data directory on a tmpfs with 2 MB to spare beside its run: initdb needs more."""
    disk = tmp_path / "disk"
    disk.mkdir()
    data_dir = disk / "data"
    size = sum(path.stat().st_size for path in published.rglob("*") if path.is_file())
    copy = 'cp -a "$1" "$2" && shift 2 && exec "$@"'

    def copied_onto_a_small_disk(command: list[str]) -> list[str]:
        copied = ["sh", "-c", copy, "sh", str(published), str(data_dir), *command]
        return on_small_disk(disk, f"{size // 1024 + 2048}k", copied)

    done = firechunk("load", "--data-dir", str(data_dir), within=copied_onto_a_small_disk)
    assert done.returncode == 3, done.stderr
    line = one_line(done.stderr)
    assert line.startswith(f"error: could not create the embedded database in {data_dir}/postgres")
    assert ": No space left on device; free space on its disk and run again, or " in line, line
    assert "removing" not in line


@pytest.mark.skipif(mounts_unavailable() is not None, reason=str(mounts_unavailable()))
def test_a_full_disk_at_start_is_said_as_a_full_disk_not_damaged_files(published, tmp_path):
    """The database's directory on a tmpfs of its own, filled up before search starts it."""
    data_dir = copy_of(published, tmp_path)
    cluster = data_dir / "postgres"
    with embedded_server(data_dir):
        pass
    aside = cluster.rename(tmp_path / "cluster")
    cluster.mkdir(mode=0o700)
    fill = 'cp -a "$1"/. "$2" && { cat /dev/zero > "$2/filler" 2>/dev/null; shift 2; exec "$@"; }'

    def on_full_disk(command: list[str]) -> list[str]:
        filled = ["sh", "-c", fill, "sh", str(aside), str(cluster), *command]
        return on_small_disk(cluster, "64m,mode=0700", filled)

    done = firechunk("search", "retries", "--data-dir", str(data_dir), within=on_full_disk)
    assert done.returncode == 3, done.stderr
    line = one_line(done.stderr)
    assert line.startswith(f"error: the embedded database in {cluster} cannot start: its disk")
    assert "No space left on device" in line and "damaged" not in line, line
    assert line.endswith("free space there, then run again"), line
    assert no_server_left(data_dir)
