"""Property-based tests: generated markdown pages through `chunk_crawl`, checked for the
chunker's invariants (issue 2): no chunk over the hard limit, exact token counts, every
code block that fits intact in one chunk, oversized code re-fenced piece by piece, every
word of the cleaned page kept once and in order, no header-only chunk, stable ids.

Pages are lists of blocks. Hypothesis draws each block's kind and size; the words are
drawn from a generator seeded with a drawn seed and the block's tag (cheap to make big,
still shrinkable through seed and size). Every content block carries its unique tag in
its words and draws its own words, so no two chunks of a page are equal by accident and
the run's duplicate dropping stays out of the way.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field

from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st

from firechunk.chunker.blocks import HEADING, parse_blocks
from firechunk.chunker.cleanup import clean_markdown
from firechunk.chunker.page import ChunkerOptions
from firechunk.chunker.split import Limits
from firechunk.quality import check_run
from firechunk.run.memory import chunk_crawl
from tests.chunk_helpers import count, crawl, page

DEFAULT = Limits()
SMALL = Limits(soft=120, hard=160, min_tokens=30, overlap=40)
_WORDS = (
    "the a client table policy bucket row schema query index token session user role "
    "returns stores updates checks signs reads writes lists filters caches quickly safely "
    "supabase_client auth.users row-level (optional) JWTs PostgreSQL JavaScript v2.1 "
    "100 ms 42 12345678 x_y snake_case_name **bold** _italic_ `inline` https://example.com/a?b=c "
    'naïve cafe\u0301 日本語 🎉 — it\'s "quoted" a\u00a0b <br> &amp; C:\\path'
)
VOCAB = _WORDS.split(" ")
# How sentences end: BPE pre-tokens differ after letters, digits and punctuation runs.
ENDINGS = (".", ".", ".", "?", "!", ":", "...", ")", ".)", " 🎉", "`", "", "  ", "\t")
INFOS = ("", "python", "ts filename=app.ts", "sql", 'bash title="Run it"', "js {1,3-4}")


@dataclass
class Page:
    """A generated page: its markdown and what the test knows about its blocks."""

    parts: list[str] = field(default_factory=list)
    code_blocks: list[str] = field(default_factory=list)  # exact text once cleaned
    table_heads: set[str] = field(default_factory=set)  # header row of each table
    separator: str = "\n\n"  # between blocks: a blank line, or one holding spaces
    crlf: bool = False

    @property
    def markdown(self) -> str:
        text = self.separator.join(self.parts)
        return text.replace("\n", "\r\n") if self.crlf else text


def block_rng(seed: int, tag: str) -> random.Random:
    """A block's word generator, seeded with its tag too: two blocks that draw the same
    seed still differ in their words, not only in their tags (a piece cut from inside a
    sentence, or after a word ending in ';' like '&amp;', holds no tag)."""
    return random.Random(f"{tag}/{seed}")


def sentence_words(rng: random.Random, tag: str, n_words: int) -> str:
    """About `n_words` words in sentences; `tag` opens each sentence (so no line can start
    like a heading, a list item or a fence)."""
    words: list[str] = []
    sentences = []
    while len(words) < n_words:
        size = rng.randint(4, 16)
        sentence = [tag, *(rng.choice(VOCAB) for _ in range(size - 1))]
        words.extend(sentence)
        sentences.append(" ".join(sentence) + rng.choice(ENDINGS))
    return " ".join(sentences).rstrip()


def code_line(rng: random.Random, tag: str, i: int) -> str:
    indent = "    " * rng.randint(0, 2)
    end = rng.choice(("", "", " {", ":", "  ", ";", " # 🎉"))
    return f"{indent}{tag}_{i} = call({rng.randint(0, 10**6)}, '{rng.choice(VOCAB)}'){end}"


# -- block strategies: each returns a function that adds the block to a Page -----------

sizes = st.one_of(st.integers(3, 60), st.integers(60, 400), st.integers(400, 1400))


@st.composite
def headings(draw):
    level = draw(st.integers(1, 3))
    setext = level <= 2 and draw(st.booleans())
    short = " ".join(draw(st.lists(st.sampled_from(VOCAB[:24]), min_size=1, max_size=4)))
    long_size = draw(st.one_of(st.just(0), st.just(0), st.integers(30, 700)))
    seed, anchor = draw(st.integers(0, 10**6)), draw(st.booleans())

    def add(page: Page, tag: str) -> None:
        title = short
        if long_size:  # a heading as long as a paragraph; the tag keeps its pieces unique
            rng = block_rng(seed, tag)
            words = [tag if n % 8 == 0 else rng.choice(VOCAB[:24]) for n in range(long_size)]
            title = " ".join(words)
        slug = re.sub(r"\W+", "-", title)
        if setext:
            page.parts.append(f"{title}\n{'=' if level == 1 else '-' * 3}")
        else:
            page.parts.append(f"{'#' * level} {title}" + (f" [\\#](\\#{slug})" if anchor else ""))

    return add


@st.composite
def paragraphs(draw):
    seed, n_words = draw(st.integers(0, 10**6)), draw(sizes)
    wrap = draw(st.booleans())

    def add(page: Page, tag: str) -> None:
        text = sentence_words(block_rng(seed, tag), tag, n_words)
        if wrap:  # one sentence a line, as some pages write prose
            text = re.sub(f" (?={tag} )", "\n", text)
        page.parts.append(text)

    return add


@st.composite
def fenced_code(draw):
    seed = draw(st.integers(0, 10**6))
    n_lines = draw(st.one_of(st.integers(1, 20), st.integers(20, 80), st.integers(120, 260)))
    info, fence = draw(st.sampled_from(INFOS)), draw(st.sampled_from(["```", "~~~", "````"]))

    def add(page: Page, tag: str) -> None:
        rng = block_rng(seed, tag)
        body = ["" if rng.random() < 0.12 else code_line(rng, tag, i) for i in range(n_lines)]
        body[0] = code_line(rng, tag, 0)
        text = "\n".join([f"{fence}{info}", *body, fence])
        page.parts.append(text)
        page.code_blocks.append(text)

    return add


@st.composite
def flattened_code(draw):
    """Firecrawl's flattened form: a lone backtick, marker + code line pairs, a backtick."""
    seed, n_lines = draw(st.integers(0, 10**6)), draw(st.integers(1, 40))
    sequential = draw(st.booleans())

    def add(page: Page, tag: str) -> None:
        rng = block_rng(seed, tag)
        body = ["" if rng.random() < 0.1 else code_line(rng, tag, i) for i in range(n_lines)]
        body[0] = code_line(rng, tag, 0)
        lines = ["`"]
        for i, line in enumerate(body):
            lines.append(str(i + 1) if sequential else "_10")
            if line:
                lines.append(line)
        lines.append("`")
        page.parts.append("\n".join(lines))
        page.code_blocks.append("\n".join(["```", *body, "```"]))

    return add


