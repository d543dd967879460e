"""Pages as Firecrawl returns them, and the crawl result file that holds them."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode_only(value: Any) -> Any:
    """A lone surrogate (JSON can escape one: "\\ud800") becomes U+FFFD, as undecodable
    bytes do when a crawl file is read. Left in, it would make every later step that
    encodes the text as UTF-8 (ids, hashes, Parquet, JSON) fail for the whole run."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return _LONE_SURROGATE.sub("\ufffd", value)
    return value


def _title_text(value: Any) -> Any:
    """Firecrawl sends a list when a page has the same meta tag twice (firecrawl#1071):
    joined as firecrawl-py joins it, so a replay and a live crawl agree."""
    if isinstance(value, list):
        return str(value[0]) if len(value) == 1 else ", ".join(str(item) for item in value)
    return str(value) if isinstance(value, int | float) else value


def _first(value: Any) -> Any:
    """A single-valued field sent as a list (see `_title_text`): its first value."""
    return (value[0] if value else None) if isinstance(value, list) else value


# Text from a crawl: a string that is valid Unicode.
CrawlText = Annotated[str, BeforeValidator(_unicode_only)]


# How a crawl is dumped as Firecrawl gives it: its field names, no nulls it did not send.
FIRECRAWL_JSON: dict[str, Any] = {"by_alias": True, "exclude_none": True, "mode": "json"}


class PageMetadata(BaseModel):
    """The part of Firecrawl's page metadata firechunk relies on; other keys are kept as-is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    title: Annotated[CrawlText | None, BeforeValidator(_title_text)] = None
    source_url: Annotated[CrawlText | None, BeforeValidator(_first)] = Field(
        default=None, alias="sourceURL"
    )
    url: Annotated[CrawlText | None, BeforeValidator(_first)] = None
    status_code: Annotated[int | None, BeforeValidator(_first)] = Field(
        default=None, alias="statusCode"
    )


class CrawledPage(BaseModel):
    """One page of a Firecrawl crawl result (`data[i]`)."""

    model_config = ConfigDict(extra="allow")

    # Usually text. Anything else is the chunker's to quarantine ("not-text"), page by
    # page, rather than a reason to reject the whole crawl.
    markdown: Annotated[object, BeforeValidator(_unicode_only)] = None
    metadata: Annotated[PageMetadata, BeforeValidator(lambda value: value or {})] = Field(
        default_factory=PageMetadata
    )

    @property
    def url(self) -> str:
        """The URL that was asked for (sourceURL), else the final URL."""
        return self.metadata.source_url or self.metadata.url or ""

    def to_firecrawl_json(self) -> dict[str, Any]:
        return self.model_dump(**FIRECRAWL_JSON)


class CrawlResult(BaseModel):
    """A whole crawl in the shape of Firecrawl's crawl status response with all pages."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    success: bool = True
    status: str = "completed"
    completed: int = 0
    total: int = 0
    credits_used: int | None = Field(default=None, alias="creditsUsed")
    data: list[CrawledPage] = Field(default_factory=list)

    def to_firecrawl_json(self) -> dict[str, Any]:
        return self.model_dump(**FIRECRAWL_JSON)
