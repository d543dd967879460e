"""Pass 3 (rule 2): small fragments merged within their H1 section, headings stacked onto
the content that follows, no header-only chunk, and H1 intro content as its own chunk."""

from __future__ import annotations

import pytest

from firechunk.chunker.blocks import HEADING, parse_blocks
from firechunk.chunker.boundaries import (
    attach_lone_headings,
    cut_as_text,
    enforce_hard_limit,
    merge_small,
)
from firechunk.chunker.split import Limits, Unit
from tests.chunk_helpers import chunk_one, code_lines, count, sentences
from tests.test_properties import Page, assert_invariants

LIMITS = Limits()


def unit(tokens: int, ordinal: int = 0, *, headings_only: bool = False, name: str = "") -> Unit:
    """A unit standing for `tokens` tokens of text (the text is only a label here)."""
    return Unit(name or f"u{tokens}", tokens, 0, 1, (), ordinal, headings_only=headings_only)


def names(groups: list[list[Unit]]) -> list[list[str]]:
    return [[u.text for u in group] for group in groups]


def is_header_only(text: str) -> bool:
    return all(block.kind == HEADING for block in parse_blocks(text.split("\n")))


# -- merge_small ----------------------------------------------------------------------


def test_a_fragment_merges_with_the_smaller_neighbour():
    groups = [[unit(500, name="big")], [unit(30, name="small")], [unit(200, name="mid")]]
    assert names(merge_small(groups, LIMITS)) == [["big"], ["small", "mid"]]


def test_a_fragment_never_merges_across_h1_sections():
    groups = [[unit(300, 0, name="a")], [unit(30, 1, name="b")], [unit(300, 2, name="c")]]
    assert names(merge_small(groups, LIMITS)) == [["a"], ["b"], ["c"]]


def test_a_merge_may_not_pass_the_hard_limit():
    groups = [[unit(980, name="full")], [unit(30, name="small")]]
    assert names(merge_small(groups, LIMITS)) == [["full"], ["small"]]


def test_merged_fragments_keep_merging_until_they_are_big_enough():
    groups = [[unit(20, name=f"f{i}")] for i in range(6)]
    merged = merge_small(groups, LIMITS)
    assert len(merged) == 1
    assert [u.text for u in merged[0]] == [f"f{i}" for i in range(6)]  # page order kept


def test_fragments_at_or_over_the_minimum_stay_alone():
    groups = [[unit(100, name="a")], [unit(100, name="b")]]
    assert names(merge_small(groups, LIMITS)) == [["a"], ["b"]]


def test_with_an_exact_check_a_fragment_takes_the_neighbour_whose_text_fits():
    groups = [[unit(300, name="left")], [unit(30, name="small")], [unit(200, name="right")]]
    exact = {"small right": 1003, "left small": 400}  # the estimate of 'right' was short

    def fits(group: list[Unit]) -> bool:
        return exact[" ".join(u.text for u in group)] <= 1000

    assert names(merge_small(groups, LIMITS, fits)) == [["left", "small"], ["right"]]


# -- attach_lone_headings -------------------------------------------------------------


def test_a_chunk_of_headings_only_joins_the_previous_chunk():
    groups = [[unit(300, name="text")], [unit(5, headings_only=True, name="## End")]]
    assert names(attach_lone_headings(groups, LIMITS)) == [["text", "## End"]]


def test_headings_at_the_start_take_the_next_chunk():
    groups = [[unit(5, headings_only=True, name="# T")], [unit(300, name="text")]]
    assert names(attach_lone_headings(groups, LIMITS)) == [["# T", "text"]]


# -- enforce_hard_limit ---------------------------------------------------------------


def test_groups_within_the_hard_limit_are_left_alone():
    groups = [[unit(300)], [unit(400)]]
    assert enforce_hard_limit(groups, ["a", "b"], [300, 400], LIMITS, count) is None


def test_a_group_found_over_the_hard_limit_is_packed_again():
    # The packer's estimate said 991; the exact count came out at 1003. Even when the
    # estimate fits the tighter re-pack, the group must come apart, or chunk_page's
    # re-pack loop would never end.
    groups = [[unit(495, name="a"), unit(495, name="b")]]
    repacked = enforce_hard_limit(groups, ["a\n\nb"], [1003], LIMITS, count)
    assert names(repacked) == [["a"], ["b"]]


