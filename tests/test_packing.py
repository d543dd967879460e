"""Pass 2 (rule 2) and the cutting of oversized blocks: soft and hard limits, code kept
whole while it fits, oversized code / tables / lists / prose cut along their own grain."""

from __future__ import annotations

import math
import random
import re

import pytest

from firechunk.chunker.blocks import CODE, LIST, TABLE, parse_blocks
from firechunk.chunker.pieces import Budget, fill_text, furthest, split_block, split_text
from firechunk.chunker.sizer import Sizer
from firechunk.tokens import TokenCounter
from tests.chunk_helpers import (
    chunk_one,
    code_lines,
    count,
    fenced,
    sentences,
)


def only_block(markdown: str):
    lines = markdown.split("\n")
    [block] = parse_blocks(lines)
    return block, lines


def body_lines(piece_text: str) -> list[str]:
    """The code lines of a fenced piece, without its fences."""
    lines = piece_text.split("\n")
    return lines[1:-1]


# -- split_block: fitting blocks ----------------------------------------------------


def test_a_block_that_fits_is_returned_whole():
    code = fenced(code_lines(20))
    block, lines = only_block(code)
    [piece] = split_block(block, lines, Budget(count(code), count(code)), count)
    assert piece.text == code
    assert (piece.start, piece.end, piece.tokens) == (0, len(lines), count(code))


# -- fenced code over budget ----------------------------------------------------------


def test_oversized_code_is_cut_at_line_boundaries_and_refenced_with_its_info_string():
    opener = "```python title=app.py"
    code = fenced(code_lines(60), "python title=app.py")
    block, lines = only_block(code)
    assert block.kind == CODE and count(code) > 300
    pieces = split_block(block, lines, Budget(200, 200), count)
    assert len(pieces) >= 4
    for piece in pieces:
        assert piece.tokens == count(piece.text) <= 200
        assert piece.text.split("\n")[0] == opener
        assert piece.text.split("\n")[-1] == "```"
    # Every code line is in exactly one piece, whole and in order.
    assert [line for p in pieces for line in body_lines(p.text)] == lines[1:-1]
    assert [p.joiner for p in pieces] == [None] + ["\n\n"] * (len(pieces) - 1)
    # The pieces together span the block, fences included.
    assert pieces[0].start == 0 and pieces[-1].end == len(lines)


def test_oversized_code_prefers_to_cut_at_blank_lines():
    block, lines = only_block(fenced(code_lines(60)))  # a blank line every fifth line
    pieces = split_block(block, lines, Budget(200, 200), count)
    for piece in pieces[:-1]:
        assert body_lines(piece.text)[-1] == ""


def test_oversized_code_without_blank_lines_is_cut_between_lines():
    code_body = [f"row_{i} = lookup('key number {i}')" for i in range(80)]
    block, lines = only_block(fenced(code_body, "js"))
    pieces = split_block(block, lines, Budget(150, 150), count)
    assert len(pieces) > 2
    assert all(p.tokens <= 150 for p in pieces)
    assert [line for p in pieces for line in body_lines(p.text)] == code_body


def test_a_single_code_line_over_budget_is_cut_by_characters():
    line = "key = '" + "abcdefghij" * 200 + "'"
    block, lines = only_block(fenced([line], "text"))
    pieces = split_block(block, lines, Budget(100, 100), count)
    assert len(pieces) > 2
    assert all(p.tokens <= 100 for p in pieces)
    assert all(p.text.startswith("```text\n") and p.text.endswith("\n```") for p in pieces)
    assert "".join("\n".join(body_lines(p.text)) for p in pieces) == line


def test_code_that_fits_whole_code_is_kept_whole_past_a_tighter_budget():
    code = fenced(code_lines(40))
    block, lines = only_block(code)
    assert count(code) > 200
    [piece] = split_block(block, lines, Budget(200, 200, whole_code=1000), count)
    assert piece.text == code
    item = "- Step one.\n\n" + "\n".join("  " + line for line in code.split("\n"))
    block, lines = only_block(item)
    pieces = split_block(block, lines, Budget(200, 200, whole_code=1000), count)
    assert [p.text.strip() for p in pieces] == ["- Step one.", code.replace("\n", "\n  ")]


