"""What a chunking worker needs before its first task, loaded once in the fork server.

`tasks.runners.PreloadedProcessPoolTaskRunner` forks its workers from multiprocessing's fork
server, which imports this module when it starts. Every worker forked from it then begins
with Prefect's task engine, the chunk tasks and the default tokenizer already in memory
(about 3 s of imports and 0.6 s of tokenizer loading per worker, otherwise).
"""

import prefect.task_engine  # noqa: F401  (the engine that runs a task in the worker)

import tasks.chunk  # noqa: F401  (the chunk tasks and, through them, the chunker)
from firechunk.tokens import DEFAULT_ENCODING, get_encoding

get_encoding(DEFAULT_ENCODING)
