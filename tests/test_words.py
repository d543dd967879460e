"""Counts said with their noun in the right number, and what a run reused said alike by
`firechunk chunk` and the flow's log."""

from __future__ import annotations

from firechunk.words import counted, pages_phrase, reuse_phrase, time_left


def test_one_is_singular_and_every_other_count_plural():
    assert counted(1, "page") == "1 page"
    assert counted(0, "page") == "0 pages"
    assert counted(2, "alias", "aliases") == "2 aliases"


def test_reuse_says_why_nothing_was_reused():
    assert reuse_phrase(11, 0, "run-a", full=False) == "11 reused from run run-a, 0 chunked"
    assert reuse_phrase(0, 11, None, full=False) == "11 chunked (no earlier run to reuse from)"
    assert reuse_phrase(0, 11, "run-a", full=True) == "11 chunked (--full: nothing reused)"


def test_pages_are_counted_by_where_their_chunks_came_from_not_as_to_chunk():
    said = pages_phrase(10, 1, "run-a", full=False)
    assert said == "11 pages: 10 reused from run run-a, 1 chunked"
    assert (
        pages_phrase(0, 1, None, full=False) == "1 page: 1 chunked (no earlier run to reuse from)"
    )


def test_the_time_left_is_the_rate_so_far_applied_to_the_rest():
    assert time_left(10.0, 100, 400) == "about 30 s left"
    assert time_left(60.0, 100, 1100) == "about 10 min left"
    assert time_left(3600.0, 100, 400) == "about 3.0 h left"
    assert time_left(12.4, 400, 400) == "done in 12 s"
    assert time_left(0.0, 0, 400) == "time left unknown"


def test_the_commands_progress_bar_says_the_time_left_in_these_words():
    """`firechunk load`'s bar and the flow's log estimate the time left one way."""
    from rich.progress import ProgressColumn

    from firechunk.commands.console import progress_bar

    bar = progress_bar()
    task_id = bar.add_task("embedding", total=400, completed=100)
    task = bar.tasks[0]
    task.start_time, task.stop_time = 0.0, 10.0  # 10 s so far, a quarter done
    column = bar.columns[-1]
    assert isinstance(column, ProgressColumn)
    assert str(column.render(task)) == time_left(10.0, 100, 400) == "about 30 s left"
    bar.update(task_id, completed=400)
    assert str(column.render(task)) == time_left(10.0, 400, 400) == "done in 10 s"
