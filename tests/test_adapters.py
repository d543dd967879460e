"""The LangChain and LlamaIndex adapters (`firechunk/adapters/`), against the real libraries
(extras `langchain` and `llamaindex`, in `dev`): the chunks are chunk_markdown's, page by
page, with URL, title, breadcrumb and id as metadata, and a LlamaIndex node links to the
chunk before and after it on its page. On the sample crawl, and on one shared crawl."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from firechunk import ChunkConfig, PageRejected, chunk_crawl, chunk_markdown
from firechunk.adapters import DocumentNotChunked, breadcrumb_text
from firechunk.chunker.headings import heading_text
from tests.corpus import CORPUS_DIR

pytest.importorskip("langchain_text_splitters", reason="extra `langchain` not installed")
pytest.importorskip("llama_index.core", reason="extra `llamaindex` not installed")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.indexing import InMemoryRecordManager, index  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from langchain_text_splitters import MarkdownHeaderTextSplitter  # noqa: E402
from llama_index.core import Document as LlamaDocument  # noqa: E402
from llama_index.core.node_parser import MarkdownNodeParser  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeRelationship  # noqa: E402

from firechunk.adapters.langchain import FirechunkSplitter  # noqa: E402
from firechunk.adapters.llamaindex import FirechunkNodeParser  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "crawl.json"
# Ten pages of a Mintlify site: anchors in headings, page chrome, cards (corpus README).
SHARED = CORPUS_DIR / "crewai-docs-mintlify-2025.json"


def sample_pages() -> list[dict]:
    return json.loads(SAMPLE.read_text())["data"]


def shared_pages() -> list[dict]:
    if not SHARED.is_file():
        pytest.skip(f"shared crawl {SHARED.name} not found in {CORPUS_DIR} (absent outside CI)")
    return json.loads(SHARED.read_text())["data"]


def expected(pages: list[dict]) -> list[list]:
    """chunk_markdown's chunks of each page (none for a page it rejects)."""
    chunks = []
    for page in pages:
        url, title = page["metadata"]["sourceURL"], page["metadata"].get("title")
        try:
            chunks.append(chunk_markdown(page["markdown"] or "", url=url, title=title))
        except PageRejected:
            chunks.append([])
    return chunks


PAGE_SETS = [pytest.param(sample_pages, id="sample"), pytest.param(shared_pages, id="shared")]


@pytest.mark.parametrize("pages_of", PAGE_SETS)
def test_langchain_splitter_gives_chunk_markdowns_chunks_with_their_metadata(pages_of):
    pages = pages_of()
    docs = [Document(page["markdown"] or "", metadata=page["metadata"]) for page in pages]
    splitter = FirechunkSplitter()
    split = splitter.split_documents(docs)
    chunks = [chunk for page_chunks in expected(pages) for chunk in page_chunks]
    assert [doc.page_content for doc in split] == [chunk.data.text for chunk in chunks]
    for doc, chunk in zip(split, chunks, strict=True):
        meta = doc.metadata
        assert doc.id == meta["chunk_id"] == chunk.chunk_id
        assert meta["url"] == chunk.metadata.source_url and meta["title"]
        assert meta["breadcrumb"] == breadcrumb_text(chunk.metadata.breadcrumb)
        assert meta["prev_chunk_id"] == chunk.data.overlap_text.prev_chunk_id
        assert meta["sourceURL"]  # the document's own metadata is kept
    assert splitter.transform_documents(docs) == split
    page = next(page for page, chunks in zip(pages, expected(pages), strict=True) if chunks)
    texts = [c.data.text for c in chunk_markdown(page["markdown"])]
    assert splitter.split_text(page["markdown"]) == texts


def test_langchain_splitter_takes_the_documents_as_one_crawl():
    pages = sample_pages()
    docs = [Document(page["markdown"] or "", metadata=page["metadata"]) for page in pages]
    split = FirechunkSplitter(whole_crawl=True).split_documents(docs)
    run = chunk_crawl(SAMPLE)
    assert [(d.id, d.page_content) for d in split] == [
        (c.chunk_id, c.data.text) for c in run.chunks
    ]


