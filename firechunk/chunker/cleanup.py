"""Pass 0: remove Firecrawl debris from page markdown, line by line, before parsing.

Every rule is documented here and can be switched off in `CleanupOptions`; nothing else
is removed. Each output line remembers its line number in the page as crawled, so chunks
can point back to `source_lines`.

Rules:
- `flattened_code`: Firecrawl flattens Supabase code samples into a lone-backtick line,
  then per code line a marker line (`_10`, `_30`: the same token throughout a block, or
  `1`, `2`, `3`: sequential) followed by the code line, then a closing lone backtick.
  Such a block becomes a fenced code block: markers dropped, code lines kept.
- `heading_anchors`: `[\\#](\\#slug)` / `[#](https://…#slug)` links after heading text.
- `loading`: lines that say only "Loading...".
- `tab_labels`: a standalone line of run-together UI labels ("PIPConda",
  "ClientServer", "Next.jsSvelteKitAstroRemix"): two or more capitalised labels glued
  with no space and no sentence punctuation.
- `rules`: thematic-break lines (`* * *`, `---` standing alone), which carry no words.
- `step_numbers`: a standalone line holding only a small number (a step badge).
Code inside fences is never touched by the last five rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

RULES = ("flattened_code", "heading_anchors", "loading", "tab_labels", "rules", "step_numbers")


@dataclass(frozen=True)
class CleanupOptions:
    flattened_code: bool = True
    heading_anchors: bool = True
    loading: bool = True
    tab_labels: bool = True
    rules: bool = True
    step_numbers: bool = True

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


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_ANCHOR = re.compile(r"\s*\[\\?#\]\((?:[^()\s]*|<[^>]*>)\)")
_LONE_BACKTICKS = ("`", "``")
_MARKER_TOKEN = re.compile(r"_\d+")
_LOADING = re.compile(r"Loading(\.\.\.|…)")
_THEMATIC = re.compile(r" {0,3}((\*\s*){3,}|(-\s*){3,}|(_\s*){3,})")
_STEP = re.compile(r"\d{1,2}")
# A glue point: a lower-case letter, digit, dot or bracket directly followed by a capital.
_GLUE = re.compile(r"(?<=[a-z0-9.)\]])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_LABEL = re.compile(r"[`*_\[\]<>|#:;!?,=/\\]|\.\s|\.$|https?:")


def clean_markdown(markdown: str, options: CleanupOptions | None = None) -> CleanedPage:
    options = options or CleanupOptions()
    text = markdown.replace("\r\n", "\n").replace("\r", "\n")
    raw = text.split("\n")
    page = CleanedPage(lines=[], source_lines=[], removed={rule: [] for rule in RULES})
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
    return page


# Lines a rule might change, or that open or close fenced code, found with two regexes
# over the whole page: most lines match neither and are kept without a look in Python.
# Each regex matches a superset of its lines; the rules below decide. A line starts after
# a newline (the page is searched with "\n\n" in front, so its first line does too).
_MAYBE_CHANGED = re.compile(
    r"""\n[^\S\n]*(?:
        ```|~~~                          # a fence
      | \#{1,6}(?=\s|$)                  # heading_anchors (and trailing white space)
      | `{1,2}[^\S\n]*$                  # flattened_code: a lone backtick line
      | Loading(?:\.\.\.|…)[^\S\n]*$     # loading
      | (?:[-*_][^\S\n]*){3,}$           # rules
      | \d{1,2}[^\S\n]*$                 # step_numbers
    )""",
    re.M | re.X,
)
# tab_labels: a line between blank lines (or the page's ends) with no character that
# `_NOT_LABEL` forbids; the match ends where that line starts.
_MAYBE_LABELS = re.compile(r"\n[^\S\n]*\n(?=[^\n`*_\[\]<>|#:;!?,=/\\]+(?:\n[^\S\n]*(?:\n|$)|$))")


def candidate_lines(text: str) -> Iterator[int]:
    """Indices of the lines of `text` that a rule might change or that may be fences."""
    padded = "\n\n" + text
    starts = {match.start() + 1 for match in _MAYBE_CHANGED.finditer(padded)}
    starts.update(match.end() for match in _MAYBE_LABELS.finditer(padded))
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
        _keep(page, line, i)
        return i + 1, opened
    if _ATX.match(line):  # a heading is never debris of the other rules
        _keep(page, _strip_anchor(line, page) if options.heading_anchors else line, i)
        return i + 1, None
    if options.flattened_code and line.strip() in _LONE_BACKTICKS:
        consumed = _unflatten(raw, i, page)
        if consumed:
            return i + consumed, None
    if not _drop_debris(line, raw, i, options, page):
        _keep(page, line, i)
    return i + 1, None


def _keep(page: CleanedPage, line: str, index: int) -> None:
    page.lines.append(line)
    page.source_lines.append(index + 1)


def opening_fence(line: str) -> str | None:
    """The fence (```` ``` ```` or ``~~~``, any length) a line opens, if it opens one."""
    opened = _FENCE_OPEN.match(line)
    if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
        return opened.group(1)
    return None


def closes_fence(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and stripped.startswith(fence)
        and set(stripped) == {fence[0]}
    )


def _strip_anchor(line: str, page: CleanedPage) -> str:
    cleaned = _ANCHOR.sub("", line).rstrip()
    if cleaned != line.rstrip():
        page.removed["heading_anchors"].append(line[len(cleaned) :])
    return cleaned


def _unflatten(raw: list[str], start: int, page: CleanedPage) -> int:
    """Turn a flattened code sample at `raw[start]` into a fenced block.

    Returns the number of input lines consumed, or 0 when the lines do not follow the
    flattened pattern (then they are left as they are).
    """
    opener = raw[start].strip()
    if start + 1 >= len(raw):
        return 0
    first = raw[start + 1].strip()
    if _MARKER_TOKEN.fullmatch(first):
        is_marker = _constant_marker(first)
    elif first == "1":
        is_marker = _sequential_marker()
    else:
        return 0
    code: list[tuple[str, int]] = []  # (code line, its index in raw)
    markers: list[str] = []
    i = start + 1
    while i < len(raw):
        line = raw[i]
        stripped = line.strip()
        if stripped == opener:
            break
        if is_marker(stripped):
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
    page.removed["flattened_code"].append("\n".join([opener, *markers, opener]))
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


def _longest_backtick_run(lines) -> int:
    return max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)


def _standalone(raw: list[str], i: int) -> bool:
    """True when the line is a paragraph of its own (blank or nothing on both sides)."""
    before = i == 0 or not raw[i - 1].strip()
    after = i + 1 >= len(raw) or not raw[i + 1].strip()
    return before and after


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
    elif options.tab_labels and _standalone(raw, i) and is_tab_label_run(stripped):
        rule = "tab_labels"
    if rule is None:
        return False
    page.removed[rule].append(line)
    return True


def is_tab_label_run(text: str) -> bool:
    """Two or more capitalised labels glued together, with no sentence in sight.

    A capital inside a product name ("JavaScript", "OAuth", "PostgreSQL", "HCaptcha") is
    not a glue point: the fragment before it is short, or the one after it is an acronym.
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
    left = text[:at].rsplit(" ", 1)[-1]
    right = re.match(r"[A-Za-z0-9]*", text[at:]).group(0)
    if right.isupper():  # "PostgreSQL", "JWTs" style acronym suffix
        return False
    return len(left) >= 5 or (len(left) >= 2 and left.isupper())
