"""What a chunking worker needs before its first task, loaded once in the fork server.

`tasks.runners.PreloadedProcessPoolTaskRunner` forks its workers from multiprocessing's fork
server, which imports this module when it starts. Every worker forked from it then begins
with Prefect's task engine, the chunk tasks and the default tokenizer already in memory
(about 3 s of imports and 0.6 s of tokenizer loading per worker, otherwise).

A worker also unpickles the flow run's context with its first task, and that context names
the running flow (which imports the flows and, through them, the crawl client and
firecrawl-py) and holds a block whose class lookup imports every installed Prefect
collection (prefect-dask, and with it Dask). Profiled on a 1,500-page rebuild, a worker
spent about 1 s on those imports before its first page; they are done here instead.
"""

import prefect.task_engine  # noqa: F401  (the engine that runs a task in the worker)
from prefect.plugins import load_prefect_collections

import flows.chunk  # noqa: F401  (the flows whose runs chunk on workers, pickled by name)
import flows.rebuild  # noqa: F401
import tasks.chunk  # noqa: F401  (the chunk tasks and, through them, the chunker)
from firechunk.tokens import DEFAULT_ENCODING, get_encoding

get_encoding(DEFAULT_ENCODING)
load_prefect_collections()
