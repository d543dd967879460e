"""firechunk as a LlamaIndex node parser (extra `llamaindex`).

`FirechunkNodeParser().get_nodes_from_documents(docs)` chunks each document as one page
with `firechunk.chunk_markdown`, its URL and title from its metadata: the same chunks, ids
and overlaps as `firechunk chunk`. With `whole_crawl=True` the documents are one crawl
(`firechunk.chunk_crawl`), as `FirechunkSplitter`'s.

A node's id is its chunk id (stable from run to run). Its `start_char_idx` and
`end_char_idx` are where the chunk is in its document's text (`firechunk.adapters.positions`).
Its metadata has `url`, `title`, `breadcrumb`, `header_path` (as `MarkdownNodeParser` gives
it), `chunk_id` and `overlap_text`, after the document's own. What is embedded is what
`firechunk load` embeds, the breadcrumb and the text; the model also reads the title and
URL. The document's metadata (a crawl's `statusCode`, `language`, `sourceURL`, ...) stays
on the node, out of both. The overlap link is the node's `PREVIOUS` relationship to the
chunk before it on its page (and that one's `NEXT`), as `prev_chunk_id` names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeRelationship, TextNode
from llama_index.core.utils import get_tqdm_iterable

from firechunk.adapters import Cut, breadcrumb_text, config_for, cut_documents, header_path

# The node's own keys that the embedding and the model read; every other key is kept on the
# node for a caller only.
EMBEDDED = frozenset({"breadcrumb"})
SHOWN = frozenset({"title", "url", "breadcrumb"})


class FirechunkNodeParser(NodeParser):
    """Nodes that are firechunk's chunks, sized by `config` (a `firechunk.ChunkConfig`) or,
    as LlamaIndex's splitters take it, by `chunk_size`: firechunk's hard limit in tokens
    (soft and minimum follow it down). `chunk_overlap` is accepted; firechunk's overlap is
    its own (the previous chunk's last heading and sentence, in `overlap_text`)."""

    # An argument it does not take (a typo, another parser's) is an error, not ignored.
    model_config = ConfigDict(extra="forbid")

    config: Any = Field(default=None, exclude=True)
    chunk_size: int | None = Field(default=None, description="firechunk's hard limit, tokens.")
    chunk_overlap: int = Field(default=0, description="Accepted; see overlap_text.")
    whole_crawl: bool = Field(default=False, description="The documents are one crawl.")
    # The links are the chunks' own (a repeat dropped from a page is no node to link).
    include_prev_next_rel: bool = False

    def model_post_init(self, context: Any, /) -> None:
        self.config = config_for(self.config, self.chunk_size)

    @classmethod
    def class_name(cls) -> str:
        return "FirechunkNodeParser"

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        nodes = list(get_tqdm_iterable(nodes, show_progress, "Chunking pages"))
        given = [(node.get_content(MetadataMode.NONE), node.metadata) for node in nodes]
        return list(chunk_nodes(cut_documents(given, self.config, self.whole_crawl), nodes))

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]
    ) -> list[BaseNode]:
        """LlamaIndex's own step, which adds the document's metadata and sets offsets where
        it finds the node's text verbatim; the offsets stay the chunks' own."""
        spans = [
            (node.start_char_idx, node.end_char_idx) if isinstance(node, TextNode) else None
            for node in nodes
        ]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, span in zip(nodes, spans, strict=True):
            if isinstance(node, TextNode) and span is not None:
                node.start_char_idx, node.end_char_idx = span
        return nodes


def chunk_nodes(cuts: list[Cut], sources: Sequence[BaseNode]) -> list[TextNode]:
    """The chunks as nodes of the documents they were cut from, each linked to the chunk
    before and after it on its page."""
    nodes = [_node(cut, sources[cut.document]) for cut in cuts]
    for cut, node in zip(cuts, nodes, strict=True):
        previous = _previous(cut, cuts, nodes)
        if previous is not None:
            node.relationships[NodeRelationship.PREVIOUS] = previous.as_related_node_info()
            previous.relationships[NodeRelationship.NEXT] = node.as_related_node_info()
    return nodes


def _previous(cut: Cut, cuts: list[Cut], nodes: list[TextNode]) -> TextNode | None:
    """The node of the chunk before `cut`'s on its page (the same document), if any."""
    wanted = cut.chunk.data.overlap_text.prev_chunk_id
    return next(
        (
            node
            for other, node in zip(cuts, nodes, strict=True)
            if other.document == cut.document and other.chunk.chunk_id == wanted
        ),
        None,
    )


def _node(cut: Cut, source: BaseNode) -> TextNode:
    chunk = cut.chunk
    meta = chunk.metadata
    metadata = {
        "url": meta.source_url,
        "title": meta.page_title,
        "breadcrumb": breadcrumb_text(meta.breadcrumb),
        "header_path": header_path(meta.breadcrumb),
        "chunk_id": chunk.chunk_id,
        "overlap_text": chunk.data.overlap_text.text,
    }
    keys = set(metadata) | set(source.metadata)
    return TextNode(
        id_=chunk.chunk_id,
        text=chunk.data.text,
        metadata=metadata,
        start_char_idx=cut.span.start,
        end_char_idx=cut.span.end,
        excluded_embed_metadata_keys=sorted(keys - EMBEDDED),
        excluded_llm_metadata_keys=sorted(keys - SHOWN),
        relationships={NodeRelationship.SOURCE: source.as_related_node_info()},
    )
