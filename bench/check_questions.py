"""Check bench/questions.jsonl, the held-out retrieval question set, against the raw crawls.

Errors (exit 1): a row that is not the expected JSON; an id not `<crawl-short>-<nnn>` for its
corpus, or repeated; a question repeated; a url that is not a sourceURL of its crawl; evidence
that is not a verbatim substring of that page's markdown, or outside 8-40 words; a page with
more than 3 questions; a split that is not the one assigned below; fewer than 30 questions on a
crawl or 200 in all; evidence that shares a sentence with a question of the tuning set
(bench/retrieval_questions.jsonl), on any crawl.

Split: within each crawl, ids are ranked by sha256(id) and alternate tune, held, tune, ...
(deterministic, and balanced to within one question per crawl).

Warnings (printed, not fatal): evidence found on more than one page of its crawl (not counted
for the python reference, one page served at every URL) or more than once on its page; a
question that copies most of its evidence's words. Info: for the python reference, the `## `
section each evidence sits in next to the url's last path segment, to check by eye that the
url names the function that answers.

Run: `python bench/check_questions.py [questions.jsonl]` (the corpus is ../shared/corpus/).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
TUNING = ROOT / "bench" / "retrieval_questions.jsonl"
SHORT = {
    "supabase-auth-2024-09.json": "auth",
    "supabase-guides-2026.json": "guides",
    "supabase-python-reference-2024-09.json": "py",
    "pygithub-readthedocs-sphinx-rtd.json": "pygithub",
    "crewai-docs-mintlify-2025.json": "crewai",
}
KEYS = {"id", "corpus", "url", "question", "evidence", "split"}
STOP = frozenset(
    re.findall(
        r"\w+",
        "a an the of to in on for and or is are be by with as at it its this that from can do"
        " does i my me we you your how what which when why where who not no if will should use"
        " using into than then there their they them was were has have had but so only all any",
    )
)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def norm(text: str) -> str:
    return " ".join(words(text))


def sentence_spans(text: str, evidence: str) -> list[str]:
    """The sentences (cut at '. ', '? ', '! ' or a line break) that each occurrence of
    evidence touches, normalised."""
    out = []
    start = text.find(evidence)
    while start != -1:
        end = start + len(evidence)
        left = max(
            text.rfind("\n", 0, start), *(text.rfind(p, 0, start) + 1 for p in (". ", "? ", "! "))
        )
        cuts = [
            i
            for i in (text.find("\n", end), *(text.find(p, end) for p in (". ", "? ", "! ")))
            if i != -1
        ]
        right = min(cuts) if cuts else len(text)
        out.append(norm(text[left + 1 if left >= 0 else 0 : right + 1]))
        start = text.find(evidence, start + 1)
    return out


def load_crawls() -> dict[str, dict[str, str]]:
    crawls = {}
    for name in SHORT:
        pages: dict[str, str] = {}
        for page in json.loads((CORPUS / name).read_text(encoding="utf-8"))["data"]:
            url = page["metadata"].get("sourceURL") or page["metadata"].get("url")
            pages.setdefault(url, page.get("markdown") or "")
        crawls[name] = pages
    return crawls


def py_section(markdown: str, evidence: str) -> str | None:
    """For the python reference: the `## ` heading above the evidence (None when found
    under no heading)."""
    at = markdown.find(evidence)
    heads = [m for m in re.finditer(r"^## (.+)$", markdown[:at], re.M)]
    return heads[-1].group(1).strip() if heads else None


def main(path: Path) -> int:
    if not CORPUS.is_dir():
        print(f"skip: {CORPUS} is absent")
        return 0
    crawls = load_crawls()
    errors: list[str] = []
    warnings: list[str] = []
    infos: list[str] = []
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {n}: not JSON ({exc})")
            continue
        if set(row) != KEYS:
            errors.append(f"line {n}: keys {sorted(row)} are not {sorted(KEYS)}")
            continue
        rows.append(row)

    tuning_sentences: list[tuple[str, str]] = []
    for line in TUNING.read_text(encoding="utf-8").splitlines():
        if line.strip():
            t = json.loads(line)
            page = crawls.get(t["corpus"], {}).get(t["url"], "")
            for s in sentence_spans(page, t["evidence"]) or [norm(t["evidence"])]:
                tuning_sentences.append((t["id"], s))

    ids = Counter(r["id"] for r in rows)
    questions = Counter(norm(r["question"]) for r in rows)
    per_page: Counter[tuple[str, str]] = Counter()
    by_crawl: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        rid, corpus, url, ev = r["id"], r["corpus"], r["url"], r["evidence"]
        if corpus not in SHORT:
            errors.append(f"{rid}: unknown corpus {corpus}")
            continue
        by_crawl[corpus].append(r)
        if not re.fullmatch(rf"{SHORT[corpus]}-\d{{3}}", rid):
            errors.append(f"{rid}: id is not {SHORT[corpus]}-<nnn>")
        if ids[rid] > 1:
            errors.append(f"{rid}: id repeated")
        if questions[norm(r["question"])] > 1:
            errors.append(f"{rid}: question repeated")
        if r["split"] not in ("tune", "held"):
            errors.append(f"{rid}: split {r['split']!r}")
        pages = crawls[corpus]
        if url not in pages:
            errors.append(f"{rid}: {url} is not a sourceURL of {corpus}")
            continue
        per_page[(corpus, url)] += 1
        markdown = pages[url]
        if ev not in markdown:
            errors.append(f"{rid}: evidence is not on {url}: {ev!r}")
            continue
        nwords = len(ev.split())
        if not 8 <= nwords <= 40:
            errors.append(f"{rid}: evidence has {nwords} words")
        # the python reference serves one page at every URL: only repeats within it count
        single = corpus.startswith("supabase-python")
        on = 1 if single else sum(ev in m for m in pages.values())
        if on > 1:
            warnings.append(f"{rid}: evidence on {on} pages")
        if markdown.count(ev) > 1:
            warnings.append(f"{rid}: evidence {markdown.count(ev)} times on its page")
        mine = sentence_spans(markdown, ev)
        for tid, ts in tuning_sentences:
            if any(
                s == ts or (len(s) > 25 and s in ts) or (len(ts) > 25 and ts in s) for s in mine
            ):
                errors.append(f"{rid}: evidence shares a sentence with tuning question {tid}")
        if corpus.startswith("supabase-python"):
            section = py_section(markdown, ev)
            infos.append(f"{rid}: section '{section}' for /{url.rsplit('/', 1)[-1]}")
        q = {w for w in words(r["question"]) if w not in STOP}
        e = {w for w in words(ev) if w not in STOP}
        if e and len(q & e) / len(e) > 0.6:
            warnings.append(f"{rid}: question has {len(q & e)}/{len(e)} of the evidence's words")

    for (corpus, url), k in per_page.items():
        if k > 3:
            errors.append(f"{url} ({corpus}): {k} questions, more than 3")
    for crawl_rows in by_crawl.values():
        ranked = sorted(crawl_rows, key=lambda r: hashlib.sha256(r["id"].encode()).hexdigest())
        for i, r in enumerate(ranked):
            want = "tune" if i % 2 == 0 else "held"
            if r["split"] != want:
                errors.append(f"{r['id']}: split {r['split']}, the rule gives {want}")
    for corpus in SHORT:
        if len(by_crawl.get(corpus, [])) < 30:
            errors.append(f"{corpus}: {len(by_crawl.get(corpus, []))} questions, fewer than 30")
    if len(rows) < 200:
        errors.append(f"{len(rows)} questions in all, fewer than 200")

    for info in infos:
        print("info:", info)
    for warning in warnings:
        print("warning:", warning)
    for error in errors:
        print("ERROR:", error)
    print()
    print(f"{len(rows)} questions on {len(per_page)} pages")
    for corpus in SHORT:
        rs = by_crawl.get(corpus, [])
        splits = Counter(r["split"] for r in rs)
        asked_pages = len({r["url"] for r in rs})
        tune, held = splits["tune"], splits["held"]
        print(f"  {corpus}: {len(rs)} ({tune} tune, {held} held), {asked_pages} pages")
    splits = Counter(r["split"] for r in rows)
    print(f"  all: {splits['tune']} tune, {splits['held']} held")
    print("OK" if not errors else f"{len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "questions.jsonl"))