def test_a_smaller_first_budget_leaves_room_for_stacked_headings():
    block, lines = only_block(fenced(code_lines(60)))
    pieces = split_block(block, lines, Budget(80, 300), count)
    assert pieces[0].tokens <= 80
    assert all(p.tokens <= 300 for p in pieces[1:])
    assert max(p.tokens for p in pieces[1:]) > 80  # the rest used their larger budget


def test_tilde_fences_are_refenced_with_tildes():
    block, lines = only_block(fenced(code_lines(40), "").replace("```", "~~~~"))
    pieces = split_block(block, lines, Budget(150, 150), count)
    assert len(pieces) > 1
    assert all(p.text.startswith("~~~~\n") and p.text.endswith("\n~~~~") for p in pieces)


# -- tables over budget ---------------------------------------------------------------


def test_oversized_table_is_cut_by_rows_with_its_header_repeated():
    head = ["| name | value |", "|---|---|"]
    rows = [f"| key{i} | value number {i} |" for i in range(40)]
    block, lines = only_block("\n".join([*head, *rows]))
    assert block.kind == TABLE
    pieces = split_block(block, lines, Budget(100, 100), count)
    assert len(pieces) >= 3
    for piece in pieces:
        assert piece.tokens == count(piece.text) <= 100
        assert piece.text.split("\n")[:2] == head
    assert [row for p in pieces for row in p.text.split("\n")[2:]] == rows
    assert pieces[0].start == 0 and pieces[-1].end == len(lines)


@pytest.mark.timeout(60)
def test_a_table_row_over_the_hard_limit_is_cut_as_text_and_the_page_still_ends():
    row = "| key | " + " ".join(f"w{i}" for i in range(1500)) + " |"
    markdown = f"# T\n\n| a | b |\n|---|---|\n| x | y |\n{row}\n| z | q |"
    chunks = chunk_one(markdown).chunks
    assert all(c.tokens <= 1000 for c in chunks)
    joined = " ".join(c.text for c in chunks)
    assert all(f"w{i}" in joined.split() for i in (0, 777, 1499))
    assert "| z | q |" in joined
    n_lines = len(markdown.split("\n"))
    assert all(1 <= c.source_lines[0] <= c.source_lines[1] <= n_lines for c in chunks)
    # No chunk of header and delimiter rows alone.
    assert not any(c.text.endswith("| a | b |\n|---|---|") for c in chunks)


def test_a_long_first_row_keeps_the_header_rows_on_top():
    row = "| key | " + " ".join(f"w{i}." for i in range(1500)) + " |"
    head = ["| a | b |", "|---|---|"]
    block, lines = only_block("\n".join([*head, row, "| z | q |"]))
    pieces = split_block(block, lines, Budget(400, 400), count)
    assert pieces[0].text.startswith("| a | b |\n|---|---|\n| key | w0.")
    assert all(p.tokens <= 400 for p in pieces)
    assert pieces[-1].text == "\n".join([*head, "| z | q |"])  # later rows: header again
    assert " ".join(p.text for p in pieces[:-1]) == "\n".join([*head, row])


# -- lists over budget ----------------------------------------------------------------


def test_oversized_list_is_cut_at_item_boundaries():
    items = [f"- item {i}: {sentences(30, i)}\n  - nested {i}" for i in range(8)]
    block, lines = only_block("\n".join(items))
    assert block.kind == LIST
    pieces = split_block(block, lines, Budget(100, 100), count)
    assert [p.text for p in pieces] == items  # each item whole, nested lines with it
    assert all(p.tokens <= 100 for p in pieces)


def test_a_list_item_over_budget_is_cut_as_text_and_the_others_stay_whole():
    items = [f"1. {sentences(40, 1)}", f"2. {sentences(400, 2)}", f"3. {sentences(40, 3)}"]
    block, lines = only_block("\n".join(items))
    pieces = split_block(block, lines, Budget(150, 150), count)
    assert pieces[0].text == items[0] and pieces[-1].text == items[2]
    middle = pieces[1:-1]
    assert len(middle) >= 3
    assert all(p.tokens <= 150 for p in middle)
    assert " ".join(p.text for p in middle) == items[1]


