"""Pass 0: remove Firecrawl debris from page markdown, line by line, before parsing.

Every rule is documented here and can be switched off in `CleanupOptions`; nothing else
is removed. Each output line remembers its line number in the page as crawled, so chunks
can point back to `source_lines`. Code is kept verbatim except where a rule below says.

Before any rule, whatever the options, NUL characters (U+0000) are dropped from the whole
page, code included (reported as removed by `nul`): they show nothing in any text, and
Postgres refuses text that holds one, so a NUL left in a chunk stopped the whole load.

Where a rule removes lines, the blank lines around them go too, but one between the text
above and the text below them (none at the page's ends), reported as removed by
`blank_lines`: chunks join a page's blocks with one blank line, so what clean-up keeps,
the page's tokens that validation finds in its chunks, is what they hold. Blank lines
where nothing was removed, and code, stay as they are.

Rules:
- `flattened_code`: Firecrawl flattens Supabase code samples into a lone-backtick line
  (or a double backtick, either possibly followed by `\\`), then per code line a marker
  line (`_10`, `_30`: the same token throughout a block, or `1`, `2`, `3`: sequential;
  each may end in `\\`) followed by the code line, then a closing lone backtick. Such a
  block becomes a fenced code block: markers dropped, code lines kept. A marker ends in
  `\\` where Firecrawl escaped the line break inside brackets; the code line before such
  a marker carries the same stray `\\`, which is dropped.
- `continued_code`: a fenced block whose every line, fences included, ends in `\\` (code
  inside MkDocs Material tabs and admonitions) loses that trailing `\\` on every line.
- `fence_classes`: a fence info string that is a CSS class (`md-code__content`,
  `notranslate`, `codeBlockLines_e6Vv`) rather than a language is dropped.
- `heading_anchors`: anchor links on headings, in every platform's style (see
  `headings.py`), and permalinks elsewhere (`[¶](… "Permalink to this definition")`).
- `control_chars`: control characters (terminal colour codes) outside code.
- `loading`: lines that say only "Loading...".
- `tab_labels`: a standalone line of run-together UI labels ("PIPConda",
  "ClientServer", "Next.jsSvelteKitAstroRemix"): two or more capitalised labels glued
  with no space and no sentence punctuation. A line that starts with a name glued to a
  word and goes on ("JSONHandler would display it as") is a sentence, not labels.
- `widgets`: a standalone line that is a docs platform's UI text ("Was this page
  helpful?", "YesNo", "Copy", "Ask AI", "Edit this page", "Skip to content", Furo's theme
  controls, …: `WIDGETS`), or a link whose text is such text that links somewhere
  ("[Edit this page](…)": `LINKED_WIDGETS`).
- `page_toc`: an "On this page" list: a label such as "On this page" or "Contents" and
  the list after it, when every item links to one page, at least two of them to its
  sections (`#fragment`; Furo's first item links the page itself, with no fragment).
- `rules`: thematic-break lines (`* * *`, `---` standing alone), which carry no words.
- `step_numbers`: a standalone line holding only a small number (a step badge).
- `site_chrome`: blocks made of lines the whole crawl repeats (`firechunk.run.chrome` finds
  them across pages and hands each page its own): navigation, breadcrumbs, footers. A
  block (a paragraph or list run) goes when more than half of its lines are chrome lines
  and it stands where chrome stands: above the page's first heading, or after the page's
  last prose (among the blocks that end the page, links-only lines passed over).
  Repeated text between them is content, and stays. And, on a crawl of any size, what the
  page's own shapes show to be its site's navigation (`firechunk.chunker.navigation`):
  link lists, breadcrumbs and their captions above the page's title, sidebar trees with
  expand buttons ("Toggle navigation of …") wherever they stand, a pager ("Previous …
  Next …") after the last heading and the link lists below it.
Code inside fences is never touched by the rules from `heading_anchors` on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from firechunk.chunker.headings import strip_heading_anchors, strip_permalinks
from firechunk.chunker.navigation import navigation_lines, tail_blocks
from firechunk.chunker.syntax import (
    FENCE_MARKS,
    closes_fence,
    is_atx_heading,
    is_setext_underline,
    opening_fence,
)

RULES = (
    "flattened_code",
    "continued_code",
    "fence_classes",
    "heading_anchors",
    "control_chars",
    "loading",
    "tab_labels",
    "widgets",
    "page_toc",
    "rules",
    "step_numbers",
    "site_chrome",
)


@dataclass(frozen=True)
class CleanupOptions:
    flattened_code: bool = True
    continued_code: bool = True
    fence_classes: bool = True
    heading_anchors: bool = True
    control_chars: bool = True
    loading: bool = True
    tab_labels: bool = True
    widgets: bool = True
    page_toc: bool = True
    rules: bool = True
    step_numbers: bool = True
    site_chrome: bool = True

    @classmethod
    def none(cls) -> CleanupOptions:
        return cls(**{rule: False for rule in RULES})


@dataclass
class CleanedPage:
    lines: list[str]
    source_lines: list[int]  # 1-based line in the crawled page, one per output line
    removed: dict[str, list[str]] = field(default_factory=dict)  # rule -> removed text
    warnings: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


_LONE_BACKTICKS = ("`", "``", "`\\", "``\\")
_MARKER_TOKEN = re.compile(r"_\d+\\?")
_LOADING = re.compile(r"Loading(\.\.\.|…)")
_THEMATIC = re.compile(r" {0,3}((\*\s*){3,}|(-\s*){3,}|(_\s*){3,})")
_STEP = re.compile(r"\d{1,2}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# What `control_chars` removes: a terminal's escape sequence whole (`ESC[32m`), else one
# control character.
_CONTROL_RUN = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# A fence info string that names a CSS class, not a language: BEM (`md-code__content`),
# CSS-module hashes (`codeBlockLines_e6Vv`) and highlighters' own classes.
_CSS_CLASS = re.compile(
    r"\S*__\S*|[A-Za-z]+_(?=[A-Za-z0-9]*[A-Z0-9])[A-Za-z0-9]{4,6}"
    r"|notranslate|highlight|hljs|codehilite|sourceCode"
)
# UI text of docs platforms, as a whole standalone line (compared case-folded).
WIDGETS = frozenset(
    text.casefold()
    for text in (
        "Was this page helpful?",
        "Was this helpful?",
        "YesNo",
        "Yes No",
        "Skip to content",
        "Skip to main content",
        "Edit this page",
        "Edit on GitHub",
        "View page source",
        "Copy",
        "Copy page",
        "Copied!",
        "Ask AI",
        "Ctrl K",
        "Ctrl KAsk AI",
        "⌘K",
        "Search...",
        "Search…",
        "Navigation",
        "Previous",
        "Next",
        # Furo's theme controls
        "Toggle site navigation sidebar",
        "Toggle table of contents sidebar",
        "Toggle Light / Dark / Auto color theme",
        "Hide navigation sidebar",
        "Hide table of contents sidebar",
        "Light mode",
        "Dark mode",
        "Auto light/dark mode",
        "Auto light/dark, in light mode",
        "Auto light/dark, in dark mode",
        "Back to top",
    )
)
# UI text that platforms also render as a link (to the page's source, or its top).
LINKED_WIDGETS = frozenset(
    text.casefold()
    for text in (
        "Edit this page",
        "Edit on GitHub",
        "View page source",
        "Skip to content",
        "Skip to main content",
        "Back to top",
    )
)
_WIDGET_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
TOC_LABELS = frozenset(
    text.casefold() for text in ("On this page", "Table of contents", "Contents", "In this article")
)
# A glue point: a lower-case letter, digit, dot or bracket directly followed by a capital.
_GLUE = re.compile(r"(?<=[a-z0-9.)\]])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_LABEL = re.compile(r"[`*_\[\]<>|#:;!?,=/\\]|\.\s|\.$|https?:")


def clean_markdown(
    markdown: str, options: CleanupOptions | None = None, chrome: frozenset[str] = frozenset()
) -> CleanedPage:
    """`chrome`: the page's lines that the crawl repeats on most pages (`firechunk.run.chrome`)."""
    options = options or CleanupOptions()
    text = markdown.replace("\r\n", "\n").replace("\r", "\n")
    page = CleanedPage(lines=[], source_lines=[], removed={rule: [] for rule in RULES})
    text = _without_nul(text, page)
    raw = text.split("\n")
    fence: str | None = None  # the opening fence while inside fenced code
    i = 0  # the next line to clean
    for candidate in candidate_lines(text):
        if candidate < i:  # taken by a flattened code sample
            continue
        _keep_run(page, raw, i, candidate)
        i, fence = _clean_line(raw, candidate, fence, options, page)
    _keep_run(page, raw, i, len(raw))
    if fence is not None:
        page.warnings.append(f"unclosed code fence {fence!r}: closed at the end of the page")
        page.lines.append(fence)
        page.source_lines.append(len(raw))
    if options.site_chrome and chrome:
        _drop_chrome(page, chrome)
    if options.site_chrome:
        _drop_navigation(page, raw)
    _close_gaps(page, len(raw))
    return page