def test_a_single_unit_over_the_hard_limit_is_cut_as_text():
    text = sentences(1500, 4)
    over = Unit(text, count(text), 0, 1, ((1, "T"),), 0)
    repacked = enforce_hard_limit([[over]], [text], [count(text)], LIMITS, count)
    assert len(repacked) >= 2
    assert all(len(group) == 1 and group[0].tokens <= 1000 for group in repacked)
    assert " ".join(group[0].text for group in repacked) == text
    assert all(group[0].path == ((1, "T"),) for group in repacked)


def test_trailing_headings_over_the_limit_keep_content_with_them():
    # A page ending in a heading with no content: it joined the last chunk, a sentence
    # piece filled up to the limit. Cut again, the headings must not end up alone.
    text = sentences(990, 5)
    content = Unit(text, count(text), 10, 11, ((1, "T"),), 0)
    trailing = Unit("# End", 2, 12, 13, ((1, "End"),), 1, headings_only=True)
    exact = count(f"{text}\n\n# End")
    assert exact > 990
    repacked = enforce_hard_limit([[content, trailing]], [""], [exact], Limits(hard=990), count)
    assert len(repacked) >= 2
    assert not any(all(u.headings_only for u in group) for group in repacked)
    assert repacked[-1][-1] is trailing
    assert all(sum(u.tokens for u in group) + len(group) <= 990 for group in repacked)


def test_a_fenced_unit_over_the_limit_is_cut_with_its_fences():
    code = "```sql\n" + "\n".join(f"select {i} from t{i};" for i in range(400)) + "\n```"
    unit_ = Unit(code, count(code), 5, 407, (), 0)
    repacked = enforce_hard_limit([[unit_]], [code], [count(code)], LIMITS, count)
    assert len(repacked) >= 3
    for [piece] in repacked:
        assert piece.text.startswith("```sql\n") and piece.text.endswith("\n```")
        assert piece.tokens <= 1000
    assert repacked[0][0].start == 5 and repacked[-1][0].end == 407


def test_trailing_headings_as_long_as_a_chunk_leave_the_content_alone():
    # No room is left beside them: cutting the content for them would only make pieces of
    # a few characters (found at a 160-token limit: 't', 'i', dropped as duplicates).
    small = Limits(soft=120, hard=160, min_tokens=30)
    content = Unit("Some words here.", 4, 0, 1, (), 0)
    heading = "# " + " ".join(["the"] * 180)
    trailing = Unit(heading, count(heading), 2, 3, (), 0, headings_only=True)
    exact = count(f"Some words here.\n\n{heading}")
    repacked = enforce_hard_limit([[content, trailing]], [""], [exact], small, count)
    assert names(repacked) == [["Some words here."], [heading]]


def test_a_heading_longer_than_the_limit_is_cut_without_crumbs():
    heading = "# " + " ".join(["the"] * 180)
    chunks = chunk_one(f"Some words here.\n\n{heading}", soft=120, hard=160, min_tokens=30).chunks
    assert all(c.tokens <= 160 for c in chunks)
    assert len({c.text for c in chunks}) == len(chunks)
    assert all(len(c.text) > 10 for c in chunks)


def test_trailing_headings_never_cut_code_that_fits():
    # Code of 900 tokens, then a page-closing heading too long to share its chunk: the
    # code stays whole and the heading is left on its own (the one case the rules allow).
    code = "```\n" + "\n".join(f"row_{i} = lookup('key {i}')" for i in range(90)) + "\n```"
    assert 800 < count(code) <= 1000
    heading = "## " + " ".join(["closing"] * 300)
    code_unit = Unit(code, count(code), 0, 92, (), 0)
    trailing = Unit(heading, count(heading), 93, 94, (), 0, headings_only=True)
    exact = count(f"{code}\n\n{heading}")
    repacked = enforce_hard_limit([[code_unit, trailing]], [""], [exact], LIMITS, count)
    assert names(repacked) == [[code], [heading]]


def test_a_re_cut_keeps_stacked_headings_on_the_first_fenced_piece():
    code = "```sql\n" + "\n".join(f"select {i} from t{i};" for i in range(400)) + "\n```"
    text = f"## Queries\n\n{code}"
    over = Unit(text, count(text), 0, 404, (), 0)
    repacked = enforce_hard_limit([[over]], [text], [count(text)], LIMITS, count)
    assert repacked[0][0].text.startswith("## Queries\n\n```sql\nselect 0 from t0;")
    for [piece] in repacked:
        assert piece.tokens <= 1000 and piece.text.endswith("\n```")
        assert "```sql\n" in piece.text