def indented_code(n_lines: int, indent: str = "   ") -> str:
    return "\n".join(
        indent + line if line else "" for line in fenced(code_lines(n_lines)).split("\n")
    )


def test_a_code_block_in_an_oversized_list_item_is_kept_whole():
    code = indented_code(30)
    assert 300 < count(code) < 1000
    markdown = f"# T\n\n1. {sentences(900, 1)}\n\n{code}\n\n   More text.\n\n2. Second item."
    chunks = chunk_one(markdown).chunks
    assert len(chunks) >= 2
    assert sum(code in c.text for c in chunks) == 1
    assert all(c.tokens <= 1000 for c in chunks)


def test_oversized_code_in_a_one_item_list_is_refenced_with_its_indentation():
    code = indented_code(200, "  ")
    markdown = f"- {sentences(50, 1)}\n\n{code}"
    chunks = chunk_one(markdown).chunks
    pieces = [
        p for c in chunks for p in re.findall(r"^  ```python\n.*?\n  ```$", c.text, re.S | re.M)
    ]
    assert len(pieces) >= 3
    got = [line.strip() for p in pieces for line in body_lines(p) if line.strip()]
    assert got == [line for line in code_lines(200) if line]
    assert all(c.tokens <= 1000 for c in chunks)


def quoted(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in text.split("\n"))


def test_a_code_block_in_an_oversized_quote_is_kept_whole_with_every_quote_line():
    code = quoted(fenced(code_lines(30), "js"))
    markdown = f"# T\n\n> {sentences(900, 1)}\n>\n{code}\n>\n> After the code."
    chunks = chunk_one(markdown).chunks
    assert len(chunks) >= 2
    assert sum(code in c.text for c in chunks) == 1
    # Every line of the quote is in a chunk, the '>' blank lines too.
    kept = [line for c in chunks for line in c.text.split("\n")]
    assert kept.count(">") == markdown.split("\n").count(">")


def test_oversized_code_in_a_quote_is_refenced_inside_the_quote():
    code = quoted(fenced(code_lines(200), "js"))
    chunks = chunk_one(f"> Intro line of the callout.\n>\n{code}").chunks
    pieces = [p for c in chunks for p in re.findall(r"^> ```js\n.*?\n> ```$", c.text, re.S | re.M)]
    assert len(pieces) >= 3
    got = [line[2:] for p in pieces for line in body_lines(p) if line.strip() != ">"]
    assert got == [line for line in code_lines(200) if line]
    assert all(c.tokens <= 1000 for c in chunks)


# -- prose over budget ---------------------------------------------------------------


def test_long_prose_is_cut_at_paragraphs_first():
    paragraphs = [sentences(120, i) for i in range(4)]
    pieces = split_text("\n\n".join(paragraphs), 10, Budget(300, 300), count)
    # 2 paragraphs fit 300 tokens: they are packed two by two.
    assert [p.text for p in pieces] == ["\n\n".join(paragraphs[:2]), "\n\n".join(paragraphs[2:])]
    assert [(p.start, p.end) for p in pieces] == [(10, 13), (14, 17)]
    assert [p.joiner for p in pieces] == [None, "\n\n"]


def test_a_long_paragraph_is_cut_at_sentence_ends():
    paragraph = sentences(700, 9)
    pieces = split_text(paragraph, 0, Budget(200, 200), count)
    assert len(pieces) >= 4
    assert all(p.tokens <= 200 for p in pieces)
    assert all(p.text.endswith("now.") for p in pieces)  # never inside a sentence
    assert " ".join(p.text for p in pieces) == paragraph
    assert [p.joiner for p in pieces[1:]] == [" "] * (len(pieces) - 1)


def test_a_sentence_over_budget_is_cut_between_words():
    sentence = " ".join(f"word{i}" for i in range(300)) + "."
    pieces = split_text(sentence, 0, Budget(100, 100), count)
    assert len(pieces) > 2
    assert all(p.tokens <= 100 for p in pieces)
    assert " ".join(p.text for p in pieces) == sentence


