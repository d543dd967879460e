"""The Firecrawl API versions a crawl can speak, apart from the pydantic models of
`schemas.job`, so the command line can offer them without importing pydantic."""

from __future__ import annotations

from typing import Literal

ApiVersion = Literal["v1", "v2"]
