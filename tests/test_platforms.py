"""Pages in each docs platform's Firecrawl form (tests/pages/), chunked end to end: every
H1/H2 covered under its clean title, no anchor decoration or UI debris left, `# comment`
lines in code never read as headings, each platform's code form fenced whole, terminal
colour codes kept in code only. Then site chrome across a crawl of twelve pages.

The pages are our own words in each platform's shapes. Each check is a function, so
`test_each_check_fails_without_its_rule` can show that it fails when the clean-up rule it
relies on is switched off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from firechunk.chunker.cleanup import CleanupOptions, clean_markdown
from firechunk.chunker.headings import heading_text
from firechunk.chunker.page import ChunkerOptions
from firechunk.quality import check_run
from firechunk.run.memory import chunk_crawl
from firechunk.run.plan import PageInput, page_inputs, plan_crawl
from firechunk.schemas.page import CrawlResult
from firechunk.schemas.report import ChunkRun
from firechunk.tokens import TokenCounter
from firechunk.validate.suites import validate_run
from firechunk.validate.tables import build_tables
from tests.chunk_helpers import crawl, page

PAGES_DIR = Path(__file__).resolve().parent / "pages"
ESC = "\x1b"


@dataclass(frozen=True)
class Platform:
    headings: tuple[tuple[int, str], ...]  # every H1/H2 of the page: (level, clean title)
    code: tuple[str, ...]  # fenced blocks as a chunk must hold them, from the platform's form
    comment: str  # a `# comment` line inside the page's code
    debris: tuple[str, ...] = ()  # UI lines that no chunk may hold


PLATFORMS: dict[str, Platform] = {
    "supabase": Platform(
        headings=(
            (1, "Widget client quickstart"),  # setext
            (2, "Install the client"),
            (2, "Connect to a project"),
            (2, "Read rows"),  # setext
            (2, "Troubleshooting"),
        ),
        code=(
            # "`", then `_10` markers and code lines in turn, then "`"
            "```\n# install the client from the package index\npip install harbor-widgets\n```",
            # "``\\", `_10\\` markers, code lines with the bracket's stray `\\`, then "``"
            "```\n"
            "from harbor_widgets import connect\n"
            "\n"
            "client = connect(\n"
            '    url="https://demo.harbor.invalid",\n'
            '    key="public-anon-key",\n'
            ")\n"
            "```",
        ),
        comment="# install the client from the package index",
        debris=("Loading...", "PIPConda", "ClientServer", "_10", "_10\\"),
    ),
    "mintlify": Platform(
        headings=(
            (2, "Install the CLI"),
            (2, "Create your first beam"),
            (2, "Next steps"),
        ),
        code=(
            "```bash\n"
            "# install the CLI globally with npm\n"
            "npm install --global lantern-cli\n"
            "lantern --version\n"
            "```",
        ),
        comment="# install the CLI globally with npm",
        debris=("Search...", "Ctrl K", "Ask AI", "Was this page helpful?", "YesNo", "On this page"),
    ),
    "sphinx_rtd": Platform(
        headings=(
            (1, "Repository objects"),
            (2, "Fetching a repository"),
            (2, "Listing open_issues"),  # written `open\_issues`
        ),
        code=(
            "```python\n"
            "# fetch one repository by its full name\n"
            'repo = client.get_repo("octo/lantern")\n'
            "print(repo.full_name)\n"
            "```",
        ),
        comment="# fetch one repository by its full name",
        debris=("* * *",),
    ),
    "mkdocs_material": Platform(
        headings=(
            (1, "Configuration"),
            (2, "Setting the theme"),
            (2, "Choosing a storage backend"),
            (2, "Enabling plugins"),
        ),
        code=(
            # every line, fences included, ends in `\\`; the info string is a CSS class
            "```\ntheme:\n  # pick one of the bundled palettes\n"
            "  name: lantern\n  palette: dusk\n```",
            "```\nplugins:\n  - search\n  - lantern-beams:\n      schedule_dir: beams/\n```",
            "```\nstorage:\n  backend: s3\n  bucket: lantern-artifacts\n```",  # ```highlight
        ),
        comment="  # pick one of the bundled palettes",
    ),
    "docusaurus": Platform(
        headings=(
            (1, "Deploying the site"),
            (2, "Build for production"),
            (2, "Serve the build locally"),
            (2, "Publish to a static host"),
            (2, "Set the base URL"),
        ),
        code=(
            # ```codeBlockLines_e6Vv
            "```\n# build the static files into ./build\nnpm run build\n```",
            "```\nexport default {\n"
            '  url: "https://example.org",\n  baseUrl: "/handbook/",\n};\n```',
        ),
        comment="# build the static files into ./build",
        debris=("Skip to main content", "Edit this page"),
    ),
    "gitbook": Platform(
        headings=(
            (1, "Webhooks"),
            (2, "Registering an endpoint"),
            (2, "Verifying signatures"),
            (2, "Retries"),
        ),
        code=(
            "```python\n"
            "# compare in constant time to avoid timing leaks\n"
            "import hmac\n"
            "\n"
            'expected = hmac.new(secret, body, "sha256").hexdigest()\n'
            "ok = hmac.compare_digest(expected, header)\n"
            "```",
        ),
        comment="# compare in constant time to avoid timing leaks",
    ),
    "terminal_output": Platform(
        headings=(
            (1, "Reading the test report"),
            (2, "Coloured output"),
            (2, "Turning colours off"),
            (2, "Warnings in the log"),
            (2, "Reading the summary"),
        ),
        code=(
            "```text\n"
            "$ lantern test\n"
            f"{ESC}[32m✔{ESC}[0m beams/nightly-report ok\n"
            f"{ESC}[32m✔{ESC}[0m beams/cleanup ok\n"
            f"{ESC}[31m✘{ESC}[0m beams/export failed after 3 retries\n"
            "# rerun only what failed with --last-failed\n"
            f"{ESC}[1m2 passed, 1 failed{ESC}[0m\n"
            "```",
        ),
        comment="# rerun only what failed with --last-failed",
    ),
}

# What heading anchors of every platform leave behind when they are not removed.
ANCHOR_TRACES = (
    "Permalink",
    "Permanent link",
    "Direct link to",
    "\u200b",
    "[\\#]",
    "[¶]",
    "[](#",
)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_MARKER = re.compile(r"_\d+\\?")


def platform_crawl(name: str) -> CrawlResult:
    markdown = (PAGES_DIR / f"{name}.md").read_text(encoding="utf-8")
    return crawl(page(markdown, url=f"https://docs.example.com/{name}", title=name))


def chunked(name: str, options: ChunkerOptions | None = None) -> tuple[CrawlResult, ChunkRun]:
    one_page = platform_crawl(name)
    return one_page, chunk_crawl(one_page, workers=1, options=options)


@pytest.fixture(scope="module", params=sorted(PLATFORMS))
def platform_run(request):
    name = request.param
    return name, *chunked(name)


# -- the checks ------------------------------------------------------------------------


def code_flags(lines: list[str]) -> list[bool]:
    """True for the lines inside fenced code, fences included."""
    flags, fence = [], None
    for line in lines:
        match = _FENCE.match(line)
        if fence is None:
            flags.append(bool(match))
            fence = match.group(1) if match else None
        else:
            flags.append(True)
            if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                fence = None
    return flags


def text_headings(text: str) -> set[str]:
    """Clean titles of the heading lines (ATX, or setext text) of a chunk, outside code."""
    lines = text.split("\n")
    flags = code_flags(lines)
    found = set()
    for i, (line, in_code) in enumerate(zip(lines, flags, strict=True)):
        if in_code or not line.strip():
            continue
        below = lines[i + 1] if i + 1 < len(lines) else ""
        if _ATX.match(line) or (_SETEXT.match(below) and not _SETEXT.match(line)):
            found.add(heading_text(line))
    return found


def check_headings(name: str, one_page: CrawlResult, run: ChunkRun) -> None:
    """Each H1/H2 is found under its clean title and covered by a chunk: in its headers or
    as a heading line of its text; the quality figures and the validation's own coverage
    table agree."""
    expected = PLATFORMS[name].headings
    (record,) = run.pages
    assert record.status == "chunked", record
    assert [(h.level, h.text) for h in record.headings] == list(expected)
    covered = set()
    for chunk in run.chunks:
        covered |= {chunk.data.headers.h1, chunk.data.headers.h2}
        covered |= text_headings(chunk.data.text)
    assert [title for _, title in expected if title not in covered] == []
    figures = check_run(one_page, run)
    assert figures.headings_h1_h2 == len(expected), figures.examples
    assert figures.headings_missing == 0, figures.examples
    assert figures.code_blocks_split == 0, figures.examples
    assert figures.line_number_markers == 0, figures.examples
    assert figures.header_only_chunks == 0, figures.examples
    assert figures.lines_under_wrong_header == 0, figures.examples
    assert figures.words_kept_pct >= 99.9, figures.examples
    headers = build_tables(run, TokenCounter())["headers"]
    assert list(zip(headers["level"], headers["heading"], strict=True)) == list(expected)
    assert set(headers["coverage"]) <= {"headers", "text"}, list(headers["coverage"])


def check_no_anchor_traces(name: str, one_page: CrawlResult, run: ChunkRun) -> None:
    for chunk in run.chunks:
        left = [trace for trace in ANCHOR_TRACES if trace in chunk.data.text]
        assert left == [], (chunk.data.text, left)


def check_no_debris(name: str, one_page: CrawlResult, run: ChunkRun) -> None:
    debris = set(PLATFORMS[name].debris)
    for chunk in run.chunks:
        lines = {line.strip() for line in chunk.data.text.split("\n")}
        assert lines & debris == set(), chunk.data.text
        assert not any(_MARKER.fullmatch(line) for line in lines), chunk.data.text


def check_comment_is_no_heading(name: str, one_page: CrawlResult, run: ChunkRun) -> None:
    comment = PLATFORMS[name].comment
    title = heading_text(comment)
    assert title and title != comment  # what a heading of that line would be called
    assert title not in {h.text for h in run.pages[0].headings}
    for chunk in run.chunks:
        assert title not in {chunk.data.headers.h1, chunk.data.headers.h2}, chunk.data.headers
        assert title not in chunk.metadata.breadcrumb
        lines = chunk.data.text.split("\n")
        flags = code_flags(lines)
        assert all(flag for line, flag in zip(lines, flags, strict=True) if line == comment)
    assert any(comment in chunk.data.text.split("\n") for chunk in run.chunks)


def check_code_blocks(name: str, one_page: CrawlResult, run: ChunkRun) -> None:
    """Each block in the platform's code form is one fenced block, whole, in one chunk:
    no line-number markers, no trailing backslashes, no CSS class for a language."""
    texts = [f"\n{chunk.data.text}\n" for chunk in run.chunks]
    for block in PLATFORMS[name].code:
        holders = [text for text in texts if f"\n{block}\n" in text]
        assert len(holders) == 1, (block, [chunk.data.text for chunk in run.chunks])


def check_terminal_escapes(name: str, one_page: CrawlResult, run: ChunkRun) -> None:
    """Colour codes stay in code, where they are the output shown, and go elsewhere."""
    (record,) = run.pages
    assert record.status == "chunked"
    markdown = one_page.data[0].markdown
    assert isinstance(markdown, str)
    inside = outside = 0
    for chunk in run.chunks:
        lines = chunk.data.text.split("\n")
        for line, in_code in zip(lines, code_flags(lines), strict=True):
            if in_code:
                inside += line.count(ESC)
            else:
                outside += line.count(ESC)
    assert outside == 0
    assert inside == markdown.count(ESC) - 6  # the six ESCs of the two prose lines
    prose = "Failed checks are printed in red and the summary in bold."
    assert any(prose in chunk.data.text.split("\n") for chunk in run.chunks)


CHECKS = (
    check_headings,
    check_no_anchor_traces,
    check_no_debris,
    check_comment_is_no_heading,
    check_code_blocks,
)


# -- each platform page ----------------------------------------------------------------


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
def test_platform_page(platform_run, check):
    check(*platform_run)


def test_terminal_output_is_chunked_with_its_colour_codes_in_code():
    one_page, run = chunked("terminal_output")
    markdown = one_page.data[0].markdown
    assert markdown.count(ESC) >= 20  # a page of them, not one stray character
    check_terminal_escapes("terminal_output", one_page, run)
    removed = clean_markdown(markdown).removed["control_chars"]
    assert "".join(removed) == f"{ESC}[31m{ESC}[0m{ESC}[1m{ESC}[0m{ESC}[33m{ESC}[0m"


def test_every_platform_page_passes_the_validation_suites(tmp_path):
    """The real GX suites, over one crawl of all the platform pages."""
    pages = [platform_crawl(name).data[0] for name in sorted(PLATFORMS)]
    everything = CrawlResult(data=pages)
    run = chunk_crawl(everything, workers=1)
    assert run.report.pages_chunked == len(PLATFORMS)
    outcome = validate_run(run, tmp_path)
    assert outcome.success, [(item.name, item.examples) for item in outcome.failed]
    figures = check_run(everything, run)
    assert figures.headings_h1_h2 == sum(len(p.headings) for p in PLATFORMS.values())
    assert figures.headings_missing == 0, figures.examples


# Each check, on a page where the clean-up rule it relies on matters, with that rule off:
# the check must fail, or it proves nothing.
RULE_OFF = [
    ("supabase", "heading_anchors", check_no_anchor_traces),
    ("sphinx_rtd", "heading_anchors", check_no_anchor_traces),  # also the definitions' ¶
    ("docusaurus", "heading_anchors", check_no_anchor_traces),
    ("mintlify", "heading_anchors", check_no_anchor_traces),
    ("gitbook", "heading_anchors", check_no_anchor_traces),
    ("mkdocs_material", "heading_anchors", check_no_anchor_traces),
    ("supabase", "flattened_code", check_code_blocks),
    ("supabase", "flattened_code", check_comment_is_no_heading),
    ("supabase", "flattened_code", check_no_debris),
    ("supabase", "flattened_code", check_headings),
    ("supabase", "loading", check_no_debris),
    ("supabase", "tab_labels", check_no_debris),
    ("mkdocs_material", "continued_code", check_code_blocks),
    ("mkdocs_material", "continued_code", check_headings),
    ("mkdocs_material", "fence_classes", check_code_blocks),
    ("docusaurus", "fence_classes", check_code_blocks),
    ("docusaurus", "widgets", check_no_debris),
    ("mintlify", "widgets", check_no_debris),
    ("mintlify", "page_toc", check_no_debris),
    ("sphinx_rtd", "rules", check_no_debris),
    ("terminal_output", "control_chars", check_terminal_escapes),
]


@pytest.mark.parametrize(
    "name, rule, check",
    RULE_OFF,
    ids=[f"{name}-{rule}-{check.__name__}" for name, rule, check in RULE_OFF],
)
def test_each_check_fails_without_its_rule(name, rule, check):
    options = ChunkerOptions(cleanup=replace(CleanupOptions(), **{rule: False}))
    one_page, run = chunked(name, options)
    with pytest.raises(AssertionError):
        check(name, one_page, run)


# -- site chrome across a crawl ----------------------------------------------------------

NAVIGATION = [
    "- [Home](https://docs.example.com/)",
    "- [Guides](https://docs.example.com/guides)",
    "- [API reference](https://docs.example.com/api)",
]
FOOTER = "© 2025 Lantern Labs · Privacy · Terms"
SETUP = (
    "Project setup: create a project on the dashboard, copy its key into `LANTERN_KEY` "
    "and run `lantern init` in the folder that holds your beams."
)
TOPICS = [
    *("beams", "schedules", "retries", "secrets", "webhooks", "storage"),
    *("plugins", "themes", "exports", "imports", "alerts", "tokens"),
]


def chrome_page(i: int, setup: bool) -> dict:
    topic = TOPICS[i]
    body = [
        *NAVIGATION,
        "",
        f"# Working with {topic}",
        "",
        f"This page explains how Lantern handles {topic} and when to change the defaults.",
        "",
    ]
    if setup:
        body += [SETUP, ""]
    body += [
        f"## Settings for {topic}",
        "",
        f"Each of the {topic} settings lives in `lantern.yml` under the `{topic}` key.",
        "",
        FOOTER,
        "",
    ]
    return page("\n".join(body), url=f"https://docs.example.com/{topic}", title=topic)


def chrome_crawl(n: int, setup_on: tuple[int, ...] = ()) -> CrawlResult:
    return crawl(*(chrome_page(i, i in setup_on) for i in range(n)))


CHROME = {*NAVIGATION, FOOTER}


def inputs_of(crawled: CrawlResult) -> list[PageInput]:
    """The crawl's pages to chunk, as the chunker takes them."""
    plan = plan_crawl(crawled.data)
    return list(page_inputs(crawled.data, plan, plan.to_chunk))