def test_the_rest_of_a_sentence_cut_between_words_takes_the_sentences_after_it():
    # Found by the property tests: the last words of a line cut between words stood
    # alone as a crumb ('signs'), apart from the short line after it ('=').
    long_sentence = " ".join(f"word{i}" for i in range(130)) + "."
    text = f"{long_sentence} Short one here. Short two here."
    pieces = split_text(text, 0, Budget(100, 100), count)
    assert all(p.tokens <= 100 for p in pieces)
    assert pieces[-1].text.endswith("word129. Short one here. Short two here.")
    assert pieces[-1].joiner == " "
    assert " ".join(p.text for p in pieces) == text


def test_a_word_over_budget_is_cut_by_characters():
    url = "https://example.com/" + "segment/" * 300
    pieces = split_text(url, 0, Budget(100, 100), count)
    assert len(pieces) > 2
    assert all(p.tokens <= 100 for p in pieces)
    assert "".join(p.text for p in pieces) == url


# -- fill_text: headings longer than a chunk ------------------------------------------


def rejoined(pieces) -> str:
    return pieces[0].text + "".join(p.joiner + p.text for p in pieces[1:])


def test_fill_text_makes_every_piece_full_but_the_last_across_lines_and_blocks():
    text = "# " + " ".join(f"alpha{i}" for i in range(60)) + "\n\n## " + "beta " * 40 + "end"
    pieces = fill_text(text, 7, 60, count)
    assert rejoined(pieces) == text  # white space kept as joiners: nothing lost
    assert all(p.tokens <= 60 for p in pieces)
    assert all(p.tokens >= 55 for p in pieces[:-1])  # full, whatever the blank line
    assert pieces[0].start == 7 and pieces[-1].end == 10


def test_fill_text_from_the_end_leaves_the_rest_in_the_first_piece():
    text = "Title " + " ".join(f"word{i}" for i in range(200)) + "\n==="
    pieces = fill_text(text, 0, 60, count, from_end=True)
    assert rejoined(pieces) == text
    assert all(55 <= p.tokens <= 60 for p in pieces[1:])
    assert pieces[0].tokens < 60 and pieces[-1].text.endswith("\n===")


def test_fill_text_cuts_a_word_over_the_limit_by_characters():
    text = "short " + "x" * 2000 + " tail"
    pieces = fill_text(text, 0, 50, count)
    assert all(p.tokens <= 50 for p in pieces)
    assert rejoined(pieces) == text


# -- packing a page: soft and hard limits ---------------------------------------------


def test_a_section_that_fits_the_hard_limit_stays_whole():
    text = sentences(930, 1)
    [chunk] = chunk_one(f"# T\n\n{text}").chunks
    assert 800 < chunk.tokens <= 1000


def test_a_long_section_is_cut_at_paragraphs_into_balanced_chunks_near_the_soft_limit():
    paragraphs = [sentences(100, i) for i in range(30)]
    markdown = "# Long\n\n" + "\n\n".join(paragraphs)
    chunks = chunk_one(markdown).chunks
    total = count(markdown)
    assert len(chunks) in (math.ceil(total / 800), math.ceil(total / 800) + 1)
    assert all(400 <= c.tokens <= 1000 for c in chunks)
    # Cuts fall between paragraphs: every paragraph is inside one chunk.
    for paragraph in paragraphs:
        assert sum(paragraph in c.text for c in chunks) == 1


def test_a_code_block_that_fits_is_never_split_and_starts_its_own_chunk_if_needed():
    code = fenced(code_lines(40), "sql")
    assert 400 < count(code) < 1000
    markdown = f"# T\n\n## S\n\n{sentences(500, 1)}\n\n{code}\n\n{sentences(50, 2)}"
    chunks = chunk_one(markdown).chunks
    holders = [c for c in chunks if code in c.text]
    assert len(holders) == 1
    assert holders[0].text.startswith(code)  # pushed to a chunk of its own
    assert all(c.tokens <= 1000 for c in chunks)