def test_a_re_cut_puts_headings_apart_from_code_that_fits_only_alone():
    code = "```\n" + "\n".join(f"row_{i} = lookup('key {i}')" for i in range(90)) + "\n```"
    heading = "## " + " ".join(["closing"] * 150)
    assert count(code) <= 1000 < count(f"{heading}\n\n{code}")
    text = f"{heading}\n\n{code}"
    over = Unit(text, count(text), 0, 94, (), 0)
    repacked = enforce_hard_limit([[over]], [text], [count(text)], LIMITS, count)
    assert names(repacked) == [[heading], [code]]
    assert repacked[1][0].joiner == "\n\n"


def test_a_piece_of_oversized_code_is_cut_again_for_closing_headings_but_whole_code_not():
    # Found by the property tests: the last re-fenced piece of a long code block in a
    # quote was kept whole as if it were code that fits, so the closing heading stood
    # alone. A piece of code over the limit may be cut at other lines; whole code may not.
    body = [f"> value_{i} = compute({i}, 'item number {i}')" for i in range(55)]
    code = "\n".join(["> ```sh", *body, "> ```"])
    heading = "## " + " ".join(f"closing{i}" for i in range(150))
    assert count(code) <= 1000 < count(f"{code}\n\n{heading}")
    trailing = Unit(heading, count(heading), 80, 81, (), 0, headings_only=True)
    exact = count(f"{code}\n\n{heading}")
    for refenced in (True, False):
        piece = Unit(code, count(code), 0, 57, (), 0, "\n\n", refenced=refenced)
        repacked = enforce_hard_limit([[piece, trailing]], [""], [exact], LIMITS, count)
        if refenced:
            assert len(repacked) == 2 and repacked[-1][-1] is trailing
            assert repacked[0][0].text.startswith("> ```sh\n> value_0 =")
            assert repacked[1][0].text.startswith("> ```sh\n> value_")
            assert all(g[0].text.endswith("\n> ```") and g[0].refenced for g in repacked)
        else:
            assert names(repacked) == [[code], [heading]]


# -- through chunk_page ---------------------------------------------------------------


def test_small_h2_section_shares_a_chunk_with_a_whole_sibling_under_their_parent():
    small = sentences(30, 2, "s")
    markdown = (
        f"# T\n\n## A\n\n{sentences(900, 1, 'a')}\n\n## S\n\n{small}"
        f"\n\n## C\n\n{sentences(600, 3, 'c')}"
    )
    chunks = chunk_one(markdown).chunks
    holder = next(c for c in chunks if small in c.text)
    assert holder.text.startswith("## S\n\n")  # A is full: S goes with C, whole
    assert "## C" in holder.text and "## A" not in holder.text
    assert (holder.h1, holder.h2) == ("T", "S")  # the headings in force at its first line
    assert holder.breadcrumb == ["T"]  # the section that holds both
    assert holder.sections == [["T", "S"], ["T", "C"]]


def test_small_section_at_the_end_of_an_h1_stays_apart_from_the_next_h1():
    small = sentences(30, 2, "s")
    markdown = (
        f"# T\n\n## A\n\n{sentences(960, 1, 'a')}\n\n## S\n\n{small}"
        f"\n\n# Other\n\n{sentences(200, 3, 'c')}"
    )
    chunks = chunk_one(markdown).chunks
    holder = next(c for c in chunks if small in c.text)
    assert holder.tokens < 100  # the A chunk is too full and Other is another H1
    assert "# Other" not in holder.text


def test_headings_without_content_stack_onto_the_content_that_follows():
    markdown = f"# T\n\n## B\n\n### C\n\n{sentences(200, 3)}"
    [chunk] = chunk_one(markdown).chunks
    assert chunk.text.startswith("# T\n\n## B\n\n### C\n\nThe ")
    assert chunk.breadcrumb == ["T", "B", "C"]


def test_trailing_headings_join_the_last_chunk_instead_of_standing_alone():
    markdown = f"# T\n\n{sentences(150, 1)}\n\n## Trailing\n\n### Also empty"
    chunks = chunk_one(markdown).chunks
    assert len(chunks) == 1
    assert chunks[0].text.endswith("## Trailing\n\n### Also empty")


