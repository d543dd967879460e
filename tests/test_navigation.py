"""Navigation is not content (`firechunk.chunker.navigation`): a sidebar tree, a breadcrumb,
a pager and an "On this page" list go on a crawl of any size, one page included, and the
page's content stays; an index page's link lists are kept and tagged `kind = "navigation"`,
which an ordinary chunk's JSON never mentions.

The pages in tests/pages/ are our own words in the shapes Firecrawl gives Furo
(`furo.md`), Docusaurus (`docusaurus_sidebar.md`) and GitBook (`gitbook_sidebar.md`) pages
with their navigation, and an API index page of bare links (`api_index.md`); a Furo API
reference whose sidebar tree is most of every page is built by tests/furo_site.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from firechunk.chunker.cleanup import BLANK_LINES, CleanupOptions, clean_markdown
from firechunk.chunker.navigation import NAVIGATION
from firechunk.chunker.page import ChunkerOptions
from firechunk.pipeline import Request, run_pipeline
from firechunk.publish import format_result
from firechunk.quality import check_run
from firechunk.run.cache import _VERSIONED_SOURCES
from firechunk.run.memory import chunk_crawl
from firechunk.run.write import write_run_outputs
from firechunk.schemas.chunk import Chunk
from firechunk.schemas.page import CrawlResult
from firechunk.schemas.report import ChunkRun
from firechunk.tokens import TokenCounter
from firechunk.validate.suites import validate_run
from firechunk.validate.tables import build_tables
from tests.chunk_helpers import crawl, page, run_markdown, sentences
from tests.furo_site import furo_crawl, furo_page
from tests.furo_site import page_url as furo_url

PAGES_DIR = Path(__file__).resolve().parent / "pages"


@dataclass(frozen=True)
class NavPage:
    content: tuple[str, ...]  # lines of the page's own text, each in exactly one chunk
    navigation: tuple[str, ...]  # texts of its navigation, in no chunk


NAV_PAGES: dict[str, NavPage] = {
    "furo": NavPage(
        content=(
            "# Retries",
            "A beam that fails is not given up on at once. Lantern waits, then runs it "
            "again, until it succeeds or the retry budget is spent.",
            "retry_delay: 30s",
            "When a retry is still waiting as the next scheduled run comes due, the "
            "scheduled run waits for it. Two runs of one beam never overlap.",
            "Copyright © 2025, the Lantern authors",  # a footer, not navigation
        ),
        navigation=(
            "Toggle navigation of",
            "/getting-started/",  # the sidebar's links
            "/schedules/time-zones.html",
            "/api-reference/",
            "changelog.html",
            "Skip to content",
            "Back to top",
            "Light mode",
            "Lantern 2.4 documentation",  # the site's name and logo link
            "user-guide/secrets.html",  # the pager
            "On this page",
            "retries.html#setting-the-budget",  # the page's table of contents
            "Reference",  # a sidebar caption
        ),
    ),
    "docusaurus_sidebar": NavPage(
        content=(
            "# Tides and schedules",
            "Harbor plans every docking around the tide table of the port. A ship with a "
            "deep draught can only enter while the water is high enough.",
            "  zone: Europe/Amsterdam",
            "Further reading:",  # an author's own links, above the pager: kept
            "- [Docking ships](https://harbor.example.dev/docs/guides/docking)",
            "- [Customs rules](https://harbor.example.dev/docs/guides/customs)",
            "Last updated on Apr 2, 2025",
        ),
        navigation=(
            "[Blog]",  # the navbar
            "/docs/getting-started/install",  # the sidebar
            "- Operations",
            "/operations/night-shifts",
            "- Tides and schedules",  # the breadcrumb
            "Edit this page",
            "/docs/guides/manifests",  # the pager
            "(#draught-limits)",  # the table of contents below the pager
            "Community",  # the footer's link columns
            "/docs/intro",
        ),
    ),
    "gitbook_sidebar": NavPage(
        content=(
            "# API keys",
            "Create the new key first, deploy it everywhere, then revoke the old one. "
            "Revoked keys stop working within a minute.",
            'export LANTERN_KEY="lk_live_example"',
            "Last updated 3 months ago",
        ),
        navigation=(
            "Lantern Handbook",  # the site's name, and the breadcrumb
            "- Guides",  # a sidebar section
            "/guides/webhooks/event-types",
            "/reference/rest/artifacts",
            "Powered by GitBook",
            "(#scopes)",  # the table of contents
            "> [Guides]",
            "[PreviousWebhooks]",  # the pager
        ),
    ),
}


def page_crawl(*names: str) -> CrawlResult:
    return crawl(
        *(
            page(
                (PAGES_DIR / f"{name}.md").read_text(encoding="utf-8"),
                url=f"https://docs.example.com/{name}",
                title=name,
            )
            for name in names
        )
    )


@pytest.fixture(scope="module", params=sorted(NAV_PAGES))
def nav_run(request) -> tuple[str, CrawlResult, ChunkRun]:
    one_page = page_crawl(request.param)
    return request.param, one_page, chunk_crawl(one_page, workers=1)


_LINK_ONLY = re.compile(r"\s*(?:[-*+]\s+)?(?:\[[^\]\n]*\]\([^)\n]*\)[\s»›>|·]*)+")


def link_line_share(text: str) -> float:
    """The share of a chunk's non-blank lines that are nothing but links (a plain line scan,
    not the chunker's own rule)."""
    lines = [line for line in text.split("\n") if line.strip()]
    return sum(bool(_LINK_ONLY.fullmatch(line)) for line in lines) / max(1, len(lines))


