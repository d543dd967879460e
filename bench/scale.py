"""A 5,000-page rebuild, then the same crawl with 1 % of its pages changed: time and memory.

    python bench/scale.py [--pages 5000] [--changed 0.01] [--workers 2]
                          [--api temporary|server|both] [--json PATH]

The replay is built in a temporary directory from the distinct pages of every crawl file in
`../shared/corpus/` (relative to the repository root), cycled until there are `--pages`
pages. Each copy is perturbed so that no two pages, and no two chunks, are the same: it
gets a URL of its own and a word of its own (made of syllables, e.g. `kalomipe`) at the
start of every line that has letters in it, headings, paragraphs, list items, table rows
and code alike. Nothing of the corpus is written into the repository.

Then the real rebuild runs twice, each time in a subprocess of its own that calls the
`rebuild` flow as `firechunk rebuild --replay ...` does (same flow, same parameters,
Prefect's temporary local API, a pool of `--workers` processes), on one data directory:

1. full: the 5,000 pages, with no earlier run (every page is chunked);
2. incremental: the same crawl with `--changed` of its pages changed (of those, 80 %
   edited: a sentence added to a paragraph; 10 % removed; 10 % added as new pages);
3. unchanged: the second crawl again, so nothing changed: the least an incremental
   rebuild of these 5,000 pages can do;
4. sample: the bundled sample (a dozen pages) again, on the data directory of the
   warm-up's rebuild of it, so nothing changed there either: what an incremental rebuild
   costs whatever the crawl's size (interpreter, imports, Prefect's flow and task runs,
   Great Expectations, publishing), the floor under every incremental run.

Before them, one untimed rebuild of the bundled sample starts Prefect's API once, so the
first timed run does not pay for creating Prefect's database (and gives run 4 its
baseline).

`--api server` runs the same rebuilds against a `prefect server` that the bench starts
once on 127.0.0.1 (a free port, a PREFECT_HOME and database of its own) and stops at the
end, as the nightly deployment has a long-running server: each rebuild subprocess gets
PREFECT_API_URL and starts no API of its own, and the server is not part of the measured
process tree. `--api both` runs the temporary-API pair, then the server pair, each on a
data directory of its own, and prints a table for each.

For each run it prints the wall time of the whole subprocess (interpreter start to exit),
split into the flow run itself and the rest (imports, starting and stopping Prefect's
temporary API, which a deployment's long-running server does not pay); pages per second
(pages in the crawl / wall time); and the peak memory of the process tree: the subprocess,
its Prefect API server and its chunking workers, sampled every 0.1 s with psutil. The
tree's figure sums the resident sets of all its processes, which counts memory that forked
processes share more than once: an upper bound. The largest single process is shown too.
Targets (issue 6): the full rebuild within 180 s, peak memory at most 1.5 GB, the
incremental rebuild at most 10 % of the full rebuild's time (shown for the whole
subprocess and for the flow run).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from firechunk.atomic import write_json
from firechunk.layout import DataDir

ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIR = ROOT.parent / "shared" / "corpus"
SAMPLE_CRAWL = ROOT / "data" / "sample" / "crawl.json"
TARGET_FULL_SECONDS = 180.0
TARGET_PEAK_BYTES = 1.5 * 1024**3
TARGET_RATIO = 0.10

_SYLLABLES = ["ka", "lo", "mi", "nu", "pe", "ri", "so", "tu", "va", "ze", "bo", "di", "fa", "gu"]
_LETTER = re.compile(r"[A-Za-z]")
# Markup a word must go after, so headings stay headings and list items stay items.
_LINE_START = re.compile(r"^(\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*|\|\s*)*)")


def main() -> int:
    args = parse_args()
    if args.child:
        return child(args)
    files = corpus_files()
    if not files:
        return 0
    apis = ["temporary", "server"] if args.api == "both" else [args.api]
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as scratch:
        work = Path(scratch)
        templates = distinct_pages(files)
        full_crawl, changed_crawl, changes = build_replays(templates, args, work)
        print(
            f"{len(templates)} distinct corpus pages -> {args.pages} pages "
            f"({full_crawl.stat().st_size / 1e6:.1f} MB of crawl JSON); second crawl: "
            f"{changes['edited']} edited, {changes['removed']} removed, "
            f"{changes['added']} added",
            flush=True,
        )
        for api in apis:
            with prefect_api(api, work / api) as env:
                data_dir = work / api / "data"
                print(f"untimed warm-up ({api} API): a rebuild of the sample ...", flush=True)
                rebuild(SAMPLE_CRAWL, work / api / "warm-up", "warm-up", args.workers, env)
                measured = [
                    measure("full", full_crawl, data_dir, args.workers, env, api),
                    measure("incremental", changed_crawl, data_dir, args.workers, env, api),
                ]
                check_changes(data_dir, changes)
                measured += [
                    measure("unchanged", changed_crawl, data_dir, args.workers, env, api),
                    measure("sample", SAMPLE_CRAWL, work / api / "warm-up", args.workers, env, api),
                ]
                if measured[2]["upsert"] or measured[2]["delete"]:
                    raise SystemExit("the unchanged crawl's change set is not empty")
            runs += measured
    imports = {module: import_seconds(module) for module in FIXED_IMPORTS}
    for api in apis:
        print_table([run for run in runs if run["api"] == api], args, api)
        print_fixed_costs(imports, [run for run in runs if run["api"] == api])
    if args.json:
        write_json(args.json, runs)
    return 0


def corpus_files() -> list[Path]:
    """The shared corpus's crawl files; none (said on stdout) when it is not there."""
    files = sorted(CORPUS_DIR.glob("*.json")) if CORPUS_DIR.is_dir() else []
    if not files:
        print(f"skipped: no shared corpus at {CORPUS_DIR} (it sits beside the repository)")
    return files


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--changed", type=float, default=0.01, help="share of pages changed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--api",
        choices=["temporary", "server", "both"],
        default="temporary",
        help="Prefect's temporary API per rebuild (as `firechunk rebuild`), a `prefect server` "
        "started once (as the nightly deployment has), or both in turn",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    # Internal: one measured rebuild, in its own process (see `child`).
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    return parser.parse_args()