def test_navigation_and_footer_repeated_across_the_crawl_are_dropped():
    setup_on = (2, 5, 7, 10)
    twelve = chrome_crawl(12, setup_on)
    assert all(page_input.chrome >= CHROME for page_input in inputs_of(twelve))
    run = chunk_crawl(twelve, workers=1)
    assert run.report.pages_chunked == 12
    for chunk in run.chunks:
        lines = {line.strip() for line in chunk.data.text.split("\n")}
        assert lines & CHROME == set(), chunk.data.text
    holders = {chunk.metadata.source_url for chunk in run.chunks if SETUP in chunk.data.text}
    assert holders == {f"https://docs.example.com/{TOPICS[i]}" for i in setup_on}
    figures = check_run(twelve, run)
    assert figures.chrome_share_pct <= 2, figures.chrome_tokens
    assert figures.headings_missing == 0 and figures.words_kept_pct >= 99.9, figures.examples


def test_content_repeated_on_most_pages_stays_where_content_stands():
    """The setup paragraph on 8 of 12 pages is made of chrome lines by count, but it
    stands between headings, not where navigation or footers stand."""
    run = chunk_crawl(chrome_crawl(12, setup_on=tuple(range(8))), workers=1)
    holders = {chunk.metadata.source_url for chunk in run.chunks if SETUP in chunk.data.text}
    assert len(holders) == 8
    assert not any(FOOTER in chunk.data.text for chunk in run.chunks)


@pytest.mark.parametrize("pages", [1, 9])
def test_below_ten_distinct_pages_no_line_is_chrome(pages):
    """The footer, which only its repeating shows to be chrome, stays; the link list above
    the title goes all the same, by its shape (`firechunk.chunker.navigation`)."""
    few = chrome_crawl(pages)
    assert all(page_input.chrome == frozenset() for page_input in inputs_of(few))
    run = chunk_crawl(few, workers=1)
    for url in {chunk.metadata.source_url for chunk in run.chunks}:
        text = "\n".join(c.data.text for c in run.chunks if c.metadata.source_url == url)
        assert FOOTER in text.split("\n"), text
        assert not any(line in text.split("\n") for line in NAVIGATION), text


def test_twelve_copies_of_one_page_are_one_distinct_page():
    """An app served at 12 URLs is one page: its navigation is not chrome."""
    same = chrome_page(0, setup=False)
    copies = crawl(
        *(page(same["markdown"], url=f"https://docs.example.com/beams/{i}") for i in range(12))
    )
    assert all(page_input.chrome == frozenset() for page_input in inputs_of(copies))