# -- navigation goes, content stays, on a one-page crawl --------------------------------


def test_no_chunk_is_a_link_tree(nav_run):
    name, _, run = nav_run
    assert run.pages[0].status == "chunked"
    for chunk in run.chunks:
        assert link_line_share(chunk.data.text) < 0.5, chunk.data.text


def test_the_navigation_is_in_no_chunk(nav_run):
    name, _, run = nav_run
    for chunk in run.chunks:
        left = [text for text in NAV_PAGES[name].navigation if text in chunk.data.text]
        assert left == [], (left, chunk.data.text)


def test_the_content_is_kept_whole(nav_run):
    name, _, run = nav_run
    for line in NAV_PAGES[name].content:
        holders = [chunk for chunk in run.chunks if line in chunk.data.text.split("\n")]
        assert len(holders) == 1, (line, [chunk.data.text for chunk in run.chunks])


def test_the_quality_figures_hold(nav_run):
    name, one_page, run = nav_run
    figures = check_run(one_page, run)
    assert figures.headings_missing == 0, figures.examples
    assert figures.header_only_chunks == 0, figures.examples
    assert figures.code_blocks_split == 0, figures.examples
    assert figures.words_kept_pct >= 99.9, figures.examples


def test_content_chunks_carry_no_kind(nav_run):
    _, _, run = nav_run
    for chunk in run.chunks:
        assert chunk.metadata.kind is None
        assert "kind" not in chunk.to_json()["metadata"]


def test_without_site_chrome_the_navigation_stays():
    options = ChunkerOptions(cleanup=replace(CleanupOptions(), site_chrome=False))
    run = chunk_crawl(page_crawl("furo"), workers=1, options=options)
    text = "\n".join(chunk.data.text for chunk in run.chunks)
    assert "Toggle navigation of User guide" in text
    assert any(link_line_share(chunk.data.text) > 0.5 for chunk in run.chunks)


def test_a_small_crawl_of_sidebar_pages_has_no_sidebar_chunks():
    """The issue's case: a few pages under one big sidebar, too few for the crawl-wide
    chrome lines (`firechunk.run.chrome`) to see it."""
    markdown = (PAGES_DIR / "furo.md").read_text(encoding="utf-8")
    head, body = markdown.split("# Retries", 1)
    pages = [
        page(head + f"# {topic}\n\n" + sentences(300, seed, tag=topic), url=f"https://d.ex/{topic}")
        for seed, topic in enumerate(("beams", "alerts", "storage"))
    ]
    run = chunk_crawl(crawl(*pages), workers=1)
    assert len(run.chunks) == 3
    for chunk in run.chunks:
        assert "Toggle" not in chunk.data.text and "](" not in chunk.data.text, chunk.data.text


def test_every_navigation_page_passes_the_validation_suites(tmp_path):
    everything = page_crawl(*sorted(NAV_PAGES), "api_index")
    run = chunk_crawl(everything, workers=1)
    outcome = validate_run(run, tmp_path)
    assert outcome.success, [(item.name, item.examples) for item in outcome.failed]


# -- a big sidebar tree: removed, and counted as removed ------------------------------------


def furo_pages(count: int) -> list[dict]:
    modules = ("pulse", "flare", "beacon", "horn", "lamp")[:count]
    return [
        page(furo_page("signals", module, seed), url=furo_url(f"signals.{module}"), title=module)
        for seed, module in enumerate(modules)
    ]


def test_the_blank_lines_of_a_removed_sidebar_tree_go_with_it():
    """A Furo API reference's tree is a few hundred blocks with blank lines between them:
    the blank lines go with the tree, so the page starts at its first kept line and no
    run of them is left where the tree stood."""
    markdown = furo_page("signals", "pulse", 0)
    cleaned = clean_markdown(markdown)
    assert "Toggle navigation of" not in cleaned.text
    assert not cleaned.text.startswith("\n") and "\n\n\n" not in cleaned.text
    assert len(cleaned.removed[BLANK_LINES]) > 400