@pytest.mark.parametrize("pages_of", PAGE_SETS)
def test_llamaindex_nodes_are_the_chunks_linked_to_their_neighbours_on_the_page(pages_of):
    pages = pages_of()
    docs = [LlamaDocument(text=page["markdown"] or "", metadata=page["metadata"]) for page in pages]
    nodes = FirechunkNodeParser().get_nodes_from_documents(docs)
    by_page = expected(pages)
    chunks = [chunk for page_chunks in by_page for chunk in page_chunks]
    assert [node.get_content() for node in nodes] == [chunk.data.text for chunk in chunks]
    assert [node.node_id for node in nodes] == [chunk.chunk_id for chunk in chunks]
    position = 0
    for doc, page_chunks in zip(docs, by_page, strict=True):
        page_nodes = nodes[position : position + len(page_chunks)]
        position += len(page_chunks)
        for n, (node, chunk) in enumerate(zip(page_nodes, page_chunks, strict=True)):
            assert node.metadata["url"] == chunk.metadata.source_url
            assert node.metadata["breadcrumb"] == breadcrumb_text(chunk.metadata.breadcrumb)
            assert node.ref_doc_id == doc.doc_id
            previous = node.relationships.get(NodeRelationship.PREVIOUS)
            following = node.relationships.get(NodeRelationship.NEXT)
            assert (previous.node_id if previous else None) == (
                chunk.data.overlap_text.prev_chunk_id
            )
            assert (previous.node_id if previous else None) == (
                page_nodes[n - 1].node_id if n else None
            )
            after = page_nodes[n + 1].node_id if n + 1 < len(page_nodes) else None
            assert (following.node_id if following else None) == after
    node = next(node for node in nodes if node.metadata["breadcrumb"])
    embedded = node.get_content(metadata_mode="embed")  # what the embedding model reads
    assert f"breadcrumb: {node.metadata['breadcrumb']}" in embedded
    assert node.metadata["chunk_id"] not in embedded


def test_langchain_splitter_takes_the_usual_arguments_and_a_file_path_source():
    """What a LangChain user writes: `chunk_size` is the hard limit (the others follow),
    `chunk_overlap` is accepted, and a document loaded from a file (`source` a path, as
    TextLoader gives it) is chunked, not dropped for want of a URL."""
    page = max(sample_pages(), key=lambda page: len(page["markdown"] or ""))
    splitter = FirechunkSplitter(chunk_size=300, chunk_overlap=30)
    doc = Document(page["markdown"], metadata={"source": "docs/guide.md"})
    split = splitter.split_documents([doc])
    unsized = FirechunkSplitter().split_documents([doc])
    assert len(split) > len(unsized)  # smaller chunks, so more of them
    assert all(d.metadata["token_count"] <= 300 for d in split)
    assert all(d.metadata["source"] == "docs/guide.md" and d.metadata["url"] == "" for d in split)
    assert [d.id for d in split] == [
        c.chunk_id for c in chunk_markdown(page["markdown"], config=splitter.config)
    ]
    created = splitter.create_documents([page["markdown"]], [{"source": "docs/guide.md"}])
    assert [(d.id, d.metadata["breadcrumb"]) for d in created] == [
        (d.metadata["chunk_id"], d.metadata["breadcrumb"]) for d in split
    ]
    with pytest.raises(ValueError, match="chunk_size or config"):
        FirechunkSplitter(splitter.config, chunk_size=300)


# A guide written for these tests: headings of three levels (one level skipped), a section
# long enough to be cut at 300 tokens, a list and code; clean markdown, so that every chunk
# is a verbatim slice of it and its offsets can be checked with `str.find`.
GUIDE = "\n\n".join(
    [
        "# Orders service",
        "The orders service takes orders from the shop and hands them to the warehouse.",
        "## Placing an order",
        "An order holds a customer, a list of lines and a delivery address.",
        *(
            f"Step {n}: the service checks line {n} of the order against the stock table, "
            f"reserves {n} units in warehouse {n % 3} and records the reservation so that a "
            f"retry of step {n} never reserves the same units twice."
            for n in range(1, 41)
        ),
        "#### Paying for it",
        "Payment is taken when the warehouse confirms every line.",
        *(
            f"A payment attempt {n} that the bank declines is tried again after {n} hours, "
            f"with the same idempotency key, and the customer gets mail number {n}."
            for n in range(1, 16)
        ),
        "```python\nfrom orders import Client\n\nClient().pay(order_id)\n```",
        "## Cancelling an order",
        "- An order that has not shipped can be cancelled.\n- A shipped order is returned.",
        "### Refunds",
        "A refund goes back to the card that paid, within five days.",
    ]
)


