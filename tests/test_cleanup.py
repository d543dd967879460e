"""Clean-up of Firecrawl debris (rule 6): each rule removes only its debris and can be
switched off; everything else, and everything inside fenced code, is kept."""

from __future__ import annotations

from dataclasses import replace

import pytest

from firechunk.api import chunk_markdown
from firechunk.chunker.cleanup import (
    BLANK_LINES,
    RULES,
    CleanupOptions,
    candidate_lines,
    clean_markdown,
    is_tab_label_run,
)

# One page holding one piece of debris per rule, between ordinary paragraphs.
DEBRIS_PAGE = "\n".join(
    [
        "Docs home · Guides",  # -1 site_chrome (CHROME), above the first heading
        "",
        "# Install the client [\\#](\\#install-the-client)",  # 1 heading_anchors
        "",
        "PIPConda",  # 3 tab_labels
        "",
        "Loading...",  # 5 loading
        "",
        "Run the installer first.",  # 7
        "",
        "* * *",  # 9 rules
        "",
        "2",  # 11 step_numbers
        "",
        "`",  # 13 flattened_code
        "_10",
        "pip install supabase",
        "_10",
        "python -m supabase",
        "`",  # 18
        "",
        "Then import it.",  # 20
        "",
        "```notranslate",  # 22 fence_classes
        "select 1;",
        "```",
        "",
        "Colour\x1b[0m reset.",  # 26 control_chars
        "",
        "Was this page helpful?",  # 28 widgets
        "",
        "On this page",  # 30 page_toc
        "",
        "- [Install the client](#install-the-client)",
        "- [Then import it](#then-import-it)",
        "",
        'See [¶](#x "Permalink to this definition") above.',  # 37 heading_anchors
        "",
        "```\\",  # 39 continued_code, last: switched off, its fence never closes
        "pip install supabase\\",
        "```\\",
    ]
)
CHROME = frozenset({"Docs home · Guides"})


def test_every_rule_removes_only_its_debris():
    page = clean_markdown(DEBRIS_PAGE, chrome=CHROME)
    assert page.lines == [
        "# Install the client",
        "",  # 2: with 4 and 6 where PIPConda and Loading... were
        "Run the installer first.",
        "",  # 8: with 10 and 12
        "```",
        "pip install supabase",
        "python -m supabase",
        "```",
        "",
        "Then import it.",
        "",
        "```",
        "select 1;",
        "```",
        "",
        "Colour reset.",
        "",  # 27: with 29 and 34
        "See above.",
        "",
        "```",
        "pip install supabase",
        "```",
    ]
    assert page.removed["fence_classes"] == ["notranslate"]
    assert page.removed["control_chars"] == ["\x1b[0m"]
    assert page.removed["widgets"] == ["Was this page helpful?"]
    assert page.removed["page_toc"] == ["\n".join(DEBRIS_PAGE.split("\n")[31:35])]
    assert page.removed["site_chrome"] == ["Docs home · Guides"]
    assert page.removed["continued_code"] == ["\\" * 3]
    assert page.removed["tab_labels"] == ["PIPConda"]
    assert page.removed["loading"] == ["Loading..."]
    assert page.removed["rules"] == ["* * *"]
    assert page.removed["step_numbers"] == ["2"]
    assert page.removed["heading_anchors"] == [
        " [\\#](\\#install-the-client)",
        ' [¶](#x "Permalink to this definition") ',
    ]
    assert page.removed["flattened_code"] == ["`\n_10\n_10\n`"]
    assert page.removed[BLANK_LINES] == [""] * 7
    assert page.warnings == []


def test_source_lines_point_back_to_the_crawled_page():
    page = clean_markdown(DEBRIS_PAGE, chrome=CHROME)
    raw = DEBRIS_PAGE.split("\n")
    assert len(page.source_lines) == len(page.lines)
    assert page.source_lines == sorted(page.source_lines)
    for line, number in zip(page.lines, page.source_lines, strict=True):
        if line and not line.startswith("```"):  # fences of unflattened code are new text
            assert all(word in raw[number - 1] for word in line.split())
    # The fences of the unflattened block sit on the lone-backtick lines.
    assert page.source_lines[page.lines.index("```")] == 15
    closing = page.lines.index("```", page.lines.index("```") + 1)
    assert page.source_lines[closing] == 20


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_can_be_switched_off(rule):
    everything = clean_markdown(DEBRIS_PAGE, chrome=CHROME)
    without = clean_markdown(DEBRIS_PAGE, replace(CleanupOptions(), **{rule: False}), CHROME)
    assert without.removed[rule] == []
    assert without.lines != everything.lines
    for other in RULES:
        if other != rule:
            assert without.removed[other] == everything.removed[other]
    if rule == "heading_anchors":
        assert without.lines[0] == "# Install the client [\\#](\\#install-the-client)"