def test_a_page_under_a_big_sidebar_tree_has_its_tokens_in_its_chunks():
    """Each page's tokens after clean-up are those its chunks hold. The tree's blank
    lines, which no chunk holds, go with it: left in the page they are 4 % of its
    tokens, and `page_tokens_in_chunks_ratio` (0.97 at least) fails every page."""
    run = chunk_crawl(crawl(*furo_pages(3)), workers=1)
    pages = build_tables(run, TokenCounter(run.report.encoding))["pages"]
    assert pages["tokens_after_cleanup"].min() >= 300  # the ratio, not the gap, is checked
    for ratio in pages["token_ratio"]:
        assert 0.99 <= ratio <= 1.01
    for chunk in run.chunks:
        assert "Toggle navigation of" not in chunk.data.text
        assert "](../reference/" not in chunk.data.text, chunk.data.text


def test_a_crawl_of_furo_api_pages_publishes_without_its_sidebar(tmp_path):
    """Five pages of the reference, each mostly its sidebar tree, through the run's stages:
    validated, published, and the tree in no chunk."""
    crawl_file = furo_crawl(tmp_path / "furo.json", pages=5)
    result = run_pipeline(Request(replay=crawl_file, data_dir=tmp_path)).result
    assert result is not None and result.published, format_result(result)
    chunks = json.loads((tmp_path / "latest" / "chunks.json").read_text(encoding="utf-8"))
    assert len({chunk["metadata"]["sourceUrl"] for chunk in chunks}) == 5
    text = "\n".join(chunk["data"]["text"] for chunk in chunks)
    assert "Toggle navigation of" not in text
    assert "](../reference/" not in text
    assert text.count("owns the channel; a receiver reads from it") == 5


# -- the rules, one shape at a time -------------------------------------------------------

TITLE_AND_BODY = ["# Beams", "", "A beam runs on a schedule and stores what it made."]


def cleaned(lines: list[str]) -> list[str]:
    return [line for line in clean_markdown("\n".join(lines)).lines if line.strip()]


@pytest.mark.parametrize(
    "crumb",
    [
        "Home > Guides > Beams",
        "* [Home](https://d.ex/) * [Guides](https://d.ex/guides)",
        "[Home](https://d.ex/) › [Guides](https://d.ex/guides) › Beams",
        "- [Home](https://d.ex/)\n- [Guides](https://d.ex/guides)\n- Beams",
    ],
)
def test_a_breadcrumb_above_the_title_goes(crumb):
    assert cleaned([crumb, "", *TITLE_AND_BODY]) == [TITLE_AND_BODY[0], TITLE_AND_BODY[2]]


def test_a_breadcrumb_like_line_in_the_body_stays():
    lines = [*TITLE_AND_BODY, "", "Settings > API > Keys", "", "Copy the key from there."]
    assert cleaned(lines) == [line for line in lines if line]


@pytest.mark.parametrize(
    "pager",
    [
        "Previous\n\n[Schedules](https://d.ex/schedules)\n\nNext\n\n[Alerts](https://d.ex/alerts)",
        "[« Previous](https://d.ex/schedules) [Next »](https://d.ex/alerts)",
        "[Previous\\\n\\\nSchedules](https://d.ex/schedules) [Next\\\n\\\nAlerts](https://d.ex/a)",
        "[PreviousSchedules](https://d.ex/schedules)[NextAlerts](https://d.ex/alerts)",
        "[Next: Alerts](https://d.ex/alerts)",
    ],
)
def test_a_pager_at_the_end_goes(pager):
    assert cleaned([*TITLE_AND_BODY, "", pager]) == [TITLE_AND_BODY[0], TITLE_AND_BODY[2]]


def test_a_link_that_only_starts_like_a_pager_stays():
    lines = [*TITLE_AND_BODY, "", "[Next steps](https://d.ex/next-steps)"]
    assert cleaned(lines) == [line for line in lines if line]


def test_a_link_list_that_is_a_section_body_stays():
    """ "More resources" at the end of a page, and a list after a page's intro (no H1)."""
    resources = ["## More resources", "", "- [Guide](https://d.ex/g)", "- [FAQ](https://d.ex/f)"]
    lines = [*TITLE_AND_BODY, "", *resources]
    assert cleaned(lines) == [line for line in lines if line]
    intro = ["This guide covers:", "", "- [Email](https://d.ex/e)", "- [Phone](https://d.ex/p)"]
    lines = [*intro, "", "## Email", "", "Send a link by email."]
    assert cleaned(lines) == [line for line in lines if line]


