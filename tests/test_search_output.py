"""What `firechunk search` prints, without a database: the snippet of a hit
(`firechunk/db/snippet.py`), the relative cutoff (`firechunk/db/search.py`) and the
hits in rank order (`firechunk/commands/database.py`). The command itself is run against Postgres in
tests/test_database.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from firechunk.db.search import Hit, above
from firechunk.db.snippet import CUT, plain, snippet

PAGE = """\
Webhooks
========

Acme Queue can **push** messages to an [HTTPS endpoint](https://example.com/push "push")
instead of waiting for a worker to *pull* them.
![a diagram](https://example.com/d.png)

Creating an endpoint
--------------------

## Signing secrets [#](https://example.com/#signing)

| Header | Meaning |
| --- | :---: |
| `Acme-Signature` | the <b>HMAC</b> of the body |

- Reject any request whose signature does not match.
- Rotate the secret &amp; keep the old one for a day.

> See [the guide][guide] and <https://example.com/guide>.

[guide]: https://example.com/guide
"""


def test_markdown_is_stripped_to_its_words():
    text = plain(PAGE)
    for markup in ("==", "--", "#", "|", "](", "**", "*", "`", "<", ">", "&amp;", "diagram"):
        assert markup not in text, markup
    assert "Webhooks · Acme Queue can push messages to an HTTPS endpoint instead of" in text
    assert "Acme-Signature · the HMAC of the body" in text
    assert "does not match. Rotate the secret & keep" in text
    assert "See the guide and https://example.com/guide." in text


def test_the_sentence_sharing_most_words_with_the_question_is_shown():
    text = (
        "Queues hold messages. Workers receive them in batches.\n\n"
        "A message that fails eight times moves to the dead-letter queue.\n\n"
        "Messages are kept for 14 days. " + "Other words follow here. " * 20
    )
    shown = snippet(text, "What happens to a message that keeps failing?")
    assert shown.startswith(f"{CUT} A message that fails eight times moves")
    assert snippet(text, "where do workers receive batches").startswith(f"{CUT} Workers receive")
    assert snippet(text, "what is held").startswith("Queues hold messages. Workers")


def test_no_shared_word_shows_the_start_and_headings_are_not_the_snippet():
    text = "# Limits\n\nEvery quota of the API. Another sentence."
    assert snippet(text, "zebra") == "Every quota of the API. Another sentence."
    assert snippet(text, "limits") == "Every quota of the API. Another sentence."


def test_a_snippet_is_cut_at_a_word_with_an_ellipsis():
    text = "Alpha beta gamma. " + " ".join(f"word{n}" for n in range(100))
    shown = snippet(text, "alpha", width=60)
    assert shown.endswith(f" {CUT}") and len(shown) <= 62
    kept = shown.removesuffix(f" {CUT}")
    assert text.startswith(kept) and text[len(kept)] == " "  # a whole word, nothing half


def test_a_best_sentence_near_the_end_brings_the_words_before_it():
    text = " ".join(f"Filler sentence {n}." for n in range(40)) + " Retries stop at eight."
    shown = snippet(text, "when do retries stop", width=80)
    assert shown.startswith(f"{CUT} ") and shown.endswith("Retries stop at eight.")
    assert len(shown) <= 82 and f" {shown.removeprefix(CUT).lstrip()}" in text  # whole words


def test_a_chunk_of_only_code_shows_its_lines():
    text = "```python\nimport hmac\n\n\ndef check(secret, body):\n    return hmac.new(secret)\n```"
    assert snippet(text, "nothing in common") == (
        "import hmac · def check(secret, body): return hmac.new(secret)"
    )
    long = text.replace("import hmac", "import hmac\n" + "x = 1\n" * 50)
    shown = snippet(long, "check the body", width=60)
    assert shown.startswith(f"{CUT} ") and shown.endswith(
        "· def check(secret, body): return hmac.new(secret)"
    )


def test_code_keeps_its_underscores_and_stars():
    text = "Set `max_attempts` and `__init__` as **you** like.\n\n```sql\nselect * from a_b;\n```"
    assert plain(text) == "Set max_attempts and __init__ as you like. select * from a_b;"


def hit(rank: int, score: float, url: str) -> Hit:
    return Hit(rank, score, f"id{rank}", url, "Title", ("Page", str(rank)), "text", 1, 1)


HITS = [hit(1, 0.04, "a"), hit(2, 0.03, "b"), hit(3, 0.03, "a"), hit(4, 0.01, "c")]


@pytest.mark.parametrize(
    ("fraction", "ranks"), [(0, [1, 2, 3, 4]), (0.5, [1, 2, 3]), (0.75, [1, 2, 3]), (1, [1])]
)
def test_the_cutoff_is_relative_to_the_best_hit(fraction, ranks):
    assert [h.rank for h in above(HITS, fraction)] == ranks
    assert above([], fraction) == []


def test_hits_are_listed_in_rank_order_with_a_share_of_the_best_and_plain_snippets():
    from firechunk.commands.database import hit_lines

    escaped = replace(hit(1, 0.04, "a"), text=r"Set max\_attempts and a \*literal\* star.")
    said = hit_lines([escaped, *HITS[1:]], "max attempts")
    ranks = [line.split(".", 1)[0] for line in said.splitlines() if line[:1].isdigit()]
    assert ranks == ["1", "2", "3", "4"]
    assert said.splitlines()[0] == "1. 100%  Page › 1"
    assert "2. 75%  Page › 2" in said and "4. 25%  Page › 4" in said
    assert "max_attempts and a *literal* star." in said and "\\" not in said
