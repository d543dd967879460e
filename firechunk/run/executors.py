"""Where batches of pages are chunked: this process, or a pool of processes.

The per-page work (`firechunk.run.outcomes.chunk_pages`) is a plain picklable function
over a batch of pages, so any executor can run it. An `Executor` takes the batches as an
iterator (made as the crawl is read) and yields each batch's outcomes as it finishes, in
any order, with only a few batches taken at a time, so that a run holds a few batches of
markdown whatever the crawl's size; the chunk stage
(`firechunk.run.stages.chunk_stage`) is handed one. Here are this process (`in_process`)
a pool of forked processes (`process_pool`) and a Dask cluster (`dask_cluster`);
`executor_for` picks the one a run's settings name, for every way of running the pipeline.

Every worker process dies with the process that started it (`die_with_parent`), however
that one ends: a worker left behind by a killed run keeps its memory, so an OOM-killed night
would make the next one likelier to run out too. Workers ignore Ctrl-C and SIGTERM
(`ignore_interrupts`): a terminal's Ctrl-C reaches the whole process group, and a worker
that took it would print its own traceback; the command that started them decides, and
kills them when it stops early (`kill_workers`).
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, as_completed, wait
from typing import Any

from firechunk.chunker.page import ChunkerOptions
from firechunk.run.outcomes import PackedOutcome, chunk_pages
from firechunk.run.plan import PageInput
from firechunk.settings import DEFAULT_WORKERS, RunSettings
from firechunk.tokens import Sizer, get_encoding

# Each executor takes the batches, the encoding (a tiktoken encoding's name, or a library
# caller's picklable sizer: `firechunk.ChunkConfig`) and the options.
Executor = Callable[
    [Iterable[list[PageInput]], str | Sizer, ChunkerOptions], Iterable[list[PackedOutcome]]
]

# How many batches a worker of a pool or cluster has at most waiting or running: two, so it
# takes the next the moment it finishes one.
QUEUED_PER_WORKER = 2

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent ends


def die_with_parent(parent: int | None = None) -> None:
    """Have the kernel SIGKILL this process as soon as its parent ends, however it ends
    (SIGKILL and the OOM killer included); call it first thing in a child. Linux only: a
    no-op elsewhere.

    "Parent" is the *thread* that started this process: a child started from a thread
    that ends before the process does is killed early, so children must be started from
    a thread that lives as long as they are needed. `parent` closes the race with a parent
    that died before this call: if this process's parent is no longer `parent`, it was
    orphaned already and is killed now. A kernel that refuses (a sandbox forbidding prctl)
    leaves the process as it was rather than failing the run.
    """
    if not sys.platform.startswith("linux"):
        return
    if ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


_INTERRUPTS = {signal.SIGINT, signal.SIGTERM}


def ignore_interrupts() -> None:
    """In a worker: Ctrl-C and SIGTERM are the command's to handle, not this process's."""
    for number in _INTERRUPTS:
        signal.signal(number, signal.SIG_IGN)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back from this thread while it starts processes: a child
    inherits the mask (through exec too), so it never takes them, not even before it can
    ignore them; this thread takes what came once the block ends."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """SIGKILL the pool's workers: what they were chunking is no longer wanted, and a
    shutdown would wait for each to finish its batch (they ignore gentler signals)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, ValueError):
            process.kill()


@contextlib.contextmanager
def results_of(
    executor: Executor,
    batches: Iterable[list[PageInput]],
    encoding: str | Sizer,
    options: ChunkerOptions,
) -> Iterator[Iterable[list[PackedOutcome]]]:
    """The executor's results, its iteration closed when the block ends early (an error,
    an interrupt): a generator left suspended would keep its workers busy until it is
    garbage-collected, at the latest as the interpreter exits."""
    results = executor(batches, encoding, options)
    try:
        yield results
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()


def _start_worker(parent: int) -> None:
    die_with_parent(parent)
    ignore_interrupts()


