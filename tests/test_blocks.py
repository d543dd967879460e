"""Block parsing with mistletoe (rule 1): kinds, verbatim line spans, heading levels of ATX
and setext headings, and heading text cleaned of every markdown mark."""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mistletoe
import pytest
from mistletoe import Document, span_token

from firechunk.chunker.blocks import (
    CODE,
    HEADING,
    LIST,
    PARAGRAPH,
    QUOTE,
    RULE,
    TABLE,
    count_block,
    parse_blocks,
)
from firechunk.chunker.headings import heading_text
from firechunk.chunker.pieces import Piece
from firechunk.chunker.split import Unit
from tests.chunk_helpers import count

PAGE = """# Title

Para one
continues.

Setext One
==========

Setext Two
----------

```sql
select 1;

select 2;
```

    indented code

| a | b |
|---|---|
| 1 | 2 |

- item one
- item two
  - nested
- item three

> quote
> more

---

trailing


"""


def spans(markdown: str) -> list[tuple[str, list[str]]]:
    lines = markdown.split("\n")
    return [(block.kind, lines[block.start : block.end]) for block in parse_blocks(lines)]


def test_blocks_come_in_page_order_with_their_own_lines():
    assert spans(PAGE) == [
        (HEADING, ["# Title"]),
        (PARAGRAPH, ["Para one", "continues."]),
        (HEADING, ["Setext One", "=========="]),
        (HEADING, ["Setext Two", "----------"]),
        (CODE, ["```sql", "select 1;", "", "select 2;", "```"]),
        (CODE, ["    indented code"]),
        (TABLE, ["| a | b |", "|---|---|", "| 1 | 2 |"]),
        (LIST, ["- item one", "- item two", "  - nested", "- item three"]),
        (QUOTE, ["> quote", "> more"]),
        (RULE, ["---"]),
        (PARAGRAPH, ["trailing"]),
    ]


def test_every_non_blank_line_belongs_to_exactly_one_block():
    lines = PAGE.split("\n")
    owners = [0] * len(lines)
    for block in parse_blocks(lines):
        assert block.start < block.end
        for i in range(block.start, block.end):
            owners[i] += 1
    assert all(owners[i] == 1 for i, line in enumerate(lines) if line.strip())
    assert all(n <= 1 for n in owners)


def test_a_counted_block_is_its_parsed_block_with_its_text_and_exact_count():
    lines = PAGE.split("\n")
    for parsed in parse_blocks(lines):
        block = count_block(parsed, lines, count)
        assert block[: len(parsed)] == parsed
        assert block.text == "\n".join(lines[parsed.start : parsed.end])
        assert block.tokens == count(block.text)


def test_blocks_and_what_packing_builds_from_them_are_immutable():
    lines = PAGE.split("\n")
    parsed = parse_blocks(lines)[0]
    values = [
        parsed,
        count_block(parsed, lines, count),
        Piece("text", 1, 0, 1),
        Unit("text", 1, 0, 1, (), 0),
    ]
    for value in values:
        with pytest.raises(AttributeError):
            value.start = 5


def test_blank_lines_after_a_block_are_not_part_of_it():
    lines = ["para", "", "", "", ""]
    [block] = parse_blocks(lines)
    assert (block.start, block.end) == (0, 1)


def test_atx_and_setext_headings_carry_level_and_clean_title():
    headings = [b for b in parse_blocks(PAGE.split("\n")) if b.kind == HEADING]
    assert [(b.level, b.title) for b in headings] == [
        (1, "Title"),
        (1, "Setext One"),
        (2, "Setext Two"),
    ]


def test_a_multi_line_setext_heading_is_one_heading():
    [heading, para] = parse_blocks(["Multi line", "setext", "---", "", "para"])
    assert (heading.kind, heading.level, heading.title) == (HEADING, 2, "Multi line setext")
    assert (heading.start, heading.end) == (0, 3)
    assert para.kind == PARAGRAPH


@pytest.mark.parametrize("line", ["##No space", "####### seven hashes", "\\# escaped"])
def test_lines_that_are_not_atx_headings(line):
    [block] = parse_blocks([line])
    assert block.kind == PARAGRAPH


def test_fenced_code_keeps_its_opening_fence_with_the_info_string():
    lines = ["~~~ruby startline=3", "puts 1", "~~~"]
    [block] = parse_blocks(lines)
    assert (block.kind, block.fence) == (CODE, "~~~ruby startline=3")


def test_indented_code_has_no_fence():
    [block] = parse_blocks(["    x = 1"])
    assert (block.kind, block.fence) == (CODE, "")


def test_heading_lines_inside_fenced_code_are_code():
    lines = ["```md", "# not a heading", "```"]
    assert [b.kind for b in parse_blocks(lines)] == [CODE]


def test_list_items_are_the_top_level_items_only():
    lines = ["- a", "", "  ```py", "  x", "  ```", "- b", "  - nested", "- c"]
    [block] = parse_blocks(lines)
    assert block.kind == LIST
    assert [lines[i] for i in block.items] == ["- a", "- b", "- c"]


def test_inline_parsing_is_restored_after_a_parse():
    before = list(span_token._token_types)
    parse_blocks(["# *a*", "", "*b*"])
    assert span_token._token_types == before
    emphasis = Document("*x*").children[0].children[0]
    assert type(emphasis).__name__ == "Emphasis"


