"""Citations: a page served at many URLs cites, per chunk, the URL that names its section."""

from __future__ import annotations

from firechunk.run.citations import cite
from tests.chunk_helpers import page, run_pages, sentences

BASE = "https://docs.example.com/reference/js"


def reference_page() -> str:
    """A single-page-app reference of our own: every function a section with its example."""
    functions = [
        ("Fetch rows", "client.from('t').select('*')"),
        ("Insert rows", "client.from('t').select('*').insert({a: 1})"),
        ("Update rows", "client.from('t').select('*').update({a: 2}).eq('id', 1)"),
        ("Column equals a value", "client.from('t').select('*').eq('id', 1)"),
        ("Update a user", "client.auth.update_user({email: 'x'})"),
    ]
    return "# JS Reference\n\n" + "\n\n".join(
        f"## {title}\n\n{sentences(700, n, f'f{n}')}\n\n```js\n{code}\n```"
        for n, (title, code) in enumerate(functions, start=1)
    )


def test_each_chunk_of_a_page_served_at_many_urls_cites_the_url_of_its_section():
    markdown = reference_page()
    slugs = ["auth-api", "select", "insert", "update", "eq", "auth-updateuser"]
    run = run_pages(*(page(markdown, url=f"{BASE}/{slug}") for slug in slugs))
    cited = {c.metadata.sections[0][-1]: c.metadata.source_url for c in run.chunks}
    assert cited == {
        "Fetch rows": f"{BASE}/select",  # the only call every other section outdoes
        "Insert rows": f"{BASE}/insert",
        "Update rows": f"{BASE}/update",  # the title word, and the code calls update(
        "Column equals a value": f"{BASE}/eq",
        "Update a user": f"{BASE}/auth-updateuser",  # not /update: its code never calls it
    }
    for chunk in run.chunks:  # the page's other URLs stay in aliases; the id is the page's
        assert sorted([chunk.metadata.source_url, *chunk.metadata.aliases]) == sorted(
            f"{BASE}/{slug}" for slug in slugs
        )


def test_a_page_with_one_url_cites_it():
    assert (
        cite("https://a.example/x", [], [[["T"]], [["T", "B"]]], ["t", "b"])
        == ["https://a.example/x"] * 2
    )


def test_a_chunk_in_no_matched_section_cites_the_page_s_own_url():
    own, other = "https://a.example/ref/intro", "https://a.example/ref/upsert"
    sections = [[["Ref"]], [["Ref", "Upsert data"]]]
    assert cite(own, [other], sections, ["# Ref\n\nHello.", "## Upsert data\n\nx"]) == [
        own,
        other,
    ]
