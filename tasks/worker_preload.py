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

The fork server and its workers die with the flow process however it ends, SIGKILL
included (`firechunk.run.executors.die_with_parent`): otherwise the workers wait for tasks
from it forever, and each holds the fork server open. The fork server is tied to the flow
process here (if that died during the imports, the fork server ends as they are done: it
cannot count on finding its client gone, since a worker it forked for a request already
queued holds the client's end of the pipe that would tell it), each worker to the fork
server as it is forked. Import this
module in the fork server only: it ties whichever process imports it to its parent.
"""

import os

_client = os.getppid()  # the flow process, read before the seconds of imports below

import prefect.task_engine  # noqa: E402, F401  (the engine that runs a task in the worker)
from prefect.plugins import load_prefect_collections  # noqa: E402

import firechunk.flows.chunk  # noqa: E402, F401  (the flows whose runs chunk on workers, pickled by name)
import firechunk.flows.rebuild  # noqa: E402, F401
import firechunk.tasks.chunk  # noqa: E402, F401  (the chunk tasks and, through them, the chunker)
from firechunk.run.executors import die_with_parent  # noqa: E402
from firechunk.tokens import DEFAULT_ENCODING, get_encoding  # noqa: E402

# This fork server's pid; None in the processes it forks.
_server: int | None = os.getpid()


def _tie_worker() -> None:
    """Run in each child right after it is forked: a worker dies with the fork server that
    forked it. What a worker forks in turn is left alone."""
    global _server
    server, _server = _server, None
    if server is not None:
        die_with_parent(server)


die_with_parent(_client)
os.register_at_fork(after_in_child=_tie_worker)
get_encoding(DEFAULT_ENCODING)
load_prefect_collections()
