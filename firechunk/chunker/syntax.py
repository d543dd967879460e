"""The markdown line predicates every pass shares: fenced code and ATX headings, once.

Clean-up, parsing, heading titles and overlap all need to know whether a line opens or
closes fenced code or is an ATX heading; they ask here, so the passes cannot disagree.
(`blocks.py` also has faster pre-filters that find lines which *may* be fences or
headings before mistletoe reads them; what a line is, is decided here.)
"""

from __future__ import annotations

import re

# A fence line: up to 3 spaces, 3 or more backticks or tildes (group 1), the rest (group 2).
# MULTILINE, so that `match(text, pos)` tests the line starting at `pos` of a longer text.
FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$", re.M)
FENCE_MARKS = ("```", "~~~")
# The marks of an ATX heading (group 1) and the blanks after them, on a single line.
ATX_MARK = re.compile(r"^( {0,3}#{1,6})(?:[^\S\n]+|$)")
# A whole ATX heading line with a title, found in a text of several lines (overlap looks
# for the last heading in a chunk); an empty heading (`##` alone) is not one.
ATX_LINE = re.compile(r"^ {0,3}#{1,6}[ \t]+\S.*$", re.M)


def opening_fence(line: str) -> str | None:
    """The fence (```` ``` ```` or ``~~~``, any length) a line opens, if it opens one."""
    opened = FENCE_LINE.match(line)
    if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
        return opened.group(1)
    return None


def closes_fence(line: str, fence: str) -> bool:
    """Whether `line` closes fenced code opened by `fence`."""
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and stripped.startswith(fence)
        and set(stripped) == {fence[0]}
    )


def is_atx_heading(line: str) -> bool:
    return ATX_MARK.match(line) is not None
