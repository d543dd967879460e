"""Chunking speed on the shared corpus, as a multiple of one plain tiktoken encode pass.

Every chunker has to count tokens, so one `encode_ordinary` pass of cl100k over every page's
markdown is the floor no token-aware chunker can beat by much; dividing by it makes figures
comparable across machines. The issue's target: firechunk at most 3x that pass on 1 worker,
and faster than every peer measured in the same run.

Each contender and the tiktoken pass are timed in the same run, interleaved: in every
repetition, each contender is timed right after a fresh tiktoken pass over the same pages,
and its ratio for that repetition is contender seconds / that pass's seconds. The order of
the contenders rotates between repetitions, so no one always runs first. One-off set-up
(imports, loading encoders, building splitters, one warm-up call) is excluded and reported
apart. Chunk counts and exact duplicate chunk texts come from the first repetition.

`--versus-langchain` measures the library's target instead: `firechunk.chunk_markdown`
page by page (as a LangChain pipeline calls it) against LangChain's splitters over the same
pages, per file, in CPU seconds of the process (`time.process_time`: other work on a shared
machine does not count), the two interleaved and taking turns at going first; the figure is
the median of the repetitions' ratios firechunk / LangChain (at most 1.0: the target met).

Run: `make bench`, or `python bench/chunk_speed.py --help` in the venv with the bench extras.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from firechunk.atomic import write_json
from firechunk.crawlfile import read_crawl
from firechunk.schemas.page import CrawlResult
from firechunk.tokens import get_encoding

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
ENCODING = "cl100k_base"
CHUNK_TOKENS = 1000  # the hard limit of firechunk, used as every peer's chunk size
SOFT_TOKENS = 800  # semantic-text-splitter takes a (soft, hard) range


@dataclass
class Group:
    """The pages one measurement runs over: one corpus file, or all of them together."""

    name: str
    crawl: CrawlResult
    texts: list[str]
    tokens: int = 0


@dataclass
class Contender:
    """A chunker under test: `run` is timed, everything else is not."""

    name: str
    run: Callable[[Group], Any]
    chunk_texts: Callable[[Any], list[str]]
    setup_seconds: float = 0.0
    before_each: Callable[[], None] = lambda: None  # e.g. clear a cache left by the last run


@dataclass
class Result:
    name: str
    seconds: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    chunks: int | None = None
    duplicate_texts: int | None = None
    over_limit: int | None = None
    error: str | None = None  # the contender raised; its figures are incomplete

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_ratio(self) -> float:
        return statistics.median(self.ratios)


def log(message: str) -> None:
    """Progress goes to stderr so that stdout holds only the markdown report."""
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------------------


def page_texts(crawl: CrawlResult) -> list[str]:
    # A page whose markdown is not text is one firechunk quarantines: nothing to chunk.
    return [page.markdown if isinstance(page.markdown, str) else "" for page in crawl.data]


def load_groups(corpus: Path, encoding: Any) -> list[Group]:
    """One group per crawl file, preceded by a group of all files together (if several)."""
    files = sorted(corpus.glob("*.json"))
    if not files:
        raise typer.BadParameter(f"no crawl files (*.json) in {corpus}", param_hint="--corpus")
    per_file = []
    for path in files:
        crawl = read_crawl(path)
        per_file.append(Group(path.stem, crawl, page_texts(crawl)))
    pages = [page for group in per_file for page in group.crawl.data]
    together = CrawlResult(completed=len(pages), total=len(pages), data=pages)
    groups = per_file
    if len(per_file) > 1:
        groups = [Group(f"all {len(files)} files", together, page_texts(together)), *per_file]
    for group in groups:
        group.tokens = sum(len(encoding.encode_ordinary(text)) for text in group.texts)
    return groups


# ---------------------------------------------------------------------------------------
# Contenders. Each factory imports its library and builds the chunker (set-up, untimed);
# a missing library raises ImportError and the contender is reported as not available.
# ---------------------------------------------------------------------------------------


def tiktoken_pass(encoding: Any) -> Contender:
    def run(group: Group) -> int:
        return sum(len(encoding.encode_ordinary(text)) for text in group.texts)

    return Contender("tiktoken encode_ordinary, 1 pass", run, lambda _: [])


def firechunk(workers: int) -> Contender:
    from firechunk.run.memory import chunk_crawl

    def run(group: Group) -> Any:
        return chunk_crawl(group.crawl, workers=workers, encoding=ENCODING)

    def chunk_texts(chunk_run: Any) -> list[str]:
        return [chunk.data.text for chunk in chunk_run.chunks]

    return Contender(f"firechunk, {workers} worker{'s' if workers > 1 else ''}", run, chunk_texts)


def langchain(encoding: Any) -> Contender:
    """H1/H2 split, then recursive split by a tiktoken length (their from_tiktoken_encoder
    would download the encoding, so ours is passed in). No overlap: firechunk keeps its
    overlap apart from the chunk text, so overlap would only add work to the peer."""
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    by_header = MarkdownHeaderTextSplitter(headers_to_split_on=[("#", "h1"), ("##", "h2")])
    by_size = RecursiveCharacterTextSplitter(
        chunk_size=CHUNK_TOKENS,
        chunk_overlap=0,
        length_function=lambda text: len(encoding.encode_ordinary(text)),
    )

    def run(group: Group) -> list[str]:
        return [
            document.page_content
            for text in group.texts
            for document in by_size.split_documents(by_header.split_text(text))
        ]

    return Contender("langchain MarkdownHeader + RecursiveCharacter", run, lambda out: out)


def chunk_markdown_per_page() -> Contender:
    """`firechunk.chunk_markdown` on each page, with its URL and title, default config: the
    library call a LangChain or LlamaIndex pipeline makes. A page it rejects costs its time."""
    from firechunk import PageRejected, chunk_markdown

    def run(group: Group) -> list[str]:
        texts = []
        for page, text in zip(group.crawl.data, group.texts, strict=True):
            try:
                chunks = chunk_markdown(text, url=page.url, title=page.metadata.title)
            except PageRejected:
                continue
            texts += [chunk.data.text for chunk in chunks]
        return texts

    return Contender("firechunk chunk_markdown, page by page", run, lambda out: out)


def chonkie(encoding: Any) -> Contender:
    """RecursiveChunker with its default rules (paragraphs, sentences, ...): its markdown
    recipe is fetched from the Hugging Face hub, which this machine cannot reach."""
    from chonkie import RecursiveChunker

    chunker = RecursiveChunker(tokenizer=encoding, chunk_size=CHUNK_TOKENS)

    def run(group: Group) -> list[str]:
        return [chunk.text for text in group.texts for chunk in chunker.chunk(text)]

    def forget_counts() -> None:
        # Token counts are memoised (lru_cache) across calls; a repetition must not reuse
        # the counts of the previous one.
        RecursiveChunker._estimate_token_count.cache_clear()

    return Contender("chonkie RecursiveChunker", run, lambda out: out, before_each=forget_counts)


def semantic_text_splitter() -> Contender:
    """MarkdownSplitter with its own tiktoken (Rust, bundled); one page at a time, as the
    other single-process contenders (its chunk_all may use several threads)."""
    from semantic_text_splitter import MarkdownSplitter

    splitter = MarkdownSplitter.from_tiktoken_model("gpt-3.5-turbo", (SOFT_TOKENS, CHUNK_TOKENS))

    def run(group: Group) -> list[str]:
        return [chunk for text in group.texts for chunk in splitter.chunks(text)]

    return Contender("semantic-text-splitter MarkdownSplitter", run, lambda out: out)


def build_contenders(encoding: Any) -> tuple[list[Contender], dict[str, str]]:
    """Every contender that can be imported, and why the others cannot."""
    factories: list[tuple[str, Callable[[], Contender]]] = [
        ("firechunk, 1 worker", lambda: firechunk(1)),
        ("firechunk, 2 workers", lambda: firechunk(2)),
        ("langchain-text-splitters", lambda: langchain(encoding)),
        ("chonkie", lambda: chonkie(encoding)),
        ("semantic-text-splitter", semantic_text_splitter),
    ]
    contenders, unavailable = [], {}
    for label, factory in factories:
        started = time.perf_counter()
        try:
            contender = factory()
        except ImportError as error:
            unavailable[label] = f"{type(error).__name__}: {error}"
            log(f"{label}: not available ({type(error).__name__}: {error})")
            continue
        contender.setup_seconds = time.perf_counter() - started
        contenders.append(contender)
    return contenders, unavailable


# ---------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------


def timed(
    contender: Contender, group: Group, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, Any]:
    contender.before_each()
    gc.collect()
    started = clock()
    output = contender.run(group)
    return clock() - started, output


def warm_up(contenders: list[Contender], group: Group) -> None:
    """One untimed call on a few pages, so lazy initialisation is not charged to a run."""
    sample = [page for page in group.crawl.data if page.markdown][:3]
    tiny = Group("warm-up", CrawlResult(data=sample), page_texts(CrawlResult(data=sample)))
    for contender in contenders:
        started = time.perf_counter()
        contender.run(tiny)
        contender.setup_seconds += time.perf_counter() - started


def record_chunks(result: Result, texts: list[str], encoding: Any) -> None:
    result.chunks = len(texts)
    result.duplicate_texts = len(texts) - len(set(texts))
    result.over_limit = sum(
        1 for text in texts if len(encoding.encode_ordinary(text)) > CHUNK_TOKENS
    )


def measure(
    group: Group,
    baseline: Contender,
    contenders: list[Contender],
    repeat: int,
    budget: float,
    encoding: Any,
) -> list[Result]:
    """Interleaved repetitions; a contender stops repeating once it has used its budget."""
    base = Result(baseline.name)
    results = {contender.name: Result(contender.name) for contender in contenders}
    if not contenders:  # still show what one tiktoken pass costs
        base.seconds = [timed(baseline, group)[0] for _ in range(repeat)]
        base.ratios = [1.0] * repeat
    for rep in range(repeat):
        shift = rep % len(contenders) if contenders else 0
        for contender in contenders[shift:] + contenders[:shift]:
            result = results[contender.name]
            if result.error or (
                result.seconds and sum(result.seconds) + result.median_seconds > budget
            ):
                continue
            base_seconds, _ = timed(baseline, group)
            try:
                seconds, output = timed(contender, group)
            except Exception as error:  # a broken contender must not hide the others' figures
                result.error = f"{type(error).__name__}: {error}"
                log(f"  {group.name}: {contender.name} failed ({result.error})")
                continue
            base.seconds.append(base_seconds)
            base.ratios.append(1.0)
            result.seconds.append(seconds)
            result.ratios.append(seconds / base_seconds)
            if result.chunks is None:
                record_chunks(result, contender.chunk_texts(output), encoding)
            log(f"  {group.name} rep {rep + 1}: {contender.name} {seconds:.3f} s")
    return [base, *results.values()]


def measure_pair(group: Group, ours: Contender, theirs: Contender, repeat: int) -> list[Result]:
    """CPU seconds of `ours` and `theirs`, back to back in every repetition, first one then
    the other going first; each result's ratios are ours / theirs of the same repetition."""
    results = [Result(ours.name), Result(theirs.name)]
    for rep in range(repeat):
        pair = [(ours, results[0]), (theirs, results[1])]
        for contender, result in pair if rep % 2 == 0 else pair[::-1]:
            seconds, output = timed(contender, group, time.process_time)
            result.seconds.append(seconds)
            if result.chunks is None:
                result.chunks = len(contender.chunk_texts(output))
        ratio = results[0].seconds[-1] / results[1].seconds[-1]
        results[0].ratios.append(ratio)
        results[1].ratios.append(1.0)
        log(f"  {group.name} rep {rep + 1}: {ratio:.2f}")
    return results