def test_all_rules_off_keeps_the_page_as_it_is():
    page = clean_markdown(DEBRIS_PAGE, CleanupOptions.none(), CHROME)
    # Without its rule the backslash-continued block's fence never closes: closed at the end.
    assert page.lines == [*DEBRIS_PAGE.split("\n"), "```"]
    assert all(not removed for removed in page.removed.values())


def test_fenced_code_is_never_touched():
    code = [
        "```text",
        "Loading...",
        "* * *",
        "1",
        "",
        "PIPConda",
        "",
        "# comment [\\#](\\#not-a-heading)",
        "`",
        "_10",
        "x",
        "`",
        "```",
    ]
    page = clean_markdown("\n".join(code))
    assert page.lines == code
    assert all(not removed for removed in page.removed.values())


def test_tilde_fences_and_longer_fences_protect_code_too():
    text = "~~~~\nLoading...\n~~~\nstill code\n~~~~\n\nLoading..."
    page = clean_markdown(text)
    assert page.lines == ["~~~~", "Loading...", "~~~", "still code", "~~~~"]


def test_fences_opened_or_closed_after_odd_white_space_are_still_fences():
    # Lines are looked at only where a regex finds something a rule may change; a fence
    # closed by a tab-indented line, or debris after a form feed, must still be found.
    text = "```\nLoading...\n\t```\n\nLoading...\n\n\x0c2\x0c\n\n * * *\x0c"
    page = clean_markdown(text)
    assert page.lines == ["```", "Loading...", "\t```"]
    assert page.removed["loading"] == ["Loading..."]
    assert page.removed["step_numbers"] == ["2"]
    assert page.removed["rules"] == [" * * *"]
    assert page.removed["control_chars"] == ["\x0c\x0c", "\x0c"]


def test_every_line_a_rule_changes_is_a_candidate():
    # (Rules over several lines are left out: they read their block from its first line on.)
    options = CleanupOptions(flattened_code=False, page_toc=False, continued_code=False)
    page = clean_markdown(DEBRIS_PAGE, options, CHROME)
    raw = DEBRIS_PAGE.split("\n")
    kept = dict(zip(page.source_lines, page.lines, strict=True))
    # Blank lines go with the lines removed beside them (`blank_lines`), by no rule of
    # their own: only the lines with text are the rules' to find.
    changed = {i for i, line in enumerate(raw) if line.strip() and kept.get(i + 1) != line}
    assert changed and changed <= set(candidate_lines(DEBRIS_PAGE))
    assert len(list(candidate_lines(DEBRIS_PAGE))) < len(raw)  # plain prose is skipped


def test_indented_code_lines_are_not_debris():
    page = clean_markdown("Some text.\n\n    1\n\n    Loading...\n")
    assert "    1" in page.lines
    assert "    Loading..." in page.lines


# -- flattened code -------------------------------------------------------------------


def test_flattened_code_with_sequential_numbers_becomes_fenced():
    text = "`\n1\nconst a = 1\n2\nconst b = 2\n3\n\n4\nreturn a + b\n`"
    page = clean_markdown(text)
    assert page.lines == ["```", "const a = 1", "const b = 2", "", "return a + b", "```"]
    assert page.removed["flattened_code"] == ["`\n1\n2\n3\n4\n`"]


def test_flattened_code_keeps_code_lines_that_look_like_markers_of_another_kind():
    # With `_10` markers, a code line "1" is code, not a marker.
    page = clean_markdown("`\n_10\nprint(\n_10\n1\n_10\n)\n`")
    assert page.lines == ["```", "print(", "1", ")", "```"]


