"""Small builders shared by the chunker tests: pages, crawls, prose and one-page runs.

Inputs are built here from our own words (never corpus text), so each test states its
page in a few lines and the reader sees exactly what goes in.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from firechunk.chunker.cleanup import clean_markdown
from firechunk.chunker.page import ChunkerOptions, PageChunks, chunk_page
from firechunk.chunker.sizer import Sizer
from firechunk.chunker.split import Limits
from firechunk.run.memory import chunk_crawl
from firechunk.schemas.page import CrawlResult
from firechunk.schemas.report import ChunkRun
from firechunk.tokens import TokenCounter

COUNTER = TokenCounter()
URL = "https://docs.example.com/guides/page"

_NOUNS = ("client", "table", "policy", "bucket", "function", "query", "token", "session")
_VERBS = ("returns", "stores", "updates", "checks", "signs", "reads", "writes", "lists")


count = Sizer(COUNTER)  # counts a text, and joins of counted texts with the shortcut


def page(markdown: object, url: str = URL, title: str | None = "Page") -> dict:
    """One page in Firecrawl's result shape (`data[i]`)."""
    metadata: dict = {"sourceURL": url, "url": url, "statusCode": 200}
    if title is not None:
        metadata["title"] = title
    return {"markdown": markdown, "metadata": metadata}


def crawl(*pages: dict) -> CrawlResult:
    return CrawlResult.model_validate({"status": "completed", "data": list(pages)})


def run_pages(*pages: dict, workers: int = 1, options: ChunkerOptions | None = None) -> ChunkRun:
    return chunk_crawl(crawl(*pages), workers=workers, options=options)


def run_markdown(markdown: str, url: str = URL, **limits: int) -> ChunkRun:
    """Chunk one page through the whole pipeline, with optional smaller limits."""
    options = ChunkerOptions(limits=Limits(**limits)) if limits else None
    return run_pages(page(markdown, url), options=options)


def chunk_one(markdown: str, **limits: int) -> PageChunks:
    """Chunk one page with the page-level chunker only (no ids, no overlap)."""
    options = ChunkerOptions(limits=Limits(**limits)) if limits else ChunkerOptions()
    return chunk_page(markdown, "Page", count, options)


def sentences(tokens: int, seed: int, tag: str = "w") -> str:
    """Sentences of about `tokens` tokens whose words carry numbered tags, so that every
    word of a page can be traced (`tag` makes two prose blocks share no sentence)."""
    rng = random.Random(seed)
    out: list[str] = []
    counted = 0
    n = 0
    while counted < tokens:
        n += 1
        sentence = f"The {rng.choice(_NOUNS)} {rng.choice(_VERBS)} {tag}{seed}x{n} now."
        out.append(sentence)
        counted += count(" " + sentence)
    return " ".join(out)


def code_lines(n: int, seed: int = 0) -> list[str]:
    """n distinct lines of Python, a blank line every fifth line."""
    lines = []
    for i in range(n):
        lines.append("" if i % 5 == 4 else f"value_{seed}_{i} = compute({i}, 'item {i}')")
    return lines


def fenced(lines: list[str], info: str = "python") -> str:
    return "\n".join([f"```{info}", *lines, "```"])


def words(text: str) -> Counter[str]:
    """Whitespace-separated words of `text`, fence lines excluded (as quality.py counts)."""
    return Counter(
        w
        for line in text.split("\n")
        if not re.match(r"^\s*(`{3,}|~{3,})", line)
        for w in line.split()
    )


def cleaned_words(markdown: str) -> Counter[str]:
    return words(clean_markdown(markdown).text)


def chunk_words(texts: list[str]) -> Counter[str]:
    total: Counter[str] = Counter()
    for text in texts:
        total += words(text)
    return total