NUL = "nul"  # what dropped NULs are reported as removed by: not a rule, never switched off
# What the blank lines that go with removed lines are reported as removed by (`_close_gaps`):
# not a rule, they go with whichever rule removed the lines.
BLANK_LINES = "blank_lines"


def _without_nul(text: str, page: CleanedPage) -> str:
    """The text without its NULs (see the module's docstring); lines stay where they were."""
    if "\x00" not in text:
        return text
    page.removed[NUL] = ["\x00" * text.count("\x00")]
    return text.replace("\x00", "")


# Lines a rule might change, or that open or close fenced code, found with regexes over
# the whole page: most lines match none and are kept without a look in Python. Each regex
# matches a superset of its lines; the rules below decide. A line starts after a newline
# (the page is searched with "\n\n" in front, so its first line does too).
_MAYBE_CHANGED = re.compile(
    r"""\n[^\S\n]*(?:
        ```|~~~                          # a fence (`syntax.MAYBE_FENCE`'s alternative)
      | \#{1,6}(?=\s|$)                  # heading_anchors (and trailing white space)
      | `{1,2}\\?[^\S\n]*$               # flattened_code: a lone backtick line
      | Loading(?:\.\.\.|…)[^\S\n]*$     # loading
      | (?:[-*_][^\S\n]*){3,}$           # rules
      | \d{1,2}[^\S\n]*$                 # step_numbers
    )""",
    re.M | re.X,
)
# tab_labels and widgets: a line between blank lines (or the page's ends) with no
# character that `_NOT_LABEL` forbids, or one that is UI text; the match ends where that
# line starts.
_MAYBE_LABELS = re.compile(r"\n[^\S\n]*\n(?=[^\n`*_\[\]<>|#:;!?,=/\\]+(?:\n[^\S\n]*(?:\n|$)|$))")
_UI_TEXTS = sorted(WIDGETS | TOC_LABELS, key=len, reverse=True)
# The first letters, both cases, checked before the case-blind alternatives: most lines
# fail there, which makes the scan four times faster.
_UI_FIRSTS = "".join(sorted({c for text in _UI_TEXTS for c in (text[0].lower(), text[0].upper())}))
_MAYBE_WIDGET = re.compile(
    r"\n(?=[^\S\n]*(?=["
    + re.escape(_UI_FIRSTS)
    + r"])(?i:"
    + "|".join(re.escape(text) for text in _UI_TEXTS)
    + r")[^\S\n]*(?:\n|$))"
)
_MAYBE_WIDGET_LINK = re.compile(
    r"\n(?=[^\S\n]*\[(?i:"
    + "|".join(re.escape(text) for text in sorted(LINKED_WIDGETS, key=len, reverse=True))
    + r")\]\([^)\n]*\)[^\S\n]*(?:\n|$))"
)
# heading_anchors off headings: a link with no word in its text, or a permalink's title;
# found where it stands, then taken back to the start of its line. Two patterns, each with
# a literal first character, are searched many times faster than one alternation.
_ANCHOR_HINTS = (
    re.compile(r"\[[^\]\n\w]{0,3}\]\("),
    re.compile(r"\"(?i:Permalink|Permanent link|Direct link|Link to)"),
)
_MAYBE_CONTROL = re.compile(r"\n(?=[^\n]*[\x00-\x08\x0b\x0c\x0e-\x1f\x7f])")