def test_sequential_markers_must_follow_each_other():
    # "5" after marker "2" is not the next marker: it is a code line.
    page = clean_markdown("`\n1\nitems = [\n2\n5\n3\n]\n`")
    assert page.lines == ["```", "items = [", "5", "]", "```"]


def test_ambiguous_sequential_block_is_left_verbatim_rather_than_mangled():
    # Code line "3" right after marker "2" reads as the next marker; the block then breaks
    # the pattern and is kept as it was crawled: no line is lost.
    text = "`\n1\nitems = [\n2\n3\n3\n]\n`"
    page = clean_markdown(text)
    assert page.lines == text.split("\n")


def test_flattened_code_with_backticks_gets_a_longer_fence():
    page = clean_markdown("`\n_10\nprint('```')\n_10\nx = 1\n`")
    assert page.lines == ["````", "print('```')", "x = 1", "````"]


@pytest.mark.parametrize(
    "text",
    [
        "`\nnot a marker\n`",  # first line is no marker
        "`\n_10\nfoo\nbar\n`",  # two lines after one marker
        "`\n_10\nfoo\n_10\nbar",  # never closed
        "`",  # alone at the end of the page
    ],
)
def test_text_that_only_resembles_flattened_code_is_left_alone(text):
    page = clean_markdown(text)
    assert page.lines == text.split("\n")
    assert page.removed["flattened_code"] == []


# -- heading anchors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, expected",
    [
        ("## Row level security [\\#](\\#row-level-security)", "## Row level security"),
        ("### Policies [#](https://supabase.com/docs/guides#policies)", "### Policies"),
        ("# Title [\\#](<\\#odd slug>)", "# Title"),
        (
            "## Keep [links](https://example.com) in text",
            "## Keep [links](https://example.com) in text",
        ),
    ],
)
def test_heading_anchor_links_are_dropped(line, expected):
    assert clean_markdown(line).lines == [expected]


def test_anchor_links_outside_headings_are_kept():
    line = "See [\\#](\\#row-level-security) above."
    assert clean_markdown(line).lines == [line]


# -- the blank lines around removed lines -------------------------------------------------


def test_the_blank_lines_around_removed_lines_go_but_one():
    page = clean_markdown("Intro.\n\nLoading...\n\n\nMore.")
    assert page.lines == ["Intro.", "", "More."]
    assert page.source_lines == [1, 2, 6]
    assert page.removed[BLANK_LINES] == ["", ""]


def test_at_the_page_ends_the_blank_lines_around_removed_lines_all_go():
    page = clean_markdown("Loading...\n\nIntro.\n\nCopy\n\n")
    assert page.lines == ["Intro."]
    assert page.removed[BLANK_LINES] == ["", "", "", ""]


def test_blank_lines_where_nothing_was_removed_stay():
    text = "\n\nIntro.\n\n\n\nMore.\n\n"
    assert clean_markdown(text).lines == text.split("\n")


def test_blank_lines_in_code_stay_when_lines_around_them_are_removed():
    code = ["```", "a = 1", "", "", "", "b = 2", "```"]
    page = clean_markdown("\n".join(["Loading...", "", *code, "", "Copy", "", "Done."]))
    assert page.lines == [*code, "", "Done."]


# -- loading, rules, step numbers -----------------------------------------------------


def test_loading_only_when_it_is_the_whole_line():
    page = clean_markdown("Loading…\n\nLoading... the data takes a while.\n")
    assert page.lines == ["Loading... the data takes a while.", ""]
    assert page.removed["loading"] == ["Loading…"]


def test_a_dash_line_under_text_is_a_setext_underline_not_a_rule():
    page = clean_markdown("Getting started\n---\n\nText.\n\n---\n\nMore.")
    assert page.lines == ["Getting started", "---", "", "Text.", "", "More."]
    assert page.removed["rules"] == ["---"]


def test_step_numbers_only_when_standing_alone():
    text = "1\n\nStep one.\n\nThe answer is\n42\n\n123\n"
    page = clean_markdown(text)
    assert page.removed["step_numbers"] == ["1"]
    assert "42" in page.lines  # inside a paragraph
    assert "123" in page.lines  # too large for a step badge


# -- tab labels -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["PIPConda", "ClientServer", "Next.jsSvelteKitAstroRemix", "JavaScriptTypeScript"]
)
def test_run_together_tab_labels_are_recognised(text):
    assert is_tab_label_run(text)


