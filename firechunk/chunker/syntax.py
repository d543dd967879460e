"""The markdown line syntax every pass shares: fenced code and headings, defined once.

Clean-up, parsing, heading titles, packing and overlap all need to know whether a line
opens or closes fenced code or belongs to a heading; they ask here, so the passes cannot
disagree. Next to some tests stands a pre-filter: a looser regex that finds, in a whole
text at once, the lines that *may* pass the test, so the test runs on a few lines only.
"""

from __future__ import annotations

import re

# -- Fenced code ----------------------------------------------------------------------

FENCE_MARKS = ("```", "~~~")  # what every fence line holds after its indentation
# A fence line: up to 3 spaces, 3 or more backticks or tildes (group 1), the rest (group 2).
# MULTILINE, so that `match(text, pos)` tests the line starting at `pos` of a longer text.
FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.M)
# The pre-filter of `opening_fence` and `closes_fence`: the newline before a line that
# starts with a fence mark after any blanks. Looser than both tests (any indentation, and
# tabs, which `closes_fence` lets through), so it finds every fence line and a few others.
# (Clean-up's one-pass scan for the lines of all its rules holds the same alternative.)
MAYBE_FENCE = re.compile(r"\n[^\S\n]*(?:```|~~~)")


def opening_fence(line: str) -> str | None:
    """The fence (```` ``` ```` or ``~~~``, any length) a line opens, if it opens one.
    A backtick in a backtick fence's info string makes the line inline code instead."""
    opened = FENCE_LINE.match(line)
    if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
        return opened.group(1)
    return None


def closes_fence(line: str, fence: str) -> bool:
    """Whether `line` closes fenced code opened by `fence`: indented by at most 3 spaces,
    it holds nothing but blanks and the fence's character, at least as many as opened it."""
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and stripped.startswith(fence)
        and set(stripped) == {fence[0]}
    )


def closes_fence_flush(line: str, fence: str) -> bool:
    """Whether `line` closes fenced code opened by `fence` with nothing around it: only
    the fence's character, at least as many as opened it; no indentation, no blanks.

    Overlap reads the code in a chunk with this stricter test, `closes_fence` is what
    code is everywhere else. They differ on an indented closing fence (code in a list
    item): for overlap the code then runs on, and a heading after it is not seen as the
    chunk's last. Making overlap use `closes_fence` changes the overlap text of such
    chunks (in the shared corpus too), so it is a change of output to make on its own.
    """
    return not line.strip(fence[0]) and line.startswith(fence)


# -- Headings -------------------------------------------------------------------------

# The marks of an ATX heading (group 1) and the blanks after them, on a single line.
ATX_MARK = re.compile(r"^( {0,3}#{1,6})(?:[^\S\n]+|$)")
# A whole ATX heading line with a title, found in a text of several lines (overlap looks
# for the last heading in a chunk). Stricter than `ATX_MARK`: an empty heading (`##`
# alone) carries no title to repeat, so it is not one here.
ATX_LINE = re.compile(r"^ {0,3}#{1,6}[ \t]+\S.*$", re.M)
# The underline of a setext heading, as a whole line (`fullmatch`): `===` for level 1,
# `---` for level 2. `[^\S\n]` rather than `\s`, so that it can be part of a pattern that
# reads several lines (`SETEXT_UNDERLINE.pattern`) without running into the next one.
SETEXT_UNDERLINE = re.compile(r" {0,3}(=+|-+)[^\S\n]*")


# The two line tests, as the regexes' own methods: a match (truthy) or None. Heading
# lines are tested on every line of every chunk, where a Python function around the
# regex would cost more than the test.
is_atx_heading = ATX_MARK.match
is_setext_underline = SETEXT_UNDERLINE.fullmatch  # the line underlines the one above

# The pre-filter of the heading tests and the fence tests together, for a pass that reads
# both (the adapters' heading levels): `MAYBE_FENCE`, or the newline before a line that
# starts with "#" after any blanks, or holds only "=" or only "-" and blanks. Looser than
# `is_atx_heading` and `is_setext_underline` (any indentation, any number of marks).
MAYBE_HEADING_OR_FENCE = re.compile(
    MAYBE_FENCE.pattern + r"|\n[^\S\n]*(?:#|(?:=+|-+)[^\S\n]*$)", re.M
)


# -- Pre-filtered lines ---------------------------------------------------------------


def maybe_lines(pre_filter: re.Pattern[str], lines: list[str]) -> list[int]:
    """The 0-based numbers of the lines a pre-filter finds (it matches from the newline
    before a line), in one regex pass over the lines joined: the exact tests then run on
    these lines only."""
    text = "\n" + "\n".join(lines)
    found, line, position = [], -1, 0  # line number = newlines before its start, minus 1
    for match in pre_filter.finditer(text):
        line += text.count("\n", position, match.start() + 1)
        position = match.start() + 1
        found.append(line)
    return found
