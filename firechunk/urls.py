"""Canonical URLs: one spelling per page, so ids are stable and aliases are found.

w3lib does the RFC work (case, percent-encoding, query order, fragments); we add the two
rules a docs site needs: tracking parameters go, and a trailing slash is not a new page.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from w3lib.url import canonicalize_url, url_query_cleaner

TRACKING_PARAMETERS = (
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "utm_id",
    "gclid",
    "fbclid",
    "msclkid",
    "mc_cid",
    "mc_eid",
    "_ga",
    "ref",
    "ref_src",
)


def canonical_url(url: str) -> str:
    if not url:
        return ""
    cleaned = url_query_cleaner(url.strip(), TRACKING_PARAMETERS, remove=True)
    canonical = canonicalize_url(cleaned, keep_fragments=False)
    parts = urlsplit(canonical)
    path = parts.path.rstrip("/") or "/"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