def test_langchain_chunk_size_start_index_and_a_file_source():
    """The issue's call: chunks of at most 300 tokens, each with its file `source` and an
    integer `start_index` where its text starts in the document."""
    splitter = FirechunkSplitter(chunk_size=300, chunk_overlap=30, add_start_index=True)
    split = splitter.split_documents([Document(GUIDE, metadata={"source": "docs/guide.md"})])
    assert len(split) > 3
    starts = [doc.metadata["start_index"] for doc in split]
    for doc, start in zip(split, starts, strict=True):
        assert doc.metadata["token_count"] <= 300 and doc.metadata["source"] == "docs/guide.md"
        assert isinstance(start, int)
        assert GUIDE[start : start + len(doc.page_content)] == doc.page_content
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    # LangChain's own way of placing a chunk, where the text is a verbatim slice
    assert starts == [GUIDE.find(doc.page_content) for doc in split]
    assert "start_index" not in FirechunkSplitter().split_documents([Document(GUIDE)])[0].metadata


@pytest.mark.parametrize("pages_of", PAGE_SETS)
def test_start_index_points_at_the_first_words_of_cleaned_chunks(pages_of):
    """On crawled pages the chunk is cleaned (anchors, escapes gone): its start is where
    its first words are in the page, after where the chunk before it starts."""
    pages = [page for page in pages_of() if page["markdown"]]
    docs = [Document(page["markdown"], metadata=page["metadata"]) for page in pages]
    split = FirechunkSplitter(add_start_index=True).split_documents(docs)
    by_url = {page["metadata"]["sourceURL"]: page["markdown"] for page in pages}
    checked = 0
    previous: dict[str, int] = {}
    for doc in split:
        source = by_url[doc.metadata["sourceURL"]]
        start = doc.metadata["start_index"]
        assert start > previous.get(doc.metadata["sourceURL"], -1)
        previous[doc.metadata["sourceURL"]] = start
        # A chunk cut inside code or a table repeats its fence or header row first.
        firsts = [re.search(r"\w+", line) for line in doc.page_content.split("\n")[:3]]
        window = source[start : start + 300]
        assert any(word and word.group() in window for word in firsts), doc.page_content
        checked += 1
    assert checked == len(split) > 10


def test_header_keys_are_the_levels_markdown_header_text_splitter_gives():
    """Each chunk's "Header N" keys are those LangChain's MarkdownHeaderTextSplitter gives
    the text at the chunk's start (its headings' words, without anchor markup), on the
    test guide (a level skipped) and on the sample crawl's pages whose headings LangChain
    reads (it reads no setext heading, a title underlined with `===`)."""
    theirs = MarkdownHeaderTextSplitter([("#" * n, f"Header {n}") for n in range(1, 7)])
    crawled = [page["markdown"] or "" for page in sample_pages()]
    pages = [GUIDE] + [page for page in crawled if page and not re.search(r"^=+$", page, re.M)]
    compared = 0
    for page in pages:
        sections = theirs.split_text(page)
        for doc in FirechunkSplitter().split_documents([Document(page)]):
            ours = {key: value for key, value in doc.metadata.items() if key.startswith("Header")}
            first_line = next(line for line in doc.page_content.split("\n") if line.strip())
            if first_line.startswith("#"):
                continue  # a chunk that opens a section: LangChain keeps the heading apart
            section = next((s for s in sections if first_line in s.page_content), None)
            if section is None:
                continue  # the chunk's first line was cleaned (an escape, an anchor)
            expected_keys = {key: heading_text(value) for key, value in section.metadata.items()}
            assert ours == expected_keys, (first_line, ours, expected_keys)
            compared += 1
    assert compared > 10
    guide = FirechunkSplitter(chunk_size=300).split_documents([Document(GUIDE)])
    paying = next(doc for doc in guide if doc.page_content.startswith("#### Paying"))
    assert {k: v for k, v in paying.metadata.items() if k.startswith("Header")} == {
        "Header 1": "Orders service",
        "Header 2": "Placing an order",
        "Header 4": "Paying for it",
    }