@st.composite
def lists(draw):
    """Bullet or ordered lists; items may hold a nested list or a fenced code block (the
    steps of a guide), written with the item's indentation."""
    seed, n_items = draw(st.integers(0, 10**6)), draw(st.integers(1, 12))
    item_words = draw(st.one_of(st.integers(3, 40), st.integers(40, 300), st.integers(300, 900)))
    ordered, nested = draw(st.booleans()), draw(st.booleans())
    code_sizes = draw(st.lists(st.sampled_from([0, 0, 5, 40, 90, 200]), min_size=n_items))

    def add(page: Page, tag: str) -> None:
        rng = block_rng(seed, tag)
        items = []
        for i in range(n_items):
            marker = f"{i + 1}." if ordered else "-"
            indent = " " * (len(marker) + 1)
            item = f"{marker} {sentence_words(rng, tag, rng.randint(3, item_words))}"
            if nested and rng.random() < 0.4:
                item += f"\n{indent}- {sentence_words(rng, tag, rng.randint(3, 20))}"
            if code_sizes[i]:
                body = [code_line(rng, f"{tag}i{i}", n) for n in range(code_sizes[i])]
                code = "\n".join(indent + line for line in ["```js", *body, "```"])
                item += f"\n\n{code}"
                page.code_blocks.append(code)
                if rng.random() < 0.5:
                    item += f"\n\n{indent}{sentence_words(rng, tag, rng.randint(3, 60))}"
            items.append(item)
        page.parts.append("\n".join(items))

    return add