def test_a_tree_with_toggles_goes_wherever_it_stands():
    tree = [
        "- [Guides](https://d.ex/guides)",
        "",
        "  Toggle navigation of Guides",
        "",
        "  - [Beams](https://d.ex/guides/beams)",
        "  - [Alerts](https://d.ex/guides/alerts)",
    ]
    lines = [*TITLE_AND_BODY, "", *tree, "", "## Alerts", "", "An alert fires once."]
    assert cleaned(lines) == [*cleaned(TITLE_AND_BODY), "## Alerts", "An alert fires once."]


def test_a_page_of_nothing_but_links_is_kept_whole():
    """Without a title, or with nothing but a title besides: emptied, it would be
    quarantined, and its links are all it has to be found by."""
    lines = [f"- [Page {i}](https://d.ex/{i})" for i in range(12)]
    assert cleaned(lines) == lines
    assert cleaned([*lines, "", "# Sitemap"]) == [*lines, "# Sitemap"]


def test_an_on_this_page_list_that_links_its_page_first_goes():
    toc = [
        "On this page",
        "",
        "- [Beams](https://d.ex/beams)",
        "  - [Creating](https://d.ex/beams#creating)",
        "  - [Deleting](https://d.ex/beams#deleting)",
    ]
    page = clean_markdown("\n".join([*TITLE_AND_BODY, "", *toc]))
    assert page.removed["page_toc"] == ["\n".join(toc)]


def test_an_edit_link_is_a_widget():
    page = clean_markdown("\n".join([*TITLE_AND_BODY, "", "[Edit this page](https://d.ex/e)"]))
    assert page.removed["widgets"] == ["[Edit this page](https://d.ex/e)"]


# -- index pages ----------------------------------------------------------------------------


def test_an_index_page_is_kept_and_its_chunks_tagged():
    one_page = page_crawl("api_index")
    run = chunk_crawl(one_page, workers=1)
    assert len(run.chunks) >= 2
    assert all(chunk.metadata.kind == NAVIGATION for chunk in run.chunks)
    assert all(chunk.to_json()["metadata"]["kind"] == NAVIGATION for chunk in run.chunks)
    text = "\n".join(chunk.data.text for chunk in run.chunks)
    for name in ("lantern.alerts", "SlackChannel", "RateLimited", "next_fire_time", "signed_url"):
        assert f"[{name}]" in text  # the index's words stay, for search by words
    assert "- API index" not in text  # its breadcrumb goes all the same
    assert check_run(one_page, run).words_kept_pct >= 99.9


def test_prose_on_an_index_page_is_not_tagged():
    links = [f"- [Class{i}](https://d.ex/objects/Class{i}.html)" for i in range(150)]
    markdown = "\n".join(
        ["# Objects", "", sentences(250, 1, tag="base"), "", "## All classes", "", *links]
    )
    run = run_markdown(markdown)
    kinds = [(chunk.metadata.kind, "base1x1" in chunk.data.text) for chunk in run.chunks]
    assert (None, True) in kinds
    assert all(kind == NAVIGATION for kind, prose in kinds if not prose)
    assert sum(kind == NAVIGATION for kind, _ in kinds) >= 2


def test_a_content_page_with_link_lists_is_not_tagged():
    links = [f"- [Guide {i}](https://d.ex/guides/{i})" for i in range(12)]
    markdown = "\n".join(["# Beams", "", sentences(400, 2), "", "## See also", "", *links])
    run = run_markdown(markdown)
    assert all(chunk.metadata.kind is None for chunk in run.chunks)


def test_the_run_files_carry_the_kind_of_navigation_chunks_only(tmp_path):
    run = chunk_crawl(page_crawl("api_index", "furo"), workers=1)
    write_run_outputs(run, tmp_path)
    from_json = json.loads((tmp_path / "chunks.json").read_text(encoding="utf-8"))
    kinds = [row["metadata"].get("kind", "absent") for row in from_json]
    assert set(kinds) == {NAVIGATION, "absent"}
    from_parquet = pq.read_table(tmp_path / "chunks.parquet").to_pylist()
    assert [row["metadata"]["kind"] for row in from_parquet] == [
        None if kind == "absent" else kind for kind in kinds
    ]
    assert [Chunk.model_validate(row) for row in from_parquet] == run.chunks
    assert [Chunk.model_validate(row).to_json() for row in from_parquet] == from_json


def test_the_page_cache_key_covers_the_navigation_rules():
    assert "navigation.py" in {path.name for path in _VERSIONED_SOURCES}