def test_llamaindex_offsets_header_path_and_arguments():
    """A file-path document gives nodes with char offsets (where the text is); header_path
    is MarkdownNodeParser's for the same text; chunk_size and whole_crawl are used."""
    nodes = FirechunkNodeParser(chunk_size=300, chunk_overlap=30).get_nodes_from_documents(
        [LlamaDocument(text=GUIDE, metadata={"file_path": "docs/guide.md"})]
    )
    assert len(nodes) > 3
    for node in nodes:
        start, end = node.start_char_idx, node.end_char_idx
        assert isinstance(start, int) and isinstance(end, int)
        assert GUIDE[start:end] == node.get_content()
        assert node.metadata["file_path"] == "docs/guide.md"
    theirs = MarkdownNodeParser().get_nodes_from_documents([LlamaDocument(text=GUIDE)])
    opening = [node for node in nodes if node.get_content().startswith("#")]
    assert len(opening) >= 2
    for node in opening:
        first_line = node.get_content().split("\n")[0]
        section = next(s for s in theirs if s.get_content().startswith(first_line))
        assert node.metadata["header_path"] == section.metadata["header_path"]
    default = FirechunkNodeParser().get_nodes_from_documents([LlamaDocument(text=GUIDE)])
    assert len(nodes) > len(default)
    with pytest.raises(ValueError, match="chunk_size or config"):
        FirechunkNodeParser(chunk_size=300, config=ChunkConfig())
    with pytest.raises(ValueError, match="chunk_sise"):  # a typo is not ignored
        FirechunkNodeParser(chunk_sise=300)
    pages = sample_pages()
    docs = [LlamaDocument(text=page["markdown"] or "", metadata=page["metadata"]) for page in pages]
    crawl = FirechunkNodeParser(whole_crawl=True).get_nodes_from_documents(docs)
    assert [node.node_id for node in crawl] == [
        chunk.chunk_id for chunk in chunk_crawl(SAMPLE).chunks
    ]


def test_llamaindex_embeds_breadcrumb_and_text_not_the_crawls_metadata():
    """Firecrawl's page metadata stays on the node, out of the embedded and the shown text."""
    page = next(page for page in sample_pages() if "retries" in page["metadata"]["sourceURL"])
    metadata = {**page["metadata"], "statusCode": 200, "language": "en", "url": "https://x.io"}
    node = next(
        node
        for node in FirechunkNodeParser().get_nodes_from_documents(
            [LlamaDocument(text=page["markdown"], metadata=metadata)]
        )
        if node.metadata["breadcrumb"]
    )
    embedded = node.get_content(metadata_mode=MetadataMode.EMBED)
    shown = node.get_content(metadata_mode=MetadataMode.LLM)
    assert embedded.startswith(f"breadcrumb: {node.metadata['breadcrumb']}")
    assert node.metadata["statusCode"] == 200  # kept on the node
    for key in ("statusCode", "language", "sourceURL", "url", "chunk_id", "header_path"):
        assert f"{key}:" not in embedded
    assert f"url: {node.metadata['url']}" in shown and "statusCode" not in shown


def test_a_document_that_is_not_chunked_is_a_warning_not_a_silent_loss():
    headings_only = "# Integrations\n\n## Slack\n\n## PagerDuty\n"
    docs = [Document(headings_only, metadata={"source": "docs/integrations.md"}), Document("")]
    with pytest.warns(DocumentNotChunked, match="docs/integrations.md: not chunked: header-only"):
        assert FirechunkSplitter().split_documents(docs) == []
    with pytest.warns(DocumentNotChunked, match="header-only"):
        FirechunkNodeParser().get_nodes_from_documents([LlamaDocument(text=headings_only)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty document gives no chunks and no warning
        assert FirechunkSplitter().split_documents([Document("")]) == []


def test_langchain_index_with_a_record_manager_skips_every_unchanged_chunk():
    """LangChain's `index()`: a second pass over the same pages adds nothing and skips every
    chunk (the metadata is stable from run to run); an edited page re-adds its own chunks."""
    pages = [page for page in sample_pages() if page["markdown"]]
    docs = [
        Document(page["markdown"], metadata={"source": page["metadata"]["sourceURL"]})
        for page in pages
    ]
    splitter = FirechunkSplitter(add_start_index=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DocumentNotChunked)
        chunks = splitter.split_documents(docs)
        records = InMemoryRecordManager(namespace="firechunk-test")
        records.create_schema()
        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=8))

        def run(documents: list[Document]) -> dict:
            return dict(
                index(documents, records, store, cleanup="incremental", source_id_key="source")
            )

        first = run(chunks)
        again = run(splitter.split_documents(docs))
        edited_docs = [
            Document(doc.page_content + "\n\nOne more line, added tonight.", metadata=doc.metadata)
            if n == 1
            else doc
            for n, doc in enumerate(docs)
        ]
        edited_chunks = splitter.split_documents(edited_docs)
        edited = run(edited_chunks)
    assert first["num_added"] == len(chunks) and first["num_skipped"] == 0
    assert again == {"num_added": 0, "num_updated": 0, "num_skipped": len(chunks), "num_deleted": 0}
    changed = [doc for doc in edited_chunks if doc.metadata["source"] == docs[1].metadata["source"]]
    assert 1 <= edited["num_added"] <= len(changed)
    assert edited["num_skipped"] == len(edited_chunks) - edited["num_added"]
