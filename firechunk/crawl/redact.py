"""Redacting what a server or the HTTP client says, before firechunk keeps, logs or raises it.

The text of a failed call ends up in the job state file, on stderr, in logs and, through
Prefect, in its database and pickled results. A server or proxy that echoes the request's
`Authorization` header would put the API key in all of them, so every such text passes
through `redact` first (see `firechunk.crawl.retry.describe`).
"""

from __future__ import annotations

import re
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"

# A header value, or a token, ends at whitespace or at what closes it in JSON or a repr. A
# value already redacted is matched whole, so it is not redacted a second time in part.
_VALUE = r"""(?:\[redacted\]|[^\s"',;}\]]+)"""
_AUTHORIZATION = re.compile(
    rf"""(authorization["']?\s*[:=]\s*["']?)(?:[A-Za-z]+\s+)?{_VALUE}""", re.I
)
_BEARER = re.compile(rf"\b(bearer\s+){_VALUE}", re.I)
_FIRECRAWL_KEY = re.compile(r"\bfc-[A-Za-z0-9][A-Za-z0-9_-]{7,}")


def redact(text: str, secret: str | None) -> str:
    """`text` without `secret` (as it is or URL-encoded), `Authorization:` values, `Bearer`
    tokens and Firecrawl-shaped keys (`fc-...`), each replaced by "[redacted]".

    The secret goes first, so that a key with characters a pattern stops at is removed
    whole, not cut in two with its tail left behind.
    """
    if secret:
        forms = sorted({secret, quote(secret), quote(secret, safe=""), quote_plus(secret)}, key=len)
        pattern = "|".join(re.escape(form) for form in reversed(forms))
        text = re.sub(pattern, REDACTED, text, flags=re.I)  # %2f and %2F alike
    text = _AUTHORIZATION.sub(rf"\g<1>{REDACTED}", text)
    text = _BEARER.sub(rf"\g<1>{REDACTED}", text)
    return _FIRECRAWL_KEY.sub(REDACTED, text)
