"""The rebuild's `load` stage: the published run into Postgres + pgvector.

The database URL comes from a Prefect Secret block (default `firechunk-db-url`), else
FIRECHUNK_DB_URL, else the embedded Postgres under the data directory; an `openai`
embedder's key from the Secret block `openai-api-key`, else OPENAI_API_KEY. Neither value
is logged, only where it came from. The dashboard gets a `load` artifact: the collection,
rows inserted, updated, deleted, embedded, and seconds.

The flow loads the run it just published, and only while that run is still `latest`: a
manual rebuild that published a newer run meanwhile loads that one, and this load steps
aside (a warning and a `load` artifact saying so, not a failure).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from firechunk.db.connect import DB_URL_ENV, connection
from firechunk.db.failures import redact
from firechunk.db.runs import published_run
from firechunk.embedders import OPENAI_KEY_ENV, make_embedder
from firechunk.layout import DataDir
from firechunk.settings import MAX_SHRINK, DatabaseSettings
from firechunk.tasks.secrets import secret_or_env

if TYPE_CHECKING:
    from firechunk.db.load import LoadResult

EMBEDDING_KEY_BLOCK = "openai-api-key"
LOAD_KEY = "rebuild-load"
PROGRESS_EVERY = 0.1
MODEL_CHARS = 60  # of the model's name in a table: a longer one is cut with "…"


@task(name="load-database", cache_policy=NO_CACHE)
def load_database(
    data_dir: Path,
    run_id: str,
    database: DatabaseSettings = DatabaseSettings(),
    *,
    allow_shrink: bool = False,
    max_shrink: float | None = None,
) -> LoadResult | None:
    """Make the run's collection hold exactly run `run_id` of `data_dir` (see
    `firechunk.db.load`); None when a newer run was published meanwhile. `max_shrink`:
    default, the load's."""
    # The database extra's modules, imported when a run is loaded, not with the flow.
    from firechunk.db.load import LoadSuperseded, load_run

    logger = get_run_logger()
    url, source = secret_or_env(database.db_secret_block, DB_URL_ENV)
    logger.info(
        "loading run %s into %s", run_id, f"the database from {source}" if url else
        f"the embedded Postgres in {DataDir(data_dir).postgres}"
    )  # fmt: skip
    built = make_embedder(database.embedder, **_embedder_options(database))
    run = published_run(Path(data_dir), run_id)
    try:
        with connection(url, Path(data_dir)) as conn:
            result = load_run(
                conn,
                run,
                built,
                allow_shrink=allow_shrink,
                max_shrink=MAX_SHRINK if max_shrink is None else max_shrink,
                only_if_latest=True,
                say=lambda message: logger.info("%s", redact(message)),
                progress=_progress_logger(),
            )
    except LoadSuperseded as newer:
        logger.warning("not loaded: %s", newer)
        create_markdown_artifact(f"Not loaded: {newer}", key=LOAD_KEY)
        return None
    logger.info(
        "run %s loaded into %s: %d inserted, %d updated, %d deleted, %d embedded in %.1f s",
        result.run_id, result.collection, result.inserted, result.updated, result.deleted,
        result.embedded, result.seconds,
    )  # fmt: skip
    create_table_artifact(load_rows(result), key=LOAD_KEY, description=load_description(result))
    return result


def _embedder_options(database: DatabaseSettings) -> dict[str, object]:
    """The settings' options, with the openai key from its Secret block or the environment."""
    if database.embedder != "openai":
        return {}
    key, _ = secret_or_env(EMBEDDING_KEY_BLOCK, OPENAI_KEY_ENV)
    return database.embedder_options(api_key=key)


def _progress_logger():
    """Log embedding progress at every tenth of the windows to embed (a long chunk is
    embedded as several; the load says how many chunks that was once it is done)."""
    logger = get_run_logger()
    logged = [0]

    def progress(done: int, total: int) -> None:
        if done == total or done - logged[0] >= max(1, int(total * PROGRESS_EVERY)):
            logged[0] = done
            logger.info("embedded %d of %d windows", done, total)

    return progress


def short_model(model: str) -> str:
    """The model's name without the description of its build that may follow it in
    parentheses, cut to MODEL_CHARS: short enough for a table cell, which the dashboard
    cuts off at its width rather than wrap."""
    name = model.split(" (", 1)[0].strip() or model
    return name if len(name) <= MODEL_CHARS else name[: MODEL_CHARS - 1] + "…"


def load_description(result: LoadResult) -> str:
    """The load artifact's description, which wraps: the model in full on a line of its own."""
    return f"What the load changed.\n\nModel: {result.model} ({result.dimensions} dimensions)"


def load_rows(result: LoadResult) -> list[dict]:
    """The load artifact's table: numbers as numbers, every cell short enough to fit at
    1400 px (the model in full is in the description)."""
    return [
        {"figure": "collection", "value": result.collection},
        {"figure": "rows inserted", "value": result.inserted},
        {"figure": "rows updated", "value": result.updated},
        {"figure": "rows deleted", "value": result.deleted},
        {"figure": "chunks embedded", "value": result.embedded},
        {"figure": "chunks held", "value": result.chunks},
        {"figure": "seconds", "value": result.seconds},
        {"figure": "run", "value": result.run_id},
        {"figure": "previous run", "value": result.previous_run_id or "none"},
        {"figure": "model", "value": short_model(result.model)},
        {"figure": "dimensions", "value": result.dimensions},
    ]