def candidate_lines(text: str) -> Iterator[int]:
    """Indices of the lines of `text` that a rule might change or that may be fences."""
    padded = "\n\n" + text
    starts = {match.start() + 1 for match in _MAYBE_CHANGED.finditer(padded)}
    starts.update(match.end() for match in _MAYBE_LABELS.finditer(padded))
    starts.update(match.start() + 1 for match in _MAYBE_WIDGET.finditer(padded))
    starts.update(match.start() + 1 for match in _MAYBE_WIDGET_LINK.finditer(padded))
    for hint in _ANCHOR_HINTS:
        starts.update(padded.rfind("\n", 0, match.start()) + 1 for match in hint.finditer(padded))
    if _CONTROL.search(text):
        starts.update(match.start() + 1 for match in _MAYBE_CONTROL.finditer(padded))
    line, position = -2, 0  # line index = newlines before its start in `padded`, minus 2
    for start in sorted(starts):
        line += padded.count("\n", position, start)
        position = start
        if line >= 0:
            yield line


def _keep_run(page: CleanedPage, raw: list[str], start: int, end: int) -> None:
    page.lines.extend(raw[start:end])
    page.source_lines.extend(range(start + 1, end + 1))


def _clean_line(
    raw: list[str], i: int, fence: str | None, options: CleanupOptions, page: CleanedPage
) -> tuple[int, str | None]:
    """Clean line `i`; returns the next line to clean and the fence open after it."""
    line = raw[i]
    if fence is not None:
        _keep(page, line, i)
        return i + 1, None if closes_fence(line, fence) else fence
    opened = opening_fence(line)
    if opened:
        consumed = _uncontinue(raw, i, opened, page) if options.continued_code else 0
        if consumed:
            return i + consumed, None
        _keep(page, _plain_fence(line, opened, page) if options.fence_classes else line, i)
        return i + 1, opened
    if options.control_chars and _CONTROL.search(line):
        page.removed["control_chars"].append("".join(_CONTROL_RUN.findall(line)))
        line = raw[i] = _CONTROL_RUN.sub("", line)
    if is_atx_heading(line):  # a heading is never debris of the other rules
        removed = page.removed["heading_anchors"]
        _keep(page, strip_heading_anchors(line, removed) if options.heading_anchors else line, i)
        return i + 1, None
    if options.flattened_code and line.strip() in _LONE_BACKTICKS:
        consumed = _unflatten(raw, i, page)
        if consumed:
            return i + consumed, None
    if options.heading_anchors and "](" in line and not line.startswith(("    ", "\t")):
        setext = i + 1 < len(raw) and is_setext_underline(raw[i + 1])
        strip = strip_heading_anchors if setext else strip_permalinks
        line = raw[i] = strip(line, page.removed["heading_anchors"])
        if not line.strip():
            return i + 1, None
    if options.page_toc:
        consumed = _drop_toc(raw, i, page)
        if consumed:
            return i + consumed, None
    if not _drop_debris(line, raw, i, options, page):
        _keep(page, line, i)
    return i + 1, None