def test_a_code_block_of_almost_the_hard_limit_stays_whole():
    lines = code_lines(200)
    while count(fenced(lines)) > 995:
        lines.pop()
    code = fenced(lines)
    chunks = chunk_one(f"# T\n\n## Code\n\n{code}\n\nAfter the code.").chunks
    assert sum(code in c.text for c in chunks) == 1
    assert all(c.tokens <= 1000 for c in chunks)


def test_a_page_with_code_over_the_hard_limit_gives_fenced_pieces_within_it():
    code = fenced(code_lines(200), "ts filename=a.ts")
    assert count(code) > 2000
    chunks = chunk_one(f"# T\n\n{sentences(50, 1)}\n\n{code}\n\nAfter the code.").chunks
    assert all(c.tokens <= 1000 for c in chunks)
    fenced_pieces = [
        piece
        for c in chunks
        for piece in re.findall(r"```ts filename=a\.ts\n.*?\n```", c.text, re.S)
    ]
    assert len(fenced_pieces) >= 3
    code_seen = [line for piece in fenced_pieces for line in body_lines(piece)]
    assert code_seen == code_lines(200)


def test_source_lines_of_a_split_code_block_include_its_fences():
    code = fenced(code_lines(200), "ts")
    markdown = f"# T\n\nIntro line.\n{code}\nafter"  # no blank lines around the code
    chunks = chunk_one(markdown).chunks
    last_line = len(markdown.split("\n"))
    assert chunks[0].source_lines[0] == 1
    assert chunks[-1].source_lines[1] == last_line
    # The page has no blank line between "Intro line." and the fence: neither does the chunk.
    assert "Intro line.\n```ts\n" in chunks[0].text
    assert chunks[-1].text.endswith("```\nafter")


def test_smaller_limits_are_honoured():
    markdown = "# T\n\n" + "\n\n".join(sentences(60, i) for i in range(20))
    chunks = chunk_one(markdown, soft=150, hard=200, min_tokens=20).chunks
    assert len(chunks) >= 8
    assert all(c.tokens <= 200 for c in chunks)


def test_fence_lines_that_fill_a_chunk_alone_are_cut_as_text():
    # An unclosed run of 5,000 backticks is a fence line over the hard limit (closed by
    # the clean-up with another one): no piece could hold its frame, so it is plain text.
    for markdown in ("`" * 5000, "```" + "x" * 8000 + "\ncode\n```"):
        chunks = chunk_one(markdown).chunks
        assert all(chunk.tokens == count(chunk.text) <= 1000 for chunk in chunks)
        assert "".join("".join(c.text.split()) for c in chunks).startswith("`" * 3)


@pytest.mark.parametrize("seed", range(20))
def test_furthest_finds_the_last_index_a_monotone_test_holds_for(seed):
    rng = random.Random(seed)
    near, far = rng.randrange(0, 50), rng.randrange(0, 50)
    step = 1 if far >= near else -1
    span = list(range(near + step, far + step, step))  # candidates, nearest first
    holds = rng.randrange(0, len(span) + 1)  # the test holds for the first `holds` of them
    calls: list[int] = []

    def ok(index: int) -> bool:
        calls.append(index)
        return span.index(index) < holds

    expected = span[holds - 1] if holds else near
    assert furthest(near, far, ok) == expected
    assert near not in calls  # `near` is the answer when nothing holds, never tested


@pytest.mark.parametrize("unit", ["word ", "|", "[", "ab_"])
def test_a_giant_one_line_page_is_cut_without_recounting_it_piece_by_piece(unit):
    # A 400 kB paragraph (or one "word") used to be cut by recounting the growing piece
    # at every word, or the rest of the page at every bisection step: minutes per page.
    text = unit * (400_000 // len(unit))
    counted: list[int] = []

    class CountingCounter(TokenCounter):
        def count(self, text: str) -> int:
            counted.append(len(text))
            return super().count(text)

    pieces = split_text(text, 0, Budget(1000, 1000), Sizer(CountingCounter()))
    assert "".join(piece.text for piece in pieces).replace(" ", "") == text.replace(" ", "")
    assert all(piece.tokens <= 1000 for piece in pieces)
    assert sum(counted) < 40 * len(text)  # characters counted, in all