def _start_method() -> str:
    """Fork while this process runs one thread (the command): the workers start at once,
    with the tokenizer loaded. Spawn when it runs more (a Prefect flow's event loop and
    log shipping): a fork copies only the calling thread, so a lock another thread held
    would stay held in the worker for ever; a spawned worker pays its imports instead, a
    second or two against the minutes of work that start workers at all."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def in_process(
    batches: Iterable[list[PageInput]], encoding: str | Sizer, options: ChunkerOptions
) -> Iterator[list[PackedOutcome]]:
    """The batches one after another, in this process."""
    return (chunk_pages(batch, encoding, options) for batch in batches)


def process_pool(workers: int) -> Executor:
    """`workers` processes, this one among them: it takes every `workers`-th batch itself
    while `workers - 1` forked processes take the others, so one process fewer is started
    and this one does not sit idle waiting. The workers are forked by the thread that
    iterates the batches, which outlives them (the pool is shut down before it is done)."""

    def run(
        batches: Iterable[list[PageInput]], encoding: str | Sizer, options: ChunkerOptions
    ) -> Iterator[list[PackedOutcome]]:
        rest = iter(batches)
        first = list(itertools.islice(rest, 2))
        batches = itertools.chain(first, rest)
        if workers <= 1 or len(first) <= 1:
            yield from in_process(batches, encoding, options)
            return
        if isinstance(encoding, str):
            get_encoding(encoding)  # loaded once here, inherited by forked workers
        context = multiprocessing.get_context(_start_method())
        with ProcessPoolExecutor(
            workers - 1, mp_context=context, initializer=_start_worker, initargs=(os.getpid(),)
        ) as pool:
            try:
                yield from _shared(pool, batches, workers, encoding, options)
            except BaseException:
                kill_workers(pool)
                raise

    return run


def _shared(
    pool: ProcessPoolExecutor,
    batches: Iterable[list[PageInput]],
    workers: int,
    encoding: str | Sizer,
    options: ChunkerOptions,
) -> Iterator[list[PackedOutcome]]:
    """Every `workers`-th batch chunked in this process, the others by `pool`. The next
    batches are taken only as the pool's queue has room (`QUEUED_PER_WORKER` a worker), and
    this process chunks its own once the pool has that much to do meanwhile."""
    room = QUEUED_PER_WORKER * (workers - 1)
    pending: set[Future[list[PackedOutcome]]] = set()
    mine: list[list[PageInput]] = []
    for number, batch in enumerate(batches):
        if number % workers == 0:
            mine.append(batch)
            continue
        with interrupts_held():  # a worker may be forked as a batch is submitted
            pending.add(pool.submit(chunk_pages, batch, encoding, options))
        if len(pending) < room:
            continue
        for own in mine:
            yield chunk_pages(own, encoding, options)
        mine.clear()
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in finished:
            yield future.result()
    for own in mine:
        yield chunk_pages(own, encoding, options)
    for future in as_completed(pending):
        yield future.result()


def executor_for(settings: RunSettings) -> Executor:
    """The executor `settings.task_runner` names, on `settings.workers` processes (None:
    `DEFAULT_WORKERS`; the chunk stage chunks little work in this process anyway)."""
    if settings.task_runner == "dask":
        return dask_cluster(settings.dask_address, workers_of(settings))
    return process_pool(workers_of(settings))


def workers_of(settings: RunSettings) -> int:
    """The worker processes a run's settings ask for (None: `DEFAULT_WORKERS`)."""
    return DEFAULT_WORKERS if settings.workers is None else settings.workers


DASK_WORKER_PRELOAD = "firechunk.run.dask_worker"


def dask_cluster(address: str | None, workers: int) -> Executor:
    """Batches chunked on the Dask cluster `dask_client` gives, `QUEUED_PER_WORKER` for
    each of `workers` submitted at a time: another as each finishes."""

    def run(
        batches: Iterable[list[PageInput]], encoding: str | Sizer, options: ChunkerOptions
    ) -> Iterator[list[PackedOutcome]]:
        batches = iter(batches)
        first = list(itertools.islice(batches, QUEUED_PER_WORKER * max(1, workers)))
        if not first:
            return
        import distributed

        with dask_client(address, workers) as client:

            def submit(batch: list[PageInput]) -> Any:
                return client.submit(chunk_pages, batch, encoding, options, pure=False)

            running = distributed.as_completed([submit(batch) for batch in first])
            for future in running:
                yield future.result()
                for batch in itertools.islice(batches, 1):
                    running.add(submit(batch))

    return run


@contextlib.contextmanager
def dask_client(address: str | None, workers: int) -> Iterator[Any]:
    """A client of the scheduler at `address` (its workers are whatever that cluster has),
    else of a local cluster of `workers` single-threaded worker processes that lives as
    long as the `with`, each dying with this process (`firechunk.run.dask_worker`)."""
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        if address:
            yield stack.enter_context(Client(address))
            return
        cluster = stack.enter_context(
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address="127.0.0.1:0",  # loopback, any free port
                preload=[DASK_WORKER_PRELOAD],
            )
        )
        yield stack.enter_context(Client(cluster))