# --- the replay ----------------------------------------------------------------------------


def distinct_pages(files: list[Path]) -> list[dict]:
    """Every page of the corpus whose markdown differs from all before it."""
    seen: set[str] = set()
    pages = []
    for path in files:
        for page in json.loads(path.read_text(encoding="utf-8"))["data"]:
            markdown = page.get("markdown")
            if not isinstance(markdown, str) or not markdown.strip():
                continue
            digest = hashlib.sha256(markdown.encode("utf-8")).hexdigest()
            if digest not in seen:
                seen.add(digest)
                pages.append(page)
    return pages


def word(number: int) -> str:
    """A made-up word for each number, e.g. 0 -> 'kakakaka', 1 -> 'lokakaka'."""
    letters = ""
    for _ in range(4):
        letters += _SYLLABLES[number % len(_SYLLABLES)]
        number //= len(_SYLLABLES)
    return letters


def _line_start(line: str) -> str:
    """The markers a line starts with (heading, list item, quote, table row); maybe none."""
    match = _LINE_START.match(line)
    return match.group(0) if match else ""


def variant(templates: list[dict], number: int) -> dict:
    """Page `number` of the replay: a corpus page with a URL and a word of its own."""
    template = templates[number % len(templates)]
    own = word(number)
    metadata = dict(template["metadata"])
    url = f"{metadata.get('sourceURL') or metadata.get('url')}".rstrip("/") + f"/{own}"
    metadata.update(sourceURL=url, url=url, title=f"{own} {metadata.get('title') or ''}")
    lines = []
    for line in template["markdown"].split("\n"):
        if _LETTER.search(line) and not line.lstrip().startswith(("```", "~~~")):
            cut = len(_line_start(line))
            line = f"{line[:cut]}{own} {line[cut:]}"
        lines.append(line)
    return {"markdown": "\n".join(lines), "metadata": metadata}