@st.composite
def tables(draw):
    seed, n_rows, n_cols = draw(st.integers(0, 10**6)), draw(st.integers(1, 120)), 3
    long_cell = draw(st.one_of(st.just(0), st.just(0), st.integers(20, 1500)))

    def add(page: Page, tag: str) -> None:
        rng = block_rng(seed, tag)
        head = "| " + " | ".join(f"{tag}col{c}" for c in range(n_cols)) + " |"
        rows = [
            "| " + " | ".join(f"{tag}r{r} {rng.choice(VOCAB)}" for _ in range(n_cols)) + " |"
            for r in range(n_rows)
        ]
        if long_cell:  # a row holding a whole paragraph, sometimes over any limit
            row = rng.randrange(n_rows)
            rows[row] = rows[row][:-1] + sentence_words(rng, tag, long_cell) + " |"
        page.parts.append("\n".join([head, "|" + "---|" * n_cols, *rows]))
        page.table_heads.add(head)

    return add


@st.composite
def quotes(draw):
    """Block quotes (callouts): sentences on '> ' lines, sometimes a list inside."""
    seed, n_words = draw(st.integers(0, 10**6)), draw(sizes)
    with_list = draw(st.booleans())
    code_size = draw(st.sampled_from([0, 0, 10, 60, 150]))

    def add(page: Page, tag: str) -> None:
        rng = block_rng(seed, tag)
        lines = re.sub(f" (?={tag} )", "\n", sentence_words(rng, tag, n_words)).split("\n")
        if with_list:
            lines += ["", *(f"- {sentence_words(rng, tag, 8)}" for _ in range(3))]
        if code_size:
            body = [code_line(rng, f"{tag}q", n) for n in range(code_size)]
            code = "\n".join(f"> {line}".rstrip() for line in ["```sh", *body, "```"])
            page.code_blocks.append(code)
            lines.append("")
        text = "\n".join(f"> {line}".rstrip() for line in lines)
        page.parts.append(f"{text}\n{code}" if code_size else text)

    return add


debris = st.sampled_from(["Loading...", "PIPConda", "ClientServer", "* * *", "2"]).map(
    lambda text: lambda page, tag: page.parts.append(text)
)

blocks = st.one_of(
    headings(),
    paragraphs(),
    fenced_code(),
    flattened_code(),
    lists(),
    tables(),
    quotes(),
    debris,
)


@st.composite
def pages(draw) -> Page:
    page_ = Page(
        separator=draw(st.sampled_from(["\n\n", "\n\n", "\n \n", "\n\n\n", "\n\t\n"])),
        crlf=draw(st.booleans()),
    )
    adders = draw(st.lists(blocks, min_size=1, max_size=14))
    for n, add in enumerate(adders):
        add(page_, f"t{n}")
    return page_


# -- what the invariants compare ------------------------------------------------------

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_QUOTED = re.compile(r"^ {0,3}> ?")


