"""Imported by each worker of a local Dask cluster (`executors.dask_cluster`) as it starts.

The worker then dies with the process that started the cluster however that ends,
SIGKILL and the OOM killer included (`firechunk.run.executors.die_with_parent`). Dask's
workers do notice a lost parent by themselves, but not within seconds on a loaded machine:
measured, both workers and their resource tracker were still alive 3 s after a SIGKILL.
"""

import signal

from firechunk.run.executors import die_with_parent

die_with_parent()
# A terminal's Ctrl-C is the command's: it closes the cluster, which ends this worker.
signal.signal(signal.SIGINT, signal.SIG_IGN)