def versus_langchain(groups: list[Group], encoding: Any, repeat: int, load_before: float) -> None:
    """Print, per file, chunk_markdown's CPU time against LangChain's (`measure_pair`)."""
    ours, theirs = chunk_markdown_per_page(), langchain(encoding)
    warm_up([ours, theirs], groups[0])
    env = environment()
    print("## `chunk_markdown` against LangChain, CPU time\n")
    print(
        f"Python {env['python']} on {env['cpus']} CPUs; encoding {ENCODING}; chunk size "
        f"{CHUNK_TOKENS} tokens; {repeat} interleaved repetitions; `time.process_time`.\n"
    )
    print(
        "| file | pages | chunk_markdown s | LangChain s | ratio (median) | ratio min–max "
        "| chunks (ours / theirs) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for group in groups:
        log(f"measuring {group.name} ({len(group.texts)} pages)")
        ours_result, theirs_result = measure_pair(group, ours, theirs, repeat)
        print(
            f"| {group.name} | {len(group.texts)} | {ours_result.median_seconds:.3f} "
            f"| {theirs_result.median_seconds:.3f} | **{ours_result.median_ratio:.2f}** "
            f"| {min(ours_result.ratios):.2f}–{max(ours_result.ratios):.2f} "
            f"| {ours_result.chunks:,} / {theirs_result.chunks:,} |",
            flush=True,
        )
    print(f"\n{load_note(load_before, environment())}")


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def cell(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def group_table(group: Group, results: list[Result]) -> str:
    chars = sum(len(text) for text in group.texts)
    lines = [
        f"### {group.name}: {len(group.texts)} pages, {chars:,} characters, "
        f"{group.tokens:,} tokens",
        "",
        "| chunker | reps | median s | × tiktoken pass | min–max × | chunks "
        f"| duplicate chunk texts | chunks > {CHUNK_TOKENS} tokens |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        if result.error:
            reason = " ".join(result.error.replace("|", "/").split())[:200]
            lines.append(f"| {result.name} | failed: {reason} | | | | | | |")
        if not result.seconds:
            continue
        lines.append(
            f"| {result.name} | {len(result.seconds)} | {result.median_seconds:.3f} "
            f"| {result.median_ratio:.2f} | {min(result.ratios):.2f}–{max(result.ratios):.2f} "
            f"| {cell(result.chunks)} | {cell(result.duplicate_texts)} "
            f"| {cell(result.over_limit)} |"
        )
    return "\n".join(lines)


def summary_table(measured: list[tuple[Group, list[Result]]]) -> str:
    names = [result.name for result in measured[0][1] if result.seconds]
    header = "| chunker | " + " | ".join(group.name for group, _ in measured) + " |"
    lines = [
        "### Median time as a multiple of one tiktoken pass",
        "",
        header,
        "|---|" + "---:|" * len(measured),
    ]
    for name in names:
        ratios = []
        for _, results in measured:
            result = next(r for r in results if r.name == name)
            ratios.append(f"{result.median_ratio:.2f}" if result.seconds else "")
        lines.append(f"| {name} | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def load_note(load_before: float, env: dict[str, Any]) -> str:
    """Ratios are taken side by side, but a busy machine still skews them: say how busy."""
    return (
        f"Load average (1 min) before / after the run: {load_before:.2f} / "
        f"{env['load_average_1min']:.2f} on {env['cpus']} CPUs. Above the CPU count, other "
        "work shared the CPUs: ratios are noisier, and a second worker may find no idle CPU "
        "to win time on.\n"
    )


def print_report(
    measured: list[tuple[Group, list[Result]]],
    contenders: list[Contender],
    unavailable: dict[str, str],
    repeat: int,
    load_before: float,
) -> None:
    env = environment()
    print("## Chunking speed\n")
    print(
        f"Python {env['python']} on {env['cpus']} CPUs ({env['machine']}); encoding {ENCODING}; "
        f"chunk size {CHUNK_TOKENS} tokens for every chunker; up to {repeat} interleaved "
        "repetitions, each contender timed right after its own tiktoken pass "
        "(`encode_ordinary` over every page's markdown).\n"
    )
    print(load_note(load_before, env))
    setup = ", ".join(f"{c.name} {c.setup_seconds:.2f} s" for c in contenders)
    print(
        "Excluded from the timings (one-off set-up: imports, encoders, building the splitter, "
        f"one warm-up call): {setup}.\n"
    )
    for label, reason in unavailable.items():
        print(f"- {label}: not available ({reason})")
    if unavailable:
        print()
    print(summary_table(measured) + "\n")
    for group, results in measured:
        print(group_table(group, results) + "\n")


def figures(
    measured: list[tuple[Group, list[Result]]],
    contenders: list[Contender],
    unavailable: dict[str, str],
    load_before: float,
) -> dict[str, Any]:
    return {
        "environment": environment(),
        "load_average_1min_before": round(load_before, 2),
        "encoding": ENCODING,
        "chunk_tokens": CHUNK_TOKENS,
        "setup_seconds_excluded": {c.name: round(c.setup_seconds, 4) for c in contenders},
        "unavailable": unavailable,
        "groups": [
            {
                "name": group.name,
                "pages": len(group.texts),
                "characters": sum(len(text) for text in group.texts),
                "tokens": group.tokens,
                "results": [
                    {
                        "chunker": r.name,
                        "seconds": [round(s, 5) for s in r.seconds],
                        "median_seconds": round(r.median_seconds, 5) if r.seconds else None,
                        "ratios": [round(x, 4) for x in r.ratios],
                        "median_ratio": round(r.median_ratio, 4) if r.seconds else None,
                        "chunks": r.chunks,
                        "duplicate_texts": r.duplicate_texts,
                        "over_limit": r.over_limit,
                        "error": r.error,
                    }
                    for r in results
                    if r.seconds or r.error
                ],
            }
            for group, results in measured
        ],
    }


def main(
    corpus: Annotated[Path, typer.Option(help="Folder of crawl files (*.json).")] = DEFAULT_CORPUS,
    repeat: Annotated[int, typer.Option(min=1, help="Repetitions per contender and group.")] = 5,
    budget: Annotated[
        float, typer.Option(help="Seconds a contender may spend per group; slow ones repeat less.")
    ] = 60.0,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also save the figures here.")
    ] = None,
    versus: Annotated[
        bool,
        typer.Option(
            "--versus-langchain", help="chunk_markdown page by page against LangChain, per file."
        ),
    ] = False,
) -> None:
    """Time firechunk and its peers against one plain tiktoken pass over the same pages."""
    load_before = os.getloadavg()[0]
    encoding = get_encoding(ENCODING)
    if not corpus.is_dir():
        raise typer.BadParameter(f"{corpus} is not a folder", param_hint="--corpus")
    groups = load_groups(corpus, encoding)
    if versus:
        per_file = [group for group in groups if not group.name.startswith("all ")]
        versus_langchain(per_file, encoding, repeat, load_before)
        return
    baseline = tiktoken_pass(encoding)
    contenders, unavailable = build_contenders(encoding)
    warm_up([baseline, *contenders], groups[0])
    measured = []
    for group in groups:
        log(f"measuring {group.name} ({len(group.texts)} pages)")
        results = measure(group, baseline, contenders, repeat, budget, encoding)
        measured.append((group, results))
    print_report(measured, contenders, unavailable, repeat, load_before)
    if json_path is not None:
        write_json(json_path, figures(measured, contenders, unavailable, load_before))
        log(f"figures saved to {json_path}")


if __name__ == "__main__":
    typer.run(main)