def word_sequence(lines: list[str], table_heads: set[str], seen_heads: set[str]) -> list[str]:
    """Words of the lines in order; fence lines and repeated table header rows skipped."""
    out: list[str] = []
    skip_delimiter = False
    for line in lines:
        if skip_delimiter:
            skip_delimiter = False
            continue
        if _FENCE.match(_QUOTED.sub("", line)) or line.strip() == ">":
            continue  # fences (a cut block is re-fenced); '>' alone is a quote's blank line
        if line in table_heads:
            if line in seen_heads:
                skip_delimiter = True
                continue
            seen_heads.add(line)
        out.extend(line.split())
    return out


def chunk_texts(run) -> list[str]:
    return [chunk.data.text for chunk in run.chunks]


def assert_invariants(generated: Page, limits: Limits = DEFAULT) -> None:
    markdown = generated.markdown
    result = crawl(page(markdown))
    options = ChunkerOptions(limits=limits)
    run = chunk_crawl(result, options=options)
    hard = limits.hard
    if not run.chunks:  # only headings and debris: quarantined, with a reason
        assert [q.reason for q in run.quarantine] in (["header-only"], ["empty"])
        return
    assert run.quarantine == []
    assert run.report.duplicate_chunks_dropped == 0
    texts = chunk_texts(run)

    # Hard limit and exact counts; source lines inside the page, in page order.
    n_lines = len(markdown.replace("\r\n", "\n").split("\n"))
    for chunk in run.chunks:
        assert chunk.metadata.token_count == count(chunk.data.text) <= hard
        first, last = chunk.metadata.source_lines
        assert 1 <= first <= last <= n_lines
    starts = [c.metadata.source_lines[0] for c in run.chunks]
    assert starts == sorted(starts)

    # Every code block that fits is whole in exactly one chunk.
    for code in generated.code_blocks:
        if count(code) <= hard:
            assert sum(code in text for text in texts) == 1, code[:80]
        else:
            assert_refenced(code, texts)

    # The page's own count after clean-up is exact too.
    cleaned_page = clean_markdown(markdown)
    assert run.pages[0].tokens_after_cleanup == count(cleaned_page.text)

    # Every word of the cleaned page, once, in page order (clean-up is the only loss).
    cleaned = cleaned_page.lines
    page_words = word_sequence(cleaned, generated.table_heads, set())
    seen: set[str] = set()
    kept = [
        w for text in texts for w in word_sequence(text.split("\n"), generated.table_heads, seen)
    ]
    assert kept == page_words

    # No header-only chunk (each has a block that is not a heading), but for the one case
    # the rules leave no way around.
    forced = 0
    for i, text in enumerate(texts):
        if not any(b.kind != HEADING for b in parse_blocks(text.split("\n"))):
            previous = texts[i - 1] if i else None
            following = texts[i + 1] if i + 1 < len(texts) else None
            codes = generated.code_blocks
            assert forced_header_only(text, previous, following, codes, limits), text[:200]
            forced += 1

    # No heading anchor or loading debris survives.
    assert not any("[\\#](\\#" in text for text in texts)
    assert not any(line == "Loading..." for text in texts for line in text.split("\n"))

    # Two small neighbours in one H1 section would have been merged.
    for before, after in zip(run.chunks, run.chunks[1:], strict=False):
        small = limits.min_tokens
        if before.metadata.token_count < small and after.metadata.token_count < small:
            opens_h1 = any(b.level == 1 for b in parse_blocks(after.data.text.split("\n")))
            assert opens_h1, (before.data.text, after.data.text)

    # The independent checker agrees. (Its code figure is left out: it judges "fits" on
    # code lines stripped of indentation, so a block just over the limit as written is
    # counted as split; the exact check is above.)
    figures = check_run(result, run, hard=hard, small=limits.min_tokens)
    assert figures.over_hard_limit == figures.token_count_mismatches == 0
    assert figures.words_missing == figures.duplicate_texts == 0
    assert figures.headings_missing == figures.lines_under_wrong_header == 0
    assert figures.header_only_chunks == forced, figures.examples

    # Stable ids: a rerun gives the same ids, all distinct.
    rerun = chunk_crawl(crawl(page(markdown)), options=options)
    assert [c.chunk_id for c in rerun.chunks] == [c.chunk_id for c in run.chunks]
    assert len({c.chunk_id for c in run.chunks}) == len(run.chunks)


