"""Counts and phrases the commands and the flow's log say the same way."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 page`, `2 pages`: a count with its noun in the number it takes."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def reuse_phrase(reused: int, chunked: int, baseline: str | None, full: bool) -> str:
    """What became of the pages to chunk: `11 reused from run X, 2 chunked`, or why none
    was reused (a first run has no run to reuse from; --full reuses nothing)."""
    if full:
        return f"{chunked} chunked (--full: nothing reused)"
    if baseline is None:
        return f"{chunked} chunked (no earlier run to reuse from)"
    return f"{reused} reused from run {baseline}, {chunked} chunked"


def pages_phrase(reused: int, chunked: int, baseline: str | None, full: bool) -> str:
    """`11 pages: 10 reused from run X, 1 chunked`: the pages a run needed chunks for, by
    where their chunks came from (not "to chunk": a reused page is not chunked again)."""
    return f"{counted(reused + chunked, 'page')}: {reuse_phrase(reused, chunked, baseline, full)}"


def time_left(elapsed: float, done: int, total: int) -> str:
    """About how long the rest takes at the rate so far ("about 3 min left"): the embedding
    of a first load runs for minutes to hours, at a steady rate per window."""
    if done >= total:
        return f"done in {elapsed:.0f} s"
    if done <= 0 or elapsed <= 0:
        return "time left unknown"
    return f"{about(elapsed / done * (total - done))} left"


def about(seconds: float) -> str:
    """A duration as a person reads an estimate: "about 40 s", "about 12 min", "about 2.5 h"."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"