def test_no_chunk_is_headings_only_even_between_big_sections():
    markdown = (
        f"# T\n\n## A\n\n{sentences(900, 1, 'a')}\n\n## Empty one\n\n## Empty two"
        f"\n\n## B\n\n{sentences(900, 2, 'b')}"
    )
    chunks = chunk_one(markdown).chunks
    assert not any(is_header_only(c.text) for c in chunks)
    holder = next(c for c in chunks if "## Empty two" in c.text)
    assert "## Empty one" in holder.text


def test_h1_intro_with_content_starts_its_own_chunk():
    intro = sentences(600, 1, "i")
    markdown = f"# T\n\n{intro}\n\n## B\n\n{sentences(600, 2, 'b')}"
    chunks = chunk_one(markdown).chunks
    assert [c.text.split("\n")[0] for c in chunks] == ["# T", "## B"]
    assert chunks[0].text == f"# T\n\n{intro}"
    assert (chunks[0].h1, chunks[0].h2) == ("T", None)


def test_small_h1_intro_still_merges_with_the_first_section():
    intro = sentences(30, 1, "i")
    markdown = f"# T\n\n{intro}\n\n## B\n\n{sentences(200, 2, 'b')}"
    [chunk] = chunk_one(markdown).chunks
    assert chunk.text.startswith(f"# T\n\n{intro}\n\n## B\n\n")
    assert (chunk.h1, chunk.h2) == ("T", None)  # in force at the first content line


def test_h1_without_intro_stacks_onto_the_first_h2():
    markdown = f"# T\n\n## B\n\n{sentences(200, 2)}"
    [chunk] = chunk_one(markdown).chunks
    assert chunk.text.startswith("# T\n\n## B\n\n")
    assert (chunk.h1, chunk.h2) == ("T", "B")


def test_a_long_heading_takes_a_shorter_first_piece_rather_than_standing_alone():
    heading = "## " + " ".join(f"topic{i}" for i in range(250))
    assert 500 < count(heading) < 900
    paragraph = sentences(800, 4)
    chunks = chunk_one(f"{heading}\n\n{paragraph}").chunks
    assert not any(is_header_only(c.text) for c in chunks)
    assert chunks[0].text.startswith(f"{heading}\n\nThe ")
    assert all(c.tokens <= 1000 for c in chunks)


def test_headings_stay_apart_from_code_they_would_push_over_the_limit():
    code_lines = [f"row_{i} = lookup('key number {i}')" for i in range(85)]
    code_lines.append("note = ''")
    while count("```\n" + "\n".join(code_lines) + "\n```") < 999:  # fill up, word by word
        code_lines[-1] = code_lines[-1][:-1] + " word'"
    code = "```\n" + "\n".join(code_lines) + "\n```"
    assert count(code) <= 1000
    assert count(f"## Code\n\n{code}") > 1000  # fits alone, not under its heading
    markdown = f"# T\n\n{sentences(200, 1)}\n\n## Code\n\n{code}"
    chunks = chunk_one(markdown).chunks
    assert [code in c.text for c in chunks] == [False, True]
    assert chunks[0].text.endswith("## Code")  # the heading went back to the text before
    assert chunks[1].text == code
    assert (chunks[1].h1, chunks[1].h2) == ("T", "Code")
    assert all(c.tokens <= 1000 for c in chunks)


# -- headings longer than a chunk -----------------------------------------------------
# Found by the property tests: a short heading next to one longer than the hard limit was
# cut off on its own at the blank line between them (a header-only chunk of 2 tokens).

SMALL = {"soft": 120, "hard": 160, "min_tokens": 30}


def long_title(n_words: int, tag: str) -> str:
    return " ".join(tag if n % 8 == 0 else "user" for n in range(n_words))


def header_only_chunks(chunks, hard: int, min_tokens: int) -> list[str]:
    """Chunks of headings alone that still had room for a fragment of content."""
    return [c.text for c in chunks if is_header_only(c.text) and c.tokens + 1 + min_tokens <= hard]


