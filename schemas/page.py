"""Pages as Firecrawl returns them, and the crawl result file that holds them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PageMetadata(BaseModel):
    """The part of Firecrawl's page metadata firechunk relies on; other keys are kept as-is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    title: str | None = None
    source_url: str | None = Field(default=None, alias="sourceURL")
    url: str | None = None
    status_code: int | None = Field(default=None, alias="statusCode")


class CrawledPage(BaseModel):
    """One page of a Firecrawl crawl result (`data[i]`)."""

    model_config = ConfigDict(extra="allow")

    markdown: str | None = None
    metadata: PageMetadata = Field(default_factory=PageMetadata)

    @property
    def url(self) -> str:
        """The URL that was asked for (sourceURL), else the final URL."""
        return self.metadata.source_url or self.metadata.url or ""


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
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
