"""firechunk as a LlamaIndex node parser (extra `llamaindex`).

`FirechunkNodeParser().get_nodes_from_documents(docs)` chunks each document as one page
with `firechunk.chunk_markdown`, its URL and title from its metadata: the same chunks, ids
and overlaps as `firechunk chunk`. A node's id is its chunk id (stable from run to run);
its metadata has `url`, `title`, `breadcrumb` (what the embedding and the prompt see of
it), `chunk_id` and `overlap_text`. The overlap link is the node's `PREVIOUS` relationship
to the chunk before it on its page (and that one's `NEXT`), as `prev_chunk_id` names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, TextNode
from llama_index.core.utils import get_tqdm_iterable

from firechunk import Chunk, ChunkConfig
from firechunk.adapters import breadcrumb_text, page_chunks

# Kept on the node for a caller, left out of what is embedded and shown to the model.
UNSEEN = ["chunk_id", "overlap_text"]


class FirechunkNodeParser(NodeParser):
    """Nodes that are firechunk's chunks, sized by `config` (a `firechunk.ChunkConfig`)."""

    config: Any = Field(default_factory=ChunkConfig, exclude=True)
    # The links are the chunks' own (a repeat dropped from a page is no node to link).
    include_prev_next_rel: bool = False

    @classmethod
    def class_name(cls) -> str:
        return "FirechunkNodeParser"

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        return [
            chunk_node
            for node in get_tqdm_iterable(nodes, show_progress, "Chunking pages")
            for chunk_node in page_nodes(
                page_chunks(node.get_content(MetadataMode.NONE), node.metadata, self.config), node
            )
        ]


def page_nodes(chunks: list[Chunk], source: BaseNode) -> list[TextNode]:
    """One page's chunks as nodes of `source`, each linked to the one before and after."""
    nodes = {chunk.chunk_id: _node(chunk, source) for chunk in chunks}
    for chunk in chunks:
        previous = nodes.get(chunk.data.overlap_text.prev_chunk_id or "")
        if previous is not None:
            node = nodes[chunk.chunk_id]
            node.relationships[NodeRelationship.PREVIOUS] = previous.as_related_node_info()
            previous.relationships[NodeRelationship.NEXT] = node.as_related_node_info()
    return list(nodes.values())


def _node(chunk: Chunk, source: BaseNode) -> TextNode:
    meta = chunk.metadata
    return TextNode(
        id_=chunk.chunk_id,
        text=chunk.data.text,
        metadata={
            "url": meta.source_url,
            "title": meta.page_title,
            "breadcrumb": breadcrumb_text(meta.breadcrumb),
            "chunk_id": chunk.chunk_id,
            "overlap_text": chunk.data.overlap_text.text,
        },
        excluded_embed_metadata_keys=list(UNSEEN),
        excluded_llm_metadata_keys=list(UNSEEN),
        relationships={NodeRelationship.SOURCE: source.as_related_node_info()},
    )