def _keep(page: CleanedPage, line: str, index: int) -> None:
    page.lines.append(line)
    page.source_lines.append(index + 1)


def _plain_fence(line: str, fence: str, page: CleanedPage) -> str:
    """The fence line without an info string that is a CSS class."""
    info = line.strip()[len(fence) :].strip()
    if not info or not _CSS_CLASS.fullmatch(info):
        return line
    page.removed["fence_classes"].append(info)
    return line[: line.index(fence) + len(fence)]


def _uncontinue(raw: list[str], start: int, fence: str, page: CleanedPage) -> int:
    """A fenced block whose every line, fences included, ends in `\\`: kept without those
    backslashes. Returns the lines consumed, or 0 when the block is not of that form."""
    if not raw[start].rstrip().endswith("\\"):
        return 0
    end = start + 1
    while end < len(raw) and raw[end].rstrip().endswith("\\"):
        if closes_fence(raw[end].rstrip()[:-1], fence):
            block = [line.rstrip()[:-1] for line in raw[start : end + 1]]
            block[0] = _plain_fence(block[0], fence, page)
            for offset, line in enumerate(block):
                _keep(page, line, start + offset)
            page.removed["continued_code"].append("\\" * len(block))
            return end - start + 1
        end += 1
    return 0


def _unflatten(raw: list[str], start: int, page: CleanedPage) -> int:
    """Turn a flattened code sample at `raw[start]` into a fenced block.

    Returns the number of input lines consumed, or 0 when the lines do not follow the
    flattened pattern (then they are left as they are).
    """
    opener = raw[start].strip().rstrip("\\")
    if start + 1 >= len(raw):
        return 0
    first = raw[start + 1].strip()
    if _MARKER_TOKEN.fullmatch(first):
        is_marker = _constant_marker(first.rstrip("\\"))
    elif first.rstrip("\\") == "1":
        is_marker = _sequential_marker()
    else:
        return 0
    code: list[tuple[str, int]] = []  # (code line, its index in raw)
    markers: list[str] = []
    i = start + 1
    while i < len(raw):
        line = raw[i]
        stripped = line.strip()
        if stripped.rstrip("\\") == opener:
            break
        if is_marker(stripped.rstrip("\\")):
            if stripped.endswith("\\") and code and code[-1][0].endswith("\\"):
                code[-1] = (code[-1][0][:-1], code[-1][1])  # the bracket's stray `\`
            markers.append(line)
            code.append(("", i))
        elif code and code[-1][0] == "" and code[-1][1] == i - 1:
            code[-1] = (line, i)
        else:
            return 0  # a second line after one marker: not the flattened pattern
        i += 1
    else:
        return 0  # never closed: leave the text as it is
    fence = "`" * max(3, _longest_backtick_run(line for line, _ in code) + 1)
    _keep(page, fence, start)
    for line, index in code:
        _keep(page, line, index)
    _keep(page, fence, i)
    page.removed["flattened_code"].append("\n".join([raw[start].strip(), *markers, raw[i]]))
    return i - start + 1