def forced_header_only(
    text: str,
    before: str | None,
    after: str | None,
    code_blocks: list[str],
    limits: Limits = DEFAULT,
) -> bool:
    """The two cases where the rules leave headings on their own:
    - headings so long that less than `min_tokens` of room is left beside them;
    - headings next to a code block of the page (in a list or a quote or not) that fits
      the hard limit alone but not with them, and no other chunk to take them: the code
      opens the next chunk (at the start of a page) or closes the one before (at the
      end): stacking would push the chunk over, cutting would split code that fits."""
    hard = limits.hard
    if count(text) + 1 + limits.min_tokens > hard:
        return True
    fits = [code for code in code_blocks if count(code) <= hard]
    return any(
        before is not None and before.endswith(code) and count(f"{code}\n\n{text}") > hard
        for code in fits
    ) or any(
        after is not None and content(after).startswith(code) and count(f"{text}\n\n{code}") > hard
        for code in fits
    )


def content(text: str) -> str:
    """A chunk's text from its first block that is not a heading."""
    lines = text.split("\n")
    blocks = [b for b in parse_blocks(lines) if b.kind != HEADING]
    return "\n".join(lines[blocks[0].start :]) if blocks else ""


def fenced_segments(text: str) -> list[tuple[str, list[str], str]]:
    """(opening line, body lines, closing line) of each fenced block of a chunk, nested in
    a list item or not."""
    segments: list[tuple[str, list[str], str]] = []
    opener: str | None = None
    body: list[str] = []
    for line in text.split("\n"):
        match = _FENCE.match(_QUOTED.sub("", line))
        if opener is None:
            if match:
                opener, fence, body = line, match.group(1), []
        elif (bare := _QUOTED.sub("", line).strip()).startswith(fence) and set(bare) == {fence[0]}:
            segments.append((opener, body, line))
            opener = None
        else:
            body.append(line)
    return segments


def assert_refenced(code: str, texts: list[str]) -> None:
    """An oversized block comes back as fenced pieces with its own opening line, each
    within the limit, holding its non-blank lines in order."""
    lines = code.split("\n")
    tag = _QUOTED.sub("", lines[1]).strip().split("_")[0] + "_"
    bodies = []
    for text in texts:
        for opener, body, closer in fenced_segments(text):
            if any(_QUOTED.sub("", line).strip().startswith(tag) for line in body):
                assert (opener, closer) == (lines[0], lines[-1])  # same fence and info string
                bodies.append(body)
    assert len(bodies) >= 2
    got = [line for body in bodies for line in body if line.strip()]
    assert got == [line for line in lines[1:-1] if line.strip()]


# No explain phase: its line tracing makes one failure take many minutes to report.
FAST_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
# Derandomized by default: CI runs the same examples every time (both tests in about 30 s
# on 2 cores). To look further, set PROPERTY_SEED (any integer) and PROPERTY_EXAMPLES,
# e.g. PROPERTY_SEED=7 PROPERTY_EXAMPLES=300 (`--hypothesis-seed` is ignored while
# derandomized).
SEED = os.environ.get("PROPERTY_SEED")
PROPERTY_SETTINGS = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    phases=FAST_PHASES,
    derandomize=SEED is None,
)


def property_test(test):
    """The test run by hypothesis over generated pages, with the settings above."""
    test = PROPERTY_SETTINGS(given(pages())(test))
    return seed(int(SEED))(test) if SEED is not None else test


@property_test
def test_generated_pages_keep_every_invariant(generated):
    assert_invariants(generated)


@property_test
def test_invariants_hold_with_small_limits(generated):
    # A 160-token hard limit puts most blocks over it: every cutting path runs.
    assert_invariants(generated, SMALL)
