"""Navigation is not content: the shapes of a site's navigation, read from one page.

Crawl-wide chrome (`firechunk.run.chrome`) sees a sidebar only when ten distinct pages
repeat it, and never sees the lines of it that differ from page to page (the branch the
page sits in, the page's own name in a breadcrumb). Navigation has a shape of its own on
every docs platform, which one page shows: lines made of nothing but links, and the
labels, separators and expand buttons between them. Clean-up (`site_chrome`) drops such
blocks where a page's navigation stands (`navigation_lines`); an index page, whose body
is such lines, is kept and its chunks are tagged (`is_index_page`, `is_link_list`).

An *item* is a list item with its continuation lines, or a paragraph. Its shapes:
- link: nothing but links (a link's text may hold an image: a logo), with a bullet, a
  rendered task box (`[ ]`, `[x]`), separators (`» › > / | · →`, `*`, `-`) and
  Firecrawl's `\\` line breaks around them; a bare image is not one (it is content).
- label: a list item of at most four words, no sentence punctuation, no link (the page's
  own name in a breadcrumb, a sidebar category), or of separators only (`- »`).
- caption: a paragraph of at most four words, no sentence punctuation but a closing
  colon ("Contents:", "Project"): a sidebar's section title.
- toggle: a sidebar's expand button, "Toggle navigation of X" (Furo), "Expand sidebar
  category 'X'" (Docusaurus).
- breadcrumb: short labels or links joined by ` > `, ` / `, `›`, `»` or `→`.
A *navigation block* (blank lines around it) holds nothing but these, and at least one
link, toggle or breadcrumb.

What clean-up drops:
- navigation blocks above the page's title, its first heading when that is an H1
  (nothing above a title is its page's content), and the runs of captions next to them
  ("Contents", "Get Started"); on a page titled otherwise, the navigation blocks above
  its first heading that no prose or caption ending in ":" stands before (the body may
  start above its first H2: "This guide covers:" and a list of links), and the captions
  between two of them. Nothing goes when nothing but navigation would be left.
- a sidebar tree anywhere: a run of navigation blocks (blank lines between them) that
  holds a toggle.
- a pager after the page's last heading: a block of links to the previous and next
  pages, each link's text starting with "Previous" or "Next" (or a standalone such label
  standing just above the block's link in the page as crawled); and below it, where the
  content has ended, navigation blocks and captions (a footer's link columns, a table
  of contents without its label).
A link list under a heading ("More resources", a toctree) is a section's body, and stays.

Index pages: a page whose words are mostly (`LINK_SHARE`) the texts of lines of nothing
but links, with at least `MIN_INDEX_LINKS` such lines (an API module index, "genindex", a
sitemap-like page). Its chunks whose words are also mostly such are tagged
`kind = "navigation"`: kept for search by words, left out of the vector index by the
loader. A chunk of prose on such a page is not tagged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Final

from firechunk.chunker.syntax import (
    closes_fence,
    is_atx_heading,
    is_setext_underline,
    opening_fence,
)

NAVIGATION: Final = "navigation"  # the `kind` of a chunk of an index page's link lists
# An index page's words, and those of each chunk of it that is tagged, are more than this
# share in link lines: on the shared corpus such pages and chunks hold 68-100%, a content
# page at most 31%, the chunk of an index page that holds its prose 27%.
LINK_SHARE = 0.5
MIN_INDEX_LINKS = 10  # link lines an index page has at least
MAX_ITEM_CHARS = 2_000  # a longer item is never navigation (and is not read as one)

# A link: its text may hold brackets one level deep (an image: a logo) and Firecrawl's
# `\\` line breaks; its target, parentheses one level deep, and a title.
_LINK = re.compile(
    r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"\n]*\")?\)"
)
_LINK_TEXT = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(")
_IMAGE = re.compile(r"!\[[^\[\]]*\]\([^()\s]*(?:\s+\"[^\"\n]*\")?\)")
_BULLET = re.compile(r"[ \t]*(?:[-*+]|\d{1,3}[.)])(?:[ \t]+|$)")
_TASK_BOX = re.compile(r"\[[ xX]\](?!\()")
_SEPARATORS = re.compile(r"[\s\\«‹»›>/|·•*→←\-–—,]*")
_WORDS = re.compile(r"\w+")
_SENTENCE = re.compile(r"[.!?;:`\[\]()<>#=]")
# The platforms' own words, case and all. A page is searched for them with `in`
# (`navigation_lines`): a regex with alternatives tries each of them at every character.
_TOGGLES = ("Toggle navigation of", "Toggle the collapsible", "Expand sidebar", "Collapse sidebar")
_TOGGLE = re.compile("|".join(re.escape(toggle) for toggle in _TOGGLES))
_CRUMB_SEPARATOR = re.compile(r"\s+(?:>|/|›|»|→)\s+|\s*[›»→]\s*")
# A link's text that starts with a pager word ("PreviousWebhooks" too: GitBook glues it).
_PAGER = re.compile(r"(?:[«‹←]\s*)?(?:previous|prev|next|older|newer)(?-i:(?![a-z]))", re.I)
_PAGER_WORD = re.compile(r"(?i:previous|prev|next|older|newer)")
# A pager word that is the whole text, or followed by a line break, a colon or an arrow:
# what a single link must say to be a pager ("Next steps" is a section's name).
_PAGER_ALONE = re.compile(r"(?:[«‹←]\s*)?(?:previous|prev|next)\s*(?:$|\\|:|[»›→])", re.I)

LINK, LABEL, CAPTION, TOGGLE, CRUMB = "link", "label", "caption", "toggle", "crumb"
_STRONG = {LINK, TOGGLE, CRUMB}


# -- items and their shapes -------------------------------------------------------------


def items(lines: Sequence[str]) -> list[str]:
    """The block's items: a list item or a toggle starts one, and so does an unindented
    line after an item whose brackets are all closed (a caption run on below a list);
    other lines continue the item (its description, a link's text broken over lines)."""
    found: list[str] = []
    for line in lines:
        if found and not _starts_item(line, found[-1]):
            found[-1] += "\n" + line
        else:
            found.append(line)
    return found


def _starts_item(line: str, item: str) -> bool:
    """Whether `line` starts an item of its own after `item`."""
    if _BULLET.match(line) or _TOGGLE.match(line.strip()):
        return True
    closed = item.count("[") == item.count("]") and item.count("(") == item.count(")")
    return closed and not line[:1].isspace()


def item_shape(item: str) -> str | None:
    """The item's navigation shape (`LINK`, `LABEL`, `CAPTION`, `TOGGLE`, `CRUMB`), or
    None for content."""
    if len(item) > MAX_ITEM_CHARS:
        return None
    bullet = _BULLET.match(item)
    text = item[bullet.end() :] if bullet else item
    text = text.strip()
    if _TOGGLE.match(text):
        return TOGGLE
    if text.startswith("[") and _only_links(text):
        return LINK
    if bullet:
        return LABEL if _is_label(text.rstrip("»›>/|· ")) else None
    if "\n" in text:
        return None
    if _is_breadcrumb(text):
        return CRUMB
    return CAPTION if _is_label(text.removesuffix(":")) else None


def _only_links(text: str) -> bool:
    """Nothing but links, task boxes and separators; at least one link."""
    rest, links = _LINK.subn("", _TASK_BOX.sub("", text))
    return links > 0 and _SEPARATORS.fullmatch(rest) is not None


def _is_label(text: str) -> bool:
    """Empty or separators only, or one to four words with no sentence punctuation."""
    if not text or _SEPARATORS.fullmatch(text):
        return True
    return len(text.split()) <= 4 and not _SENTENCE.search(text)


def _is_breadcrumb(text: str) -> bool:
    """Two or more labels or links joined by breadcrumb separators."""
    parts = _CRUMB_SEPARATOR.split(text)
    return len(parts) >= 2 and all(
        (part.startswith("[") and _only_links(part)) or (part and _is_label(part))
        for part in (part.strip() for part in parts)
    )


def block_shapes(lines: Sequence[str]) -> set[str] | None:
    """The shapes of a block's items, or None when one of them is content."""
    shapes = set()
    for item in items(lines):
        shape = item_shape(item)
        if shape is None:
            return None
        shapes.add(shape)
    return shapes


def is_navigation(shapes: AbstractSet[str] | None) -> bool:
    """A block of navigation shapes with at least one link, toggle or breadcrumb."""
    return bool(shapes and shapes & _STRONG)


# -- where a page's navigation stands -----------------------------------------------------


@dataclass(frozen=True)
class _Block:
    """A run of non-blank lines [start, end) of the cleaned page: a heading (`level`),
    fenced code, or text (its items' `shapes`, None for content; `colon`: it ends in ":")."""

    start: int
    end: int
    kind: str  # "heading", "code" or "text"
    level: int = 0
    shapes: frozenset[str] | None = None
    colon: bool = False

    @property
    def navigation(self) -> bool:
        return is_navigation(self.shapes)

    @property
    def caption(self) -> bool:
        return self.shapes == {CAPTION}


def _blocks(lines: Sequence[str]) -> Iterator[_Block]:
    """The page's blocks, top first. A setext heading is the run of lines it underlines."""
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if _blank(line):
            i += 1
        elif fence := opening_fence(line):
            end = i + 1
            while end < n and not closes_fence(lines[end], fence):
                end += 1
            yield _Block(i, min(end + 1, n), "code")
            i = end + 1
        elif is_atx_heading(line):
            marks = line.strip()
            yield _Block(i, i + 1, "heading", len(marks) - len(marks.lstrip("#")))
            i += 1
        else:
            end = i + 1
            while end < n and not _blank(lines[end]) and not _opens_block(lines[end]):
                if is_setext_underline(lines[end]):
                    break
                end += 1
            if end < n and not _blank(lines[end]) and is_setext_underline(lines[end]):
                level = 1 if lines[end].strip()[0] == "=" else 2
                yield _Block(i, end + 1, "heading", level)
                i = end + 1
            else:
                yield _text_block(lines, i, end)
                i = end


def _blank(line: str) -> bool:
    """Empty or white space only, without copying a long line as `strip` does."""
    return not line or line.isspace()


def _opens_block(line: str) -> bool:
    return bool(opening_fence(line) or is_atx_heading(line))


def _text_block(lines: Sequence[str], start: int, end: int) -> _Block:
    shapes = block_shapes(lines[start:end])
    return _Block(
        start,
        end,
        "text",
        shapes=None if shapes is None else frozenset(shapes),
        colon=lines[end - 1].rstrip()[-1:] == ":",
    )


def tail_blocks(lines: Sequence[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of the text blocks after the page's last heading or code, last first:
    where a page's footer and pager stand. Clean-up has closed every fence, so going back
    from the end a fence is met before its code."""
    end = len(lines)
    while True:
        while end and _blank(lines[end - 1]):
            end -= 1
        start = end
        while start and not _blank(lines[start - 1]):
            start -= 1
        run = lines[start:end]
        if not run or any(_opens_block(line) for line in run):
            return
        if any(is_setext_underline(line) for line in run[1:]):
            return
        yield start, end
        end = start


def navigation_lines(
    lines: Sequence[str],
    raw: Sequence[str],
    source: Sequence[int],
    toc_labels: frozenset[str] = frozenset(),
) -> list[int]:
    """Indices of the cleaned `lines` that are the page's navigation (see the module's
    docstring), in order. `raw` is the page as crawled and `source` each cleaned line's
    1-based line in it: a pager's standalone "Next" is gone by now, but stood there.

    A caption among `toc_labels` (case-folded: "On this page") and the block below it are
    a table of contents, which clean-up's `page_toc` rule removes or, switched off, keeps:
    they are left to it."""
    text = "\n".join(lines)
    drop = {block.start: block for block in _head(lines)}
    if any(toggle in text for toggle in _TOGGLES):
        drop.update((block.start, block) for block in _toggle_runs(list(_blocks(lines))))
    drop.update((block.start, block) for block in _below_pager(lines, raw, source))
    tables = _tables_of_contents(lines, sorted(drop.values(), key=lambda b: b.start), toc_labels)
    found = sorted(
        i
        for block in drop.values()
        if block.start not in tables
        for i in range(block.start, block.end)
    )
    return found if _content_left(lines, set(found)) else []


def _content_left(lines: Sequence[str], dropped: set[int]) -> bool:
    """Whether a line other than a heading's is left: a page of nothing but navigation
    (an index page without a title) is kept whole rather than emptied."""
    return any(
        i not in dropped and not _blank(line) and not _in_heading(lines, i)
        for i, line in enumerate(lines)
    )


def _in_heading(lines: Sequence[str], i: int) -> bool:
    below = lines[i + 1] if i + 1 < len(lines) else ""
    return bool(
        is_atx_heading(lines[i])
        or is_setext_underline(lines[i])
        or (not _blank(below) and is_setext_underline(below))
    )


def _tables_of_contents(
    lines: Sequence[str], blocks: list[_Block], toc_labels: frozenset[str]
) -> set[int]:
    """Starts of the blocks, among `blocks` (in order), that are a table of contents'
    label or the list right below it."""
    found: set[int] = set()
    for block, below in zip(blocks, blocks[1:], strict=False):
        label = "\n".join(lines[block.start : block.end]).strip().casefold()
        if block.caption and label in toc_labels and _adjacent(lines, block, below):
            found.update((block.start, below.start))
    return found


def _adjacent(lines: Sequence[str], above: _Block, below: _Block) -> bool:
    """Whether nothing but blank lines stands between two blocks."""
    return all(_blank(line) for line in lines[above.end : below.start])


def _below_pager(lines: Sequence[str], raw: Sequence[str], source: Sequence[int]) -> list[_Block]:
    """The pager after the page's last heading (one block, or one per link), and the
    navigation blocks and captions below it: the content ends at a pager, so what links on
    under it is the site's footer or a table of contents. Only a block with a link and a
    pager word is read whole."""
    spans = list(tail_blocks(lines))  # last first
    pagers = {}  # position in `spans` -> block
    for position, (start, end) in enumerate(spans):
        text = "\n".join(lines[start:end])
        if len(text) > MAX_ITEM_CHARS or "](" not in text:
            continue
        label_above = _label_above(raw, source[start] - 1)
        if not (label_above or _PAGER_WORD.search(text)):
            continue
        block = _text_block(lines, start, end)
        if block.shapes and block.shapes <= {LINK, CAPTION} and _is_pager(text, label_above):
            pagers[position] = block
    if not pagers:
        return []
    below = (_text_block(lines, *span) for span in spans[: max(pagers)])
    return [*pagers.values(), *(block for block in below if block.navigation or block.caption)]


def _head(lines: Sequence[str]) -> list[_Block]:
    """The blocks above the page's first heading that go (see the module's docstring)."""
    head: list[_Block] = []
    heading: _Block | None = None
    for block in _blocks(lines):
        if block.kind == "heading":
            heading = block
            break
        head.append(block)
    titled = heading is not None and heading.level == 1
    dropped: set[int] = set()
    for i, block in enumerate(head):
        if block.kind == "code" or (not titled and (block.shapes is None or block.colon)):
            break  # the body has started (a caption ending in ":" introduces what follows)
        if block.navigation:
            dropped.add(i)
    return [head[i] for i in sorted(dropped | _captions(head, dropped, titled))]


def _captions(head: list[_Block], dropped: set[int], titled: bool) -> set[int]:
    """The captions that title dropped navigation: between two dropped blocks; above a
    title, every run of captions next to one."""
    found = {
        i for i, block in enumerate(head) if block.caption and i - 1 in dropped and i + 1 in dropped
    }
    if titled:
        for run in _caption_runs(head):
            if run[0] - 1 in dropped or run[-1] + 1 in dropped:
                found.update(run)
    return found


def _caption_runs(head: list[_Block]) -> Iterator[list[int]]:
    """Indices of each run of caption blocks, in order."""
    run: list[int] = []
    for i, block in enumerate([*head, None]):
        if block is not None and block.caption:
            run.append(i)
        elif run:
            yield run
            run = []


def _toggle_runs(blocks: list[_Block]) -> Iterator[_Block]:
    """The blocks of each run of navigation blocks and captions that holds a toggle."""
    run: list[_Block] = []
    for block in [*blocks, None]:
        if block is not None and (block.navigation or block.caption):
            run.append(block)
            continue
        if any(TOGGLE in (b.shapes or ()) for b in run):
            yield from run
        run = []


def _label_above(raw: Sequence[str], index: int) -> bool:
    """Whether the page as crawled has a standalone pager word ("Next") just above line
    `index`, blank lines between."""
    i = index - 1
    while i >= 0 and _blank(raw[i]):
        i -= 1
    return i >= 0 and _PAGER_ALONE.fullmatch(raw[i].strip()) is not None


def _is_pager(text: str, label_above: bool) -> bool:
    """Links to the previous and next pages: every word outside the links a pager word,
    and as many such words as links (a label above the block counts); or, with no words
    outside, every link's text starting with one, and either two links or one that says
    it as a pager does ("Next: Setup", not "Next steps")."""
    labels = _SEPARATORS.sub(" ", _LINK.sub(" ", text)).split()
    if not all(_PAGER_ALONE.fullmatch(word) for word in labels):
        return False
    texts = [_IMAGE.sub("", found).replace("\\", " ").strip() for found in _LINK_TEXT.findall(text)]
    if labels or label_above:
        return 0 < len(texts) <= len(labels) + label_above
    if not texts or not all(_PAGER.match(found) for found in texts):
        return False
    return len(texts) >= 2 or _PAGER_ALONE.match(_LINK_TEXT.findall(text)[0].strip()) is not None


# -- index pages --------------------------------------------------------------------------

# A line of nothing but links on one line (a bullet, task boxes and separators allowed).
_SEP = r"[ \t\\«‹»›>/|·•*→←\-–—,]"
_ONE_LINE_LINK = (
    r"(?:\[[ xX]\](?!\())?\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]"
    r"\((?:[^()\s]|\([^()\s]*\))*(?:[ \t]+\"[^\"\n]*\")?\)(?:[ \t]*\[[ xX]\](?!\())?"
)
# Searched for in "\n" + text + "\n": a pattern that starts with a literal newline is
# searched twice as fast as one anchored with `^` in multi-line mode.
_LINK_LINE = re.compile(
    rf"\n[ \t]*(?:(?:[-*+]|\d{{1,3}}[.)])[ \t]+)?(?:{_SEP}*{_ONE_LINE_LINK})+{_SEP}*(?=\n)"
)
_LINK_START = re.compile(r"\n[ \t]*(?:[-*+]|\d{1,3}[.)])?[ \t]*\[")
_LINK_TARGET = re.compile(r"\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"\n]*\")?\)")


def _in_link_lines(text: str) -> tuple[int, int]:
    """Words on lines of nothing but links, and such lines. A link's target is not a
    word of the text."""
    lines = _LINK_LINE.findall(f"\n{text}\n")
    return sum(_words(line) for line in lines), len(lines)


def _words(text: str) -> int:
    return len(_WORDS.findall(_LINK_TARGET.sub("]", text)))


def is_index_page(text: str) -> bool:
    """A page whose words are mostly the texts of link lines (see the module docstring).
    Most pages have too few lines that even start with a link to be one, and are not
    read further."""
    if len(_LINK_START.findall(f"\n{text}")) < MIN_INDEX_LINKS:
        return False
    in_links, links = _in_link_lines(text)
    return links >= MIN_INDEX_LINKS and in_links > LINK_SHARE * _words(text)


def is_link_list(text: str) -> bool:
    """A chunk's text that is mostly the texts of link lines."""
    in_links, _ = _in_link_lines(text)
    return in_links > LINK_SHARE * _words(text)
