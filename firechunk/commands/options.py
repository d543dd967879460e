"""Options that more than one sub-command takes, declared once."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from firechunk.validate.set_aside import DEFAULT_MAX_FAILED_PAGES

MaxFailedPages = Annotated[
    float,
    typer.Option(
        "--max-failed-pages",
        min=0.0,
        max=1.0,
        metavar="SHARE",
        help="The largest share of pages that may fail page-level expectations and be "
        "set aside (quarantined, their last good chunks kept) while the run publishes.",
    ),
]

Workers = Annotated[
    int | None,
    typer.Option(
        min=1,
        metavar="N",
        help="Processes that chunk pages in parallel (default: 2, or none for under "
        "2 MB of pages left to chunk: this process is quicker than starting them).",
    ),
]

EmbedderName = Annotated[
    Literal["local", "openai"],
    typer.Option(
        "--embedder",
        help="local: all-MiniLM-L6-v2 (int8 ONNX) on this machine; openai: an "
        "OpenAI-compatible API (key from OPENAI_API_KEY).",
    ),
]
Model = Annotated[
    str | None, typer.Option(metavar="NAME", help="Model name for --embedder openai.")
]
Dimensions = Annotated[
    int | None, typer.Option(min=1, metavar="N", help="Dimensions for --embedder openai.")
]
BaseUrl = Annotated[
    str | None,
    typer.Option(metavar="URL", help="API base URL for --embedder openai (default: OpenAI's)."),
]

__all__ = [
    "DEFAULT_MAX_FAILED_PAGES",
    "BaseUrl",
    "Dimensions",
    "EmbedderName",
    "MaxFailedPages",
    "Model",
    "Workers",
]