def _constant_marker(token: str):
    return lambda line: line == token


def _sequential_marker():
    expected = [1]

    def is_marker(line: str) -> bool:
        if line == str(expected[0]):
            expected[0] += 1
            return True
        return False

    return is_marker


_BACKTICKS = re.compile(r"`+")


def _longest_backtick_run(lines: Iterable[str]) -> int:
    return max((len(run) for run in _BACKTICKS.findall("\n".join(lines))), default=0)


def _standalone(raw: list[str], i: int) -> bool:
    """True when the line is a paragraph of its own (blank or nothing on both sides)."""
    before = i == 0 or not raw[i - 1].strip()
    after = i + 1 >= len(raw) or not raw[i + 1].strip()
    return before and after


_LIST_ITEM = re.compile(r"^(\s*)[-*+][^\S\n]+(.*)$")
_ITEM_LINK = re.compile(r"\[[^\]\n]*\]\(<?([^)\s>]*)>?\)")


def _drop_toc(raw: list[str], i: int, page: CleanedPage) -> int:
    """An "On this page" list whose label is line `i`: the lines consumed (label and list),
    or 0 when there is none. The list's items all link to one page, at least two of them
    to its sections."""
    if not (raw[i].strip().casefold() in TOC_LABELS and _standalone(raw, i)):
        return 0
    first = i + 1
    while first < len(raw) and not raw[first].strip():
        first += 1
    end, bases, sections = first, set(), 0
    while end < len(raw) and (item := _LIST_ITEM.match(raw[end])):
        link = _ITEM_LINK.fullmatch(item.group(2).strip())
        if link is None:
            break
        bases.add(link.group(1).split("#", 1)[0])
        sections += "#" in link.group(1)
        end += 1
    if end < len(raw) and _LIST_ITEM.match(raw[end]):
        return 0  # the list goes on with other items: content, not a table of contents
    if sections < 2 or len(bases) != 1:
        return 0
    page.removed["page_toc"].append("\n".join(raw[i:end]))
    return end - i