def edit(page: dict) -> dict:
    """A changed page: one sentence added to its first paragraph (a paragraph of its own at
    the end when every line is a heading, list item, quote or table row)."""
    lines = page["markdown"].split("\n")
    sentence = (
        f"This paragraph about {page['metadata']['title'].split()[0]} was revised last night."
    )
    for n, line in enumerate(lines):
        if _LETTER.search(line) and not _line_start(line).strip():
            lines[n] = f"{line} {sentence}"
            break
    else:
        lines += ["", sentence]
    return {**page, "markdown": "\n".join(lines)}


def build_replays(templates: list[dict], args: argparse.Namespace, work: Path):
    pages = [variant(templates, n) for n in range(args.pages)]
    full = write_crawl(work / "crawl-full.json", pages)
    changed_count = max(1, round(args.pages * args.changed))
    removed = changed_count // 10  # 5 of 50 at 5,000 pages; none when only one changes
    added = removed
    edited = changed_count - removed - added
    picks = random.Random(6).sample(range(args.pages), edited + removed)
    to_edit, to_remove = set(picks[:edited]), set(picks[edited:])
    second = [edit(page) if n in to_edit else page for n, page in enumerate(pages)]
    second = [page for n, page in enumerate(second) if n not in to_remove]
    second += [variant(templates, args.pages + n) for n in range(added)]
    changed = write_crawl(work / "crawl-changed.json", second)
    return full, changed, {"edited": edited, "removed": removed, "added": added}


def write_crawl(path: Path, pages: list[dict]) -> Path:
    crawl = {
        "success": True,
        "status": "completed",
        "completed": len(pages),
        "total": len(pages),
        "data": pages,
    }
    path.write_text(json.dumps(crawl, ensure_ascii=False), encoding="utf-8")
    return path


# --- running and measuring -----------------------------------------------------------------


