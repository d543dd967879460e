"""The LangChain and LlamaIndex adapters (`firechunk/adapters/`), against the real libraries
(extras `langchain` and `llamaindex`, in `dev`): the chunks are chunk_markdown's, page by
page, with URL, title, breadcrumb and id as metadata, and a LlamaIndex node links to the
chunk before and after it on its page. On the sample crawl, and on one shared crawl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firechunk import PageRejected, chunk_crawl, chunk_markdown
from firechunk.adapters import breadcrumb_text
from tests.corpus import CORPUS_DIR

pytest.importorskip("langchain_text_splitters", reason="extra `langchain` not installed")
pytest.importorskip("llama_index.core", reason="extra `llamaindex` not installed")

from langchain_core.documents import Document  # noqa: E402
from llama_index.core import Document as LlamaDocument  # noqa: E402
from llama_index.core.schema import NodeRelationship  # noqa: E402

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
