"""How long `firechunk --version`, `firechunk --help` and one `firechunk search` take from
process start: what a person waits for at the prompt, imports and start-up included.
With `--crawl FILE`, also `firechunk chunk FILE` and `firechunk rebuild --replay FILE`,
each into a fresh data directory (a full run, nothing reused), and the chunk stage's own
seconds (`report.json`) of the chunk runs: the fixed cost of a command is what it takes
beyond that stage.

    python bench/startup.py [--runs 7] [--data-dir data/demo] [--question "..."]
    python bench/startup.py --tree before=/tmp/fc-before --tree after=.   # side by side
    python bench/startup.py --crawl ../shared/corpus/supabase-guides-2026.json

Each command is a fresh process of the venv's `firechunk` script, timed from spawn to exit
with its output thrown away; the table shows the median and the range of `--runs` runs,
and the median CPU time, which a busy machine moves less.
The commands, and the trees with `--tree`, take turns run after run, so a machine whose
load changes meanwhile slows every column alike. A tree is a source checkout (e.g. a `git
archive` of another commit) put first on PYTHONPATH; without `--tree` the installed
firechunk is timed. `search` needs a loaded database: `make demo` leaves one in data/demo.
A command that fails stops the benchmark with its stderr.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "what happens to a message that keeps failing"
INSTALLED = "installed"
FRESH = "<fresh data dir>"  # replaced by a new empty directory at each run


@dataclass(frozen=True)
class Case:
    """One command line of one tree."""

    command: str
    tree: str
    argv: tuple[str, ...]
    env: dict[str, str]


def firechunk_script() -> Path:
    """The `firechunk` script beside this Python (the venv's), the one a user runs."""
    script = Path(sys.executable).parent / "firechunk"
    if not script.exists():
        raise typer.BadParameter(f"{script} does not exist: run this with the venv's Python")
    return script


def tree_env(directory: Path | None) -> dict[str, str]:
    """The environment of a run: the tree's sources first on the import path."""
    env = dict(os.environ)
    if directory is not None:
        env["PYTHONPATH"] = str(directory.resolve())
    return env


def cases(
    trees: dict[str, Path | None], data_dir: Path, question: str, crawl: Path | None
) -> list[Case]:
    script = str(firechunk_script())
    search = ("search", question, "--data-dir", str(data_dir.resolve()), "-k", "3")
    commands = {"--version": ("--version",), "--help": ("--help",), "search": search}
    if crawl is not None:
        commands["chunk"] = ("chunk", str(crawl.resolve()), "--data-dir", FRESH)
        commands["rebuild"] = ("rebuild", "--replay", str(crawl.resolve()), "--data-dir", FRESH)
    return [
        Case(name, tree, (script, *args), tree_env(directory))
        for name, args in commands.items()
        for tree, directory in trees.items()
    ]


def timed(case: Case) -> tuple[float, float, float | None]:
    """Seconds from spawn to exit, the CPU seconds the process (and the children it waited
    for) used, and for a run into a fresh data directory its chunk stage's seconds; a
    failure stops the benchmark, saying why."""
    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        data = Path(scratch) / "data"
        argv = [str(data) if arg == FRESH else arg for arg in case.argv]
        cpu_before = _children_cpu()
        start = time.perf_counter()
        done = subprocess.run(
            argv, env=case.env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        seconds = time.perf_counter() - start
        cpu = _children_cpu() - cpu_before
        if done.returncode != 0:
            stderr = done.stderr.decode(errors="replace").strip()
            raise SystemExit(
                f"{case.tree}: firechunk {case.command} exited {done.returncode}: {stderr}"
            )
        report = data / "latest" / "report.json"
        stage = json.loads(report.read_text())["seconds"] if report.exists() else None
    return seconds, cpu, stage


def _children_cpu() -> float:
    """User and system seconds of the children waited for so far. Less moved by other
    work on the machine than the wall time: a busy machine makes a command wait for a
    core, not use more of one (the embedded Postgres is not counted: it is not a child)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# (command, tree) -> (wall, cpu, chunk stage) of each run
Times = dict[tuple[str, str], list[tuple[float, float, float | None]]]


def measure(all_cases: list[Case], runs: int) -> Times:
    """Every case once per round, `runs` rounds, after one untimed round (cold caches)."""
    for case in all_cases:
        timed(case)
    times: Times = {(case.command, case.tree): [] for case in all_cases}
    for _ in range(runs):
        for case in all_cases:
            times[case.command, case.tree].append(timed(case))
    return times


def table(times: Times, trees: list[str]) -> str:
    """Rows by command, a column per tree: median seconds, [fastest-slowest], median CPU."""
    width = 34
    lines = [f"{'command':<12}" + "".join(f"{tree:>{width}}" for tree in trees)]
    for command in dict.fromkeys(command for command, _ in times):
        cells = []
        for tree in trees:
            wall = [seconds for seconds, _, _ in times[command, tree]]
            cpu = statistics.median(used for _, used, _ in times[command, tree])
            cell = (
                f"{statistics.median(wall):.2f} s [{min(wall):.2f}-{max(wall):.2f}] cpu {cpu:.2f} s"
            )
            cells.append(f"{cell:>{width}}")
        lines.append(f"{command:<12}" + "".join(cells))
    return "\n".join(lines)


def _stage_seconds(run: tuple[float, float, float | None]) -> float:
    """A `chunk` run's chunk stage seconds: every one writes a report that has them."""
    if run[2] is None:
        raise SystemExit("firechunk chunk wrote no report.json")
    return run[2]


def fixed_cost(times: Times, trees: list[str]) -> str:
    """Per tree: the chunk stage's median seconds, `chunk` against 3 x that stage + 4 s, and
    `rebuild` over `chunk`, the median of each round's own ratio (both ran in that round)."""
    lines = []
    for tree in trees:
        chunk, rebuild = times[("chunk", tree)], times[("rebuild", tree)]
        stage = statistics.median(_stage_seconds(run) for run in chunk)
        budget = 3 * stage + 4
        ratio = statistics.median(r[0] / c[0] for r, c in zip(rebuild, chunk, strict=True))
        lines.append(
            f"{tree}: chunk stage {stage:.2f} s; chunk {statistics.median(c[0] for c in chunk):.2f}"
            f" s against 3 x stage + 4 s = {budget:.2f} s; rebuild / chunk {ratio:.2f}"
        )
    return "\n".join(lines)


def parse_trees(specs: list[str] | None) -> dict[str, Path | None]:
    if not specs:
        return {INSTALLED: None}
    trees: dict[str, Path | None] = {}
    for spec in specs:
        name, sep, directory = spec.partition("=")
        if not sep or not (Path(directory) / "firechunk" / "cli.py").exists():
            raise typer.BadParameter(f"{spec!r}: expected NAME=DIR, DIR a firechunk checkout")
        trees[name] = Path(directory)
    return trees


def main(
    runs: Annotated[int, typer.Option(min=1, help="Timed runs of each command.")] = 7,
    data_dir: Annotated[Path, typer.Option(help="A data directory with a loaded database.")] = ROOT
    / "data"
    / "demo",
    question: Annotated[str, typer.Option(help="What `search` asks.")] = QUESTION,
    tree: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME=DIR", help="A source checkout to time; repeatable."),
    ] = None,
    crawl: Annotated[
        Path | None,
        typer.Option(exists=True, help="Also time `chunk` and `rebuild --replay` of this crawl."),
    ] = None,
) -> None:
    """Median start-to-exit time of `firechunk --version`, `--help` and `search` (and of
    `chunk` and `rebuild` with `--crawl`)."""
    trees = parse_trees(tree)
    load_before = os.getloadavg()[0]
    times = measure(cases(trees, data_dir, question, crawl), runs)
    typer.echo(
        f"median of {runs} runs, from process start to exit [fastest-slowest], and median "
        f"CPU time; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, "
        f"on {os.cpu_count()} cores"
    )
    typer.echo(table(times, list(trees)))
    if crawl is not None:
        typer.echo(fixed_cost(times, list(trees)))


if __name__ == "__main__":
    typer.run(main)