def child_env(prefect_home: Path) -> dict[str, str]:
    """A Prefect home of the bench's own and no inherited settings: each rebuild starts
    Prefect's temporary local API, as `firechunk rebuild` does on a fresh machine, unless
    `prefect_api` adds a server's URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(prefect_home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
        PREFECT_LOGGING_LEVEL="WARNING",
    )
    return env


@contextlib.contextmanager
def prefect_api(api: str, home: Path) -> Iterator[dict[str, str]]:
    """The environment the rebuilds run in: with `api` "server", a `prefect server` this
    bench starts on loopback (its own PREFECT_HOME and database) and stops afterwards."""
    home.mkdir(parents=True)
    env = child_env(home / "prefect-home")
    if api == "temporary":
        yield env
        return
    sys.path.insert(0, str(ROOT))  # the tests' helper starts the server as the tests do
    from tests.prefect_helpers import prefect_server

    print("starting `prefect server` on loopback ...", flush=True)
    with prefect_server(env, home, home / "server.log") as api_url:
        yield {**env, "PREFECT_API_URL": api_url}


def rebuild(crawl: Path, data_dir: Path, run_id: str, workers: int, env: dict) -> None:
    """An untimed rebuild in a subprocess (the warm-up)."""
    finished = subprocess.run(
        child_command(crawl, data_dir, run_id, workers),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if finished.returncode != 0:
        raise SystemExit(f"rebuild {run_id} failed ({finished.returncode}):\n{finished.stdout}")


def child_command(crawl: Path, data_dir: Path, run_id: str, workers: int) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(crawl)]
    return command + ["--data-dir", str(data_dir), "--run-id", run_id, "--workers", str(workers)]


def child(args: argparse.Namespace) -> int:
    """One rebuild, as `firechunk rebuild --replay` runs it; prints its phases as JSON."""
    started = time.perf_counter()
    sys.path.insert(0, str(ROOT))  # this checkout's flows, whatever is installed
    from prefect.client.orchestration import get_client

    from firechunk.flows.rebuild import rebuild as rebuild_flow
    from firechunk.schemas.publish import PublishResult
    from firechunk.settings import RunSettings

    imported = time.perf_counter()
    with get_client(sync_client=True) as client:  # starts the temporary API, as the flow would
        client.hello()
    api_ready = time.perf_counter()
    result = rebuild_flow(
        replay=args.child,
        data_dir=args.data_dir,
        run=RunSettings(workers=args.workers),
        run_id=args.run_id,
    )
    done = time.perf_counter()
    phases = {
        "imports": imported - started,
        "api_start": api_ready - imported,
        "flow": done - api_ready,
        "published": isinstance(result, PublishResult) and result.published,
    }
    print("PHASES " + json.dumps(phases), flush=True)
    return 0


def measure(label: str, crawl: Path, data_dir: Path, workers: int, env: dict, api: str):
    import psutil

    started = time.perf_counter()
    process = subprocess.Popen(
        child_command(crawl, data_dir, label, workers),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peaks = {"tree": 0, "largest": 0}
    done = threading.Event()

    def sample() -> None:
        parent = psutil.Process(process.pid)
        while not done.is_set():
            try:
                tree = [parent, *parent.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            sizes = []
            for member in tree:
                with contextlib.suppress(psutil.NoSuchProcess):  # it ended meanwhile
                    sizes.append(member.memory_info().rss)
            peaks["tree"] = max(peaks["tree"], sum(sizes))
            peaks["largest"] = max(peaks["largest"], max(sizes, default=0))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    phases = [line for line in output.splitlines() if line.startswith("PHASES ")]
    if process.returncode != 0 or not phases:
        raise SystemExit(f"{label} rebuild failed ({process.returncode}):\n{output[-3000:]}")
    phases = json.loads(phases[-1].removeprefix("PHASES "))
    run = DataDir(data_dir).run(label)
    report = json.loads(run.report_json.read_text(encoding="utf-8"))
    changes = json.loads(run.changes_json.read_text(encoding="utf-8"))
    summary = json.loads(run.validation_summary.read_text(encoding="utf-8"))
    figures = {
        "run": label,
        "api": api,
        "pages": report["pages_in"],
        "seconds": round(seconds, 2),
        "other_seconds": round(seconds - phases["flow"], 2),
        "api_start_seconds": round(phases["api_start"], 2),
        "flow_seconds": round(phases["flow"], 2),
        "pages_per_second": round(report["pages_in"] / seconds, 1),
        "peak_tree_bytes": peaks["tree"],
        "peak_largest_process_bytes": peaks["largest"],
        "chunk_and_write_seconds": report["seconds"],
        "validation_seconds": summary["seconds"],
        "pages_rechunked": changes["pages_rechunked"],
        "pages_reused": changes["pages_reused"],
        "chunks": report["chunks_out"],
        "duplicate_chunks_dropped": report["duplicate_chunks_dropped"],
        "upsert": len(changes["upsert"]),
        "delete": len(changes["delete"]),
        "published": phases["published"],
    }
    print(
        f"{label} ({api} API): {seconds:.1f} s, {figures['pages_rechunked']} pages chunked, "
        f"{figures['pages_reused']} reused",
        flush=True,
    )
    return figures


# What every rebuild imports in its fresh process, whatever the crawl's size: the flow
# (Prefect, the chunker, pyarrow) and Great Expectations (in its helper or after chunking).
FIXED_IMPORTS = ("firechunk.flows.rebuild", "great_expectations")


def import_seconds(module: str, repeat: int = 3) -> float:
    """Median wall time of a fresh interpreter that imports `module` and exits."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def print_fixed_costs(imports: dict[str, float], runs: list[dict]) -> None:
    """The imports every run pays, against the full rebuild's time."""
    full = runs[0]
    for module, seconds in imports.items():
        print(
            f"fixed: a fresh interpreter importing {module}: {seconds:.1f} s "
            f"({seconds / full['seconds']:.1%} of the full rebuild's wall time, "
            f"{seconds / full['flow_seconds']:.1%} of its flow run)"
        )