def _drop_debris(
    line: str, raw: list[str], i: int, options: CleanupOptions, page: CleanedPage
) -> bool:
    stripped = line.strip()
    if not stripped or line.startswith(("    ", "\t")):
        return False
    rule = None
    if options.loading and _LOADING.fullmatch(stripped):
        rule = "loading"
    elif options.rules and _THEMATIC.fullmatch(line) and (i == 0 or not raw[i - 1].strip()):
        rule = "rules"
    elif options.step_numbers and _STEP.fullmatch(stripped) and _standalone(raw, i):
        rule = "step_numbers"
    elif options.widgets and _ui_text(stripped) in WIDGETS and _standalone(raw, i):
        rule = "widgets"
    elif options.tab_labels and _standalone(raw, i) and is_tab_label_run(stripped):
        rule = "tab_labels"
    if rule is None:
        return False
    page.removed[rule].append(line)
    return True


# A line of nothing but links or images (a list item's bullet allowed): pager links,
# logos, a trailing screenshot. No prose to tell the end of the content by.
_LINKS_ONLY = re.compile(r"(?:[-*+]\s+)?(?:!?\[[^\]\n]*\]\([^)\n]*\)\s*)+")
# A list item that is a label, not a sentence: the current page's name in a breadcrumb.
_LABEL_ITEM = re.compile(r"[-*+]\s+[^\s.!?:;]+(?:\s+[^\s.!?:;]+){0,3}")


def _drop_chrome(page: CleanedPage, chrome: frozenset[str]) -> None:
    """Drop the text blocks whose lines are mostly `chrome` where a page's chrome stands:
    above its first heading, and among the blocks that end the page after its last prose.
    Only those ends of the page are read."""
    lines = page.lines
    drop: set[int] = set()
    for start, end in _head_blocks(lines):
        if _is_chrome(lines[start:end], chrome):
            drop.update(range(start, end))
    for start, end in tail_blocks(lines):
        if _is_chrome(lines[start:end], chrome):
            drop.update(range(start, end))
        elif not all(_LINKS_ONLY.fullmatch(line.strip()) for line in lines[start:end]):
            break
    _drop_lines(page, drop, "site_chrome")


def _drop_navigation(page: CleanedPage, raw: list[str]) -> None:
    """Drop what the page's own structure shows to be its site's navigation
    (`firechunk.chunker.navigation`): sidebar trees, breadcrumbs, pagers."""
    drop = navigation_lines(page.lines, raw, page.source_lines, TOC_LABELS)
    _drop_lines(page, drop, "site_chrome")


def _close_gaps(page: CleanedPage, raw_count: int) -> None:
    """Where lines were removed, the blank lines around them go too, but one between the
    text above and the text below (none at the page's ends); code is left as it is.

    The chunks join a page's blocks with one blank line and hold none at their ends, and
    validation compares their tokens with the page's tokens after clean-up: the blank
    lines a removal leaves behind (a few hundred where a sidebar tree stood) would be
    counted in the page and found in no chunk. `raw_count`: the lines of the crawled page.
    """
    lines, source = page.lines, page.source_lines
    if source == list(range(1, raw_count + 1)):  # nothing removed: the common case, at once
        return
    drop: list[int] = []
    for start, end in _blank_runs(lines):
        above = source[start - 1] if start else 0
        below = source[end] if end < len(lines) else raw_count + 1
        if below - above - 1 == end - start:  # nothing removed here: the page's own
            continue
        keep = 0 if start == 0 or end == len(lines) else 1
        drop.extend(range(start + keep, end))
    _drop_lines(page, drop, BLANK_LINES)