@pytest.mark.parametrize(
    "text",
    [
        "JavaScript",
        "OAuth",
        "PostgreSQL",
        "HCaptcha",
        "Supabase",
        "Install the package",
        "Hello World",
        "Use PostgreSQL. Then ClientServer.",  # a sentence
        "See `ClientServer`",  # markdown
        "[ClientServer](https://example.com)",
    ],
)
def test_words_and_sentences_are_not_tab_labels(text):
    assert not is_tab_label_run(text)


@pytest.mark.parametrize(
    "text",
    [
        "JSONHandler would display it as",
        "PythonClient returns a session",
        "TypeScriptConfig sets the target",
        "SQLAlchemy maps each table",
    ],
)
def test_a_sentence_that_starts_with_a_name_glued_to_a_word_is_not_a_tab_label(text):
    assert not is_tab_label_run(text)


@pytest.mark.parametrize(
    "text",
    [
        "TypeScriptSwift (iOS)FlutterKotlin",  # the first word glued, labels glued after it
        "Send a pulseSend many pulses",  # labels of several words
        "Open a relay over SSHOpen a relay over HTTPOpen a relay locally",
    ],
)
def test_runs_of_labels_with_words_in_them_are_recognised(text):
    assert is_tab_label_run(text)


def test_a_sentence_between_two_code_blocks_is_kept():
    """A sentence that starts with a language's name glued to a word ("JSONHandler"),
    standing alone between code blocks as a tab label would, is the page's text."""
    page = "\n".join(
        [
            "# Logging groups",
            "",
            "```",
            ' log.Group("request",',
            '     "method", r.Method)',
            "```",
            "",
            "TextHandler would display this group as",
            "",
            "```",
            " request.method=GET",
            "```",
            "",
            "JSONHandler would display it as",
            "",
            "```",
            ' "request":{"method":"GET"}',
            "```",
        ]
    )
    [chunk] = chunk_markdown(page)
    assert "TextHandler would display this group as" in chunk.data.text
    assert "JSONHandler would display it as" in chunk.data.text
    assert clean_markdown(page).removed["tab_labels"] == []


def test_tab_labels_inside_a_paragraph_are_kept():
    page = clean_markdown("Choose one:\nPIPConda\n")
    assert page.lines == ["Choose one:", "PIPConda", ""]


# -- line endings and unclosed fences --------------------------------------------------


def test_windows_and_old_mac_line_endings_become_lines():
    page = clean_markdown("a\r\nb\rc")
    assert page.lines == ["a", "b", "c"]
    assert page.source_lines == [1, 2, 3]


def test_unclosed_fence_is_closed_with_a_warning_and_its_text_kept():
    page = clean_markdown("Intro.\n\n```js\nconst a = 1\nLoading...")
    assert page.lines == ["Intro.", "", "```js", "const a = 1", "Loading...", "```"]
    assert len(page.warnings) == 1 and "unclosed code fence" in page.warnings[0]
    assert page.source_lines[-1] == 5


def test_inline_backticks_on_a_fence_like_line_do_not_open_a_fence():
    # "``` a ` b" is not a fence opener (backtick in the info string), so "Loading..."
    # after it is ordinary debris.
    page = clean_markdown("``` a ` b\n\nLoading...")
    assert page.lines == ["``` a ` b"]
    assert page.warnings == []


BREADCRUMB = [
    "- »",
    "- Examples",
    "- [View page source](https://docs.example.org/src/examples.txt)",
]


def test_a_breadcrumb_that_names_its_page_is_chrome():
    """Only the separator repeats on every page; the page's own name and source link do
    not, yet the block is navigation, not content."""
    page = clean_markdown("\n".join([*BREADCRUMB, "", "# Examples", "", "Body."]), chrome={"- »"})
    assert page.removed["site_chrome"] == BREADCRUMB
    assert [line for line in page.lines if line][0] == "# Examples"


def test_a_list_of_sentences_beside_a_chrome_line_is_kept():
    lines = ["- »", "- Store files of any size in one bucket.", "- Serve them from the edge."]
    page = clean_markdown("\n".join([*lines, "", "# Storage", "", "Body."]), chrome={"- »"})
    assert page.removed["site_chrome"] == []
    assert page.lines[:3] == lines