def check_changes(data_dir: Path, expected: dict) -> None:
    """The incremental run's change set names exactly the pages the bench changed."""
    changes = json.loads(DataDir(data_dir).run("incremental").changes_json.read_text())
    found = {key: len(changes[f"pages_{key}"]) for key in ("changed", "removed", "added")}
    wanted = {"changed": expected["edited"], "removed": expected["removed"]}
    wanted["added"] = expected["added"]
    if found != wanted or changes["baseline"] != "full":
        raise SystemExit(f"changes.json does not match the changes made: {found} != {wanted}")


def print_table(runs: list[dict], args: argparse.Namespace, api: str) -> None:
    full, incremental, *_ = runs
    mb = 1024**2
    print()
    where = {"temporary": "Prefect's temporary API", "server": "a running `prefect server`"}
    print(
        f"rebuild of {args.pages} pages, {args.workers} workers, {os.cpu_count()} CPUs, "
        f"on {where[api]}"
    )
    header = f"{'':13}{'wall s':>8}{'flow s':>8}{'rest s':>8}{'pages/s':>9}"
    header += f"{'peak tree MB':>13}{'largest MB':>11}{'chunked':>8}{'reused':>7}"
    header += f"{'chunks':>7}{'upsert':>7}{'delete':>7}"
    print(header)
    for run in runs:
        print(
            f"{run['run']:13}{run['seconds']:8.1f}{run['flow_seconds']:8.1f}"
            f"{run['other_seconds']:8.1f}{run['pages_per_second']:9.1f}"
            f"{run['peak_tree_bytes'] / mb:13.0f}{run['peak_largest_process_bytes'] / mb:11.0f}"
            f"{run['pages_rechunked']:8}{run['pages_reused']:7}{run['chunks']:7}"
            f"{run['upsert']:7}{run['delete']:7}"
        )
    for run in runs:
        print(
            f"  {run['run']}: rest = imports, {run['api_start_seconds']:.1f} s to start "
            f"or reach the API, the process's exit; in the flow: chunk + write "
            f"{run['chunk_and_write_seconds']:.1f} s, "
            f"validation {run['validation_seconds']:.1f} s; "
            f"{run['duplicate_chunks_dropped']} duplicate chunks dropped; "
            f"published: {'yes' if run['published'] else 'NO'}"
        )
    for run in runs[1:]:
        print(
            f"{run['run']} / full: {run['seconds'] / full['seconds']:.1%} of the wall time, "
            f"{run['flow_seconds'] / full['flow_seconds']:.1%} of the flow run"
        )
    wall_ratio = incremental["seconds"] / full["seconds"]
    flow_ratio = incremental["flow_seconds"] / full["flow_seconds"]
    peak = max(run["peak_tree_bytes"] for run in runs)
    print()
    verdicts = [
        (
            f"full rebuild within {TARGET_FULL_SECONDS:.0f} s (wall)",
            full["seconds"] <= TARGET_FULL_SECONDS,
        ),
        (
            f"peak memory (tree) at most {TARGET_PEAK_BYTES / 1024**3:.1f} GB",
            peak <= TARGET_PEAK_BYTES,
        ),
        (f"incremental at most {TARGET_RATIO:.0%} of full, wall", wall_ratio <= TARGET_RATIO),
        (f"incremental at most {TARGET_RATIO:.0%} of full, flow run", flow_ratio <= TARGET_RATIO),
    ]
    for text, met in verdicts:
        print(f"target: {text}: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