def _blank_runs(lines: list[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of blank lines outside fenced code, top first."""
    start: int | None = None  # of the run being read
    fence: str | None = None
    for i, line in enumerate(lines):
        if not line or line.isspace():
            if start is None and fence is None:
                start = i
            continue
        if start is not None:
            yield start, i
            start = None
        if fence is not None:
            fence = None if closes_fence(line, fence) else fence
        elif line.lstrip(" ")[:3] in FENCE_MARKS:
            fence = opening_fence(line)
    if start is not None:
        yield start, len(lines)


def _drop_lines(page: CleanedPage, drop: Iterable[int], rule: str) -> None:
    """Remove the cleaned page's lines at the indices `drop`, as removed by `rule`."""
    dropped = set(drop)
    if not dropped:
        return
    page.removed.setdefault(rule, []).extend(page.lines[i] for i in sorted(dropped))
    kept = [i for i in range(len(page.lines)) if i not in dropped]
    page.lines = [page.lines[i] for i in kept]
    page.source_lines = [page.source_lines[i] for i in kept]


def _head_blocks(lines: list[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of each text block (a run of non-blank lines that is neither code nor
    a heading) above the page's first heading, top first."""
    start: int | None = None  # of the text block being read
    fence: str | None = None
    for i, line in enumerate(lines):
        if fence is not None:
            fence = None if closes_fence(line, fence) else fence
            continue
        if start is not None and is_setext_underline(line):
            return  # the block being read is a setext heading
        opened = opening_fence(line)
        heading = is_atx_heading(line)
        if opened or heading or not line.strip():
            if start is not None:
                yield start, i
                start = None
            if heading:
                return
            fence = opened
        elif start is None:
            start = i
    if start is not None:
        yield start, len(lines)


def _is_chrome(lines: list[str], chrome: frozenset[str]) -> bool:
    """Mostly chrome lines, or navigation holding one: a breadcrumb repeats its separators
    on every page but names the page itself, so most of a short one is not repeated."""
    marked = [line.strip() in chrome for line in lines]
    if 2 * sum(marked) > len(lines):
        return True
    return any(marked) and all(
        is_chrome or _LINKS_ONLY.fullmatch(line.strip()) or _LABEL_ITEM.fullmatch(line.strip())
        for line, is_chrome in zip(lines, marked, strict=True)
    )


def _ui_text(line: str) -> str:
    """The line's text as `WIDGETS` holds it: case-folded, and for a line that is one
    link whose text is one of `LINKED_WIDGETS`, that text."""
    linked = _WIDGET_LINK.fullmatch(line)
    if linked and linked.group(1).casefold() in LINKED_WIDGETS:
        return linked.group(1).casefold()
    return line.casefold()


def is_tab_label_run(text: str) -> bool:
    """Two or more capitalised labels glued together, with no sentence in sight.

    A capital inside a product name ("JavaScript", "OAuth", "PostgreSQL", "HCaptcha") is
    not a glue point: the fragment before it is short, or the one after it is an acronym.
    Nor is one inside the line's first word when more words follow: that line is a
    sentence that starts with a name ("JSONHandler would display it as"). A run of labels
    goes on gluing after its first word ("TypeScriptSwift (iOS)FlutterKotlin").
    """
    if len(text) > 300 or _NOT_LABEL.search(text):
        return False
    glues = [m.start() for m in _GLUE.finditer(text) if _is_label_glue(text, m.start())]
    if not glues:
        return False
    parts = [text[a:b] for a, b in zip([0, *glues], [*glues, len(text)], strict=True)]
    if not all(part[:1].isupper() or part[:1].isdigit() for part in parts):
        return False
    function_words = sum(word in _FUNCTION_WORDS for word in text.lower().split())
    return len(glues) >= 2 or function_words < 2


_FUNCTION_WORDS = frozenset(
    [
        "the",
        "to",
        "for",
        "in",
        "with",
        "and",
        "of",
        "a",
        "an",
        "on",
        "by",
        "from",
        "your",
        "is",
        "are",
    ]
)


def _is_label_glue(text: str, at: int) -> bool:
    """Whether the capital at `at` starts a label glued to the one before it."""
    before, after = text[:at], text[at:]
    if " " not in before and " " in after:  # in the first word, and words follow
        return False
    left = before.rsplit(" ", 1)[-1]
    right = re.split(r"[^A-Za-z0-9]", after, maxsplit=1)[0]  # the letters and digits from `at`
    if right.isupper():  # "PostgreSQL", "JWTs" style acronym suffix
        return False
    return len(left) >= 5 or (len(left) >= 2 and left.isupper())