def test_a_short_heading_before_a_too_long_closing_heading_joins_the_chunk_before():
    markdown = f"Some words here.\n\n# the\n\n# {long_title(142, 't2')}"
    chunks = chunk_one(markdown, **SMALL).chunks
    assert not header_only_chunks(chunks, 160, 30)
    assert chunks[0].text.startswith("Some words here.\n\n# the\n\n# t2")
    assert all(c.tokens <= 160 for c in chunks)
    assert all(c.tokens >= 150 for c in chunks[1:])  # the rest of the heading: full pieces
    assert " ".join(" ".join(c.text.split()) for c in chunks) == " ".join(markdown.split())


def test_headings_longer_than_a_chunk_come_in_full_pieces_and_the_rest_stacks_on_content():
    run = f"# the\n\n# {long_title(400, 't1')}\n\n### {long_title(500, 't2')}"
    assert count(run) > 1000
    markdown = f"{run}\n\nThe t3 content of the section, in a short paragraph."
    chunks = chunk_one(markdown).chunks
    assert not header_only_chunks(chunks, 1000, 100)
    assert all(990 <= c.tokens <= 1000 for c in chunks[:-1])
    assert chunks[-1].text.endswith("\n\nThe t3 content of the section, in a short paragraph.")
    assert " ".join(" ".join(c.text.split()) for c in chunks) == " ".join(markdown.split())


def test_a_closing_setext_heading_longer_than_a_chunk_ends_in_a_full_piece():
    # Cut from the front, its underline was left as a chunk '=' next to a crumb 'signs'.
    markdown = f"# the\n\nSome t1 words here.\n\n{long_title(400, 't2')} signs\n="
    chunks = chunk_one(markdown, **SMALL).chunks
    assert not header_only_chunks(chunks, 160, 30)
    assert chunks[-1].text.endswith("signs\n=") and chunks[-1].tokens >= 150
    assert chunks[0].text.startswith("# the\n\nSome t1 words here.\n\nt2 user")
    assert " ".join(" ".join(c.text.split()) for c in chunks) == " ".join(markdown.split())


def test_a_setext_heading_cut_short_never_heads_the_content_after_it():
    # Its partial title would read as the heading of the code; cut from the end instead,
    # the underline ends a full piece and the code starts its own chunk.
    title = long_title(137, "t1")
    code = "```\nt2_0 = call(962838)\n```"
    markdown = f"# the the\n\n{title}\n=\n\n{code}"
    assert count(f"# the the\n\n{title}\n=") > 160 >= count(f"{title}\n=")
    chunks = chunk_one(markdown, **SMALL).chunks
    assert [c.text for c in chunks][-1] == code
    assert chunks[-2].text.endswith(" t1\n=") and chunks[-2].tokens >= 150
    # At the page start no chunk can take '# the the': it keeps a word of the title.
    assert chunks[0].text == "# the the\n\nt1"
    assert not header_only_chunks(chunks, 160, 30)
    assert all(c.h1 == title for c in chunks[1:])


def test_a_setext_run_cut_from_the_end_leaves_its_start_with_the_chunk_before():
    title = long_title(300, "t1")
    markdown = f"Some words here.\n\n## Short\n\n{title}\n---\n\nThe t2 content follows here."
    chunks = chunk_one(markdown, **SMALL).chunks
    assert chunks[0].text.startswith("Some words here.\n\n## Short\n\nt1 user")
    assert chunks[-2].text.endswith(" user\n---")
    assert chunks[-1].text == "The t2 content follows here."
    assert not header_only_chunks(chunks, 160, 30)
    assert " ".join(" ".join(c.text.split()) for c in chunks) == " ".join(markdown.split())


def test_a_heading_cut_short_heads_the_piece_that_starts_inside_it():
    # Closing headings '# the', a long H1, '# the': the long one is cut, no chunk line
    # holds its title whole, so the piece that starts inside it carries it as its H1.
    title = long_title(150, "t2")
    markdown = f"Some t0 words here.\n\n# the\n\n# {title}\n\n# the"
    chunks = chunk_one(markdown, **SMALL).chunks
    assert chunks[0].text.startswith("Some t0 words here.\n\n# the\n\n# t2")
    assert [c.h1 for c in chunks[1:]] == [title]
    assert chunks[-1].text.endswith("\n\n# the")
    assert " ".join(" ".join(c.text.split()) for c in chunks) == " ".join(markdown.split())