def test_nested_parsing_is_restored_after_a_parse():
    parse_blocks(["- a", "  - b", "", "> > c"])
    document = Document("- a\n  - b\n\n> > c\n")
    items, quote = document.children
    assert type(items.children[0].children[1]).__name__ == "List"
    assert type(quote.children[0]).__name__ == "Quote"


def test_a_quote_nested_thousands_deep_is_one_quote():
    # mistletoe recurses once per level into a quote: only the top level is parsed here.
    [block] = parse_blocks(["> " * 3000 + "deep", "> more"])
    assert (block.kind, block.start, block.end) == (QUOTE, 0, 2)


# -- clean heading text -----------------------------------------------------------------


@pytest.mark.parametrize(
    "source, clean",
    [
        ("Title [\\#](\\#title)", "Title"),
        ("Policies [#](https://supabase.com/docs/guides#policies)", "Policies"),
        ("**Bold** and _it_ and `code`", "Bold and it and code"),
        ("***Both*** and ~~gone~~", "Both and gone"),
        ("Link [text](https://example.com) here", "Link text here"),
        ("![logo](logo.png) Supabase", "logo Supabase"),
        ("[403 Forbidden](https://developer.mozilla.org/403)", "403 Forbidden"),
        ("<code>tag</code> here", "tag here"),
        ("Closing sequence ##", "Closing sequence"),
        ("C# language", "C# language"),
        ("a * b * c", "a * b * c"),
        ("  spaced   out  ", "spaced out"),
    ],
)
def test_heading_text_removes_markdown(source, clean):
    assert heading_text(source) == clean


@pytest.mark.parametrize(
    "source, clean",
    [
        # Underscores inside a word are not emphasis (CommonMark); these were mangled into
        # "supabaseauthadmin" / "pgstatstatements" on the Supabase docs.
        (
            "`supabase_auth_admin` [#](https://x.com/roles#supabase_auth_admin)",
            "supabase_auth_admin",
        ),
        (
            "pg_stat_statements: Query Performance Monitoring",
            "pg_stat_statements: Query Performance Monitoring",
        ),
        ("`uuid_generate_v4()`", "uuid_generate_v4()"),
        ("Notes on `pg_stat_statements`", "Notes on pg_stat_statements"),
        ("**a_b_c** and _real emphasis_", "a_b_c and real emphasis"),
        # Code span content is literal: no emphasis or links inside it.
        ("`*args` and `[x](y)`", "*args and [x](y)"),
        # Escaped marks are text, not emphasis.
        ("Escaped \\*star\\* and \\_under\\_", "Escaped *star* and _under_"),
        ("Title \\#", "Title #"),
        # Firecrawl's hard line break at the end of a heading line.
        ("Error Handling\\", "Error Handling"),
        ("Redirect URL examples [\\#](\\#redirect-url-examples)\\", "Redirect URL examples"),
    ],
)
def test_heading_text_keeps_identifiers_and_escaped_marks(source, clean):
    assert heading_text(source) == clean


def test_heading_blocks_get_clean_titles_from_the_parser():
    lines = [
        "## `supabase_auth_admin` [\\#](\\#supabase_auth_admin)",
        "",
        "Setext with **bold** [\\#](\\#setext)",
        "---",
    ]
    titles = [b.title for b in parse_blocks(lines) if b.kind == HEADING]
    assert titles == ["supabase_auth_admin", "Setext with bold"]


# -- threads ----------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
SAMPLE_CRAWL = TESTS.parent / "data" / "sample" / "crawl.json"


def varied_pages() -> list[list[str]]:
    """The sample crawl's pages, the platform fixtures and PAGE, as lines: every kind of
    block, setext headings, quotes, lists, tables, link reference definitions."""
    crawl = json.loads(SAMPLE_CRAWL.read_text(encoding="utf-8"))
    texts = [page["markdown"] for page in crawl["data"] if page.get("markdown")]
    texts += [path.read_text(encoding="utf-8") for path in sorted((TESTS / "pages").glob("*.md"))]
    texts.append(PAGE)
    return [text.split("\n") for text in texts]


def parse_or_error(lines: list[str]) -> object:
    try:
        return parse_blocks(lines)
    except Exception as error:  # a race may raise: compare it like any other result
        return f"{type(error).__name__}: {error}"


@pytest.fixture
def busy_switching():
    """Switch threads as often as the interpreter can, so parses interleave."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def test_parses_on_eight_threads_give_the_serial_result(busy_switching):
    pages = varied_pages()
    serial = [parse_blocks(lines) for lines in pages]
    assert {block.kind for blocks in serial for block in blocks} >= {
        HEADING,
        PARAGRAPH,
        CODE,
        TABLE,
        LIST,
        QUOTE,
        RULE,
    }
    jobs = [index for _ in range(12) for index in range(len(pages))]
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(lambda index: parse_or_error(pages[index]), jobs))
    wrong = [index for index, result in zip(jobs, found, strict=True) if result != serial[index]]
    assert not wrong, f"{len(wrong)} of {len(jobs)} threaded parses differ from the serial one"
    assert [parse_blocks(lines) for lines in pages] == serial


def test_mistletoe_renders_inline_markup_while_and_after_parses_run_on_threads(busy_switching):
    pages = varied_pages()
    done = threading.Event()

    def parse_until_done() -> None:
        while not done.is_set():
            for lines in pages:
                parse_or_error(lines)

    threads = [threading.Thread(target=parse_until_done) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        rendered = [mistletoe.markdown("*x*") for _ in range(200)]
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert set(rendered) == {"<p><em>x</em></p>\n"}
    assert mistletoe.markdown("*x*") == "<p><em>x</em></p>\n"
