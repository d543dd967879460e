"""Page titles: what is removed from one, and when one is unusable.

A page's title is repeated in every chunk of the page (`page_title`, and `h1` where the
page has no H1 of its own), and the database stores and full-text indexes it with each of
them. Postgres refuses a NUL (U+0000) in text, and a tsvector over about 1 MB, and either
refusal stops the whole load, so such a title never reaches a chunk:
- control characters other than NUL (an ESC or bell picked up with the title) are removed,
  as clean-up removes them from a page's text (`control_chars`): they show nothing, and
  what is left is still the title;
- a title holding a NUL is unusable. An HTML parser never puts a NUL into a `<title>` (it
  reads one as U+FFFD), so the title did not come from the page the usual way and cannot
  be trusted to name it;
- a title over `MAX_TITLE_CHARS` is unusable: it is text the crawler mistook for a title.

A page with an unusable title is quarantined whatever its content, as one without a
usable URL is (`page_problem`). Guessing a title for it (the URL, a cut-down title) would
publish the page under a name the site does not give it.
"""

from __future__ import annotations

import re

from firechunk.urls import url_problem

UNUSABLE_TITLE = "unusable-title"

# Docs titles run to a few dozen characters, a hundred or two with the site's name; a
# thousand is no title. At this bound a title beside a chunk's text (1,000 tokens at most)
# stays far below the 1 MB a tsvector holds, and adds 100 kB to a page of 100 chunks.
MAX_TITLE_CHARS = 1_000

_NUL = "\x00"
# The control characters clean-up's `control_chars` removes from text, but for NUL (which
# makes the title unusable instead).
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_title(title: str | None) -> str | None:
    """The crawled title without its control characters but NUL; None when nothing is
    left (the page is then titled by its URL, `firechunk.run.plan.plan_crawl`)."""
    if not title:
        return None
    return _CONTROL.sub("", title) or None


def title_problem(title: str, url: str) -> tuple[str, str] | None:
    """Why a page's title cannot go with its chunks (a quarantine reason and detail), or
    None. A page the crawl gave no title is titled by its `url`: `url_problem` judges that."""
    if title == url:
        return None
    if (at := title.find(_NUL)) >= 0:
        return UNUSABLE_TITLE, f"the title has a NUL (U+0000) at character {at + 1:,}"
    if len(title) > MAX_TITLE_CHARS:
        return UNUSABLE_TITLE, f"the title is {len(title):,} characters, over {MAX_TITLE_CHARS:,}"
    return None


def page_problem(url: str, title: str) -> tuple[str, str] | None:
    """Why a page is quarantined whatever its content (its chunks could not say where they
    come from, or its title cannot go with them), or None."""
    return url_problem(url) or title_problem(title, url)


def recorded_title(title: str) -> str:
    """The title as the quarantine records of a page with an unusable URL or title keep it:
    enough to recognise the page, each NUL shown as ␀ (U+2400), cut at `MAX_TITLE_CHARS`."""
    shown = title.replace(_NUL, "\u2400")
    return shown if len(shown) <= MAX_TITLE_CHARS else shown[:MAX_TITLE_CHARS] + "…"