def test_fragments_left_by_a_cut_for_closing_headings_are_merged():
    # The closing heading leaves too little room to share the last chunk, so it is cut
    # off after the small fragments were merged: the code and the '## the' section, both
    # small and of one H1 section, must still come together.
    code = "```\nt0_0 = call(962838, 'x')\n```"
    heading = "### " + long_title(120, "t3")
    section = (
        "## the\n\nThe t2 row is read safely by the client, then cached for the session"
        " of the user who signs in."
    )
    assert count(section) + count(heading) > 160 and count(heading) > 160 - 30
    chunks = chunk_one(f"{code}\n\n{section}\n\n{heading}", **SMALL).chunks
    assert [c.text for c in chunks] == [f"{code}\n\n{section}", heading]


def test_pieces_of_a_heading_run_know_their_page_lines_across_extra_blank_lines():
    # The run's text puts one blank line between headings; the page here has three. The
    # piece that starts inside the long H2 must still find it (its H2 and its lines).
    title = long_title(160, "t3")
    markdown = f"Some t0 words here.\n\n### the\n\n\n\n## {title}"
    chunks = chunk_one(markdown, **SMALL).chunks
    assert chunks[0].text.startswith("Some t0 words here.\n\n### the\n\n## t3")
    assert [c.h2 for c in chunks[1:]] == [title]
    assert [c.source_lines for c in chunks[1:]] == [(7, 7)]


def test_cutting_for_closing_headings_keeps_code_in_a_list_whole():
    # Found by the property tests: the list was cut again to leave room for the heading,
    # with a budget below the size of the code in its step, which was split though it
    # fits a chunk. Code that fits stays whole, in a piece of its own.
    body = [f"  value_{i} = compute({i}, 'item number {i}')" for i in range(60)]
    code = "\n".join(["  ```python", *body, "  ```"])
    steps = f"- Install the client first.\n\n{code}\n\n  Then call it from the app."
    heading = "## " + " ".join(f"closing{i}" for i in range(150))
    assert 600 < count(code) < 1000 and count(steps) < 1000
    assert count(steps) + count(heading) > 1000 and count(code) > 1000 - count(heading)
    chunks = chunk_one(f"{steps}\n\n{heading}").chunks
    assert sum(code in c.text for c in chunks) == 1
    assert all(c.tokens <= 1000 for c in chunks)
    assert chunks[-1].text.endswith(f"Then call it from the app.\n\n{heading}")


@pytest.mark.parametrize(
    "headings",
    [
        "# {title}",
        "# the\n\n### {title}",
        "{title}\n===",
        "# a t0 head\n\n{title}\n---",
    ],
)
@pytest.mark.parametrize("after", ["## The next words", "The t7 user\n---", "Plain words here."])
def test_headings_too_long_to_stack_at_the_page_start_before_code_that_fills_a_chunk(
    headings, after
):
    # The rest of the cut headings cannot stack onto the code (it would push the code,
    # which fits alone, over the limit), and there is no chunk before to join: the run
    # is cut from the end with its first piece holding text, and nothing is lost.
    code = "\n".join(["```python", *code_lines(12, 1), "```"])
    generated = Page(
        parts=[headings.format(title=long_title(200, "t1")), code, after, "The t9 end here."],
        code_blocks=[code],
    )
    assert_invariants(generated, Limits(**SMALL))
    assert not header_only_chunks(chunk_one(generated.markdown, **SMALL).chunks, 160, 30)


def test_the_last_resort_cuts_only_groups_still_over_the_limit_and_as_text():
    # Used when re-packing does not converge (it has on every page seen): each group
    # still over the hard limit becomes plain-text pieces within it; the others stay.
    over_text = sentences(300, 5, "o")
    over = [Unit(over_text, count(over_text), 3, 4, ((1, "T"),), 0)]
    fine = [unit(120, name="fine")]
    groups = cut_as_text(
        [fine, over], ["fine", over_text], [120, count(over_text)], Limits(**SMALL), count
    )
    assert groups[0] is fine
    pieces = [group[0] for group in groups[1:]]
    assert len(pieces) >= 2 and all(len(group) == 1 for group in groups[1:])
    assert all(piece.tokens == count(piece.text) <= 160 for piece in pieces)
    assert " ".join(piece.text for piece in pieces) == over_text
    assert all(piece.path == ((1, "T"),) and piece.start == 3 for piece in pieces)
