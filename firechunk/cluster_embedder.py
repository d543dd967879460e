"""The local embedder spread over a Dask cluster's workers, for `--task-runner dask`.

A first load is embedding (onnxruntime is nearly all of it), and the local model runs on
whatever machine holds the texts: sent to a cluster in parts, each worker embeds its parts
with its own copy of the model (built once per worker process), so the load goes as fast
as the cluster has cores. The chunks' windows, the model's name and its dimensions stay
this process's embedder's: a vector is the same whichever worker made it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from firechunk.embedders import Embedder, Progress, local_embedder, rows_in_order
from firechunk.run.executors import dask_client

# Texts per part sent to a worker: enough that a part's model run outweighs its trip, few
# enough that the parts keep every worker busy to the end and progress moves.
PART_TEXTS = 128


class ClusterEmbedder:
    """Embeds as `local` (the default local embedder) does, on the cluster at `address`
    (None: a local cluster of `workers` processes, started for each call, stopped after)."""

    def __init__(
        self, local: Embedder, address: str | None, workers: int, part_texts: int = PART_TEXTS
    ) -> None:
        self.local = local
        self.model = local.model
        self.address = address
        self.workers = workers
        self.part_texts = part_texts

    def __repr__(self) -> str:
        return f"ClusterEmbedder({self.local!r}, address={self.address!r})"

    @property
    def dimensions(self) -> int:
        return self.local.dimensions

    def windows(self, heading: str, text: str) -> list[str]:
        return self.local.windows(heading, text)

    def embed(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """A handful of texts (one part or less) are embedded here: a cluster's start-up
        would cost more than they do."""
        if len(texts) <= self.part_texts:
            return self.local.embed(texts, progress)
        from distributed import as_completed

        parts = [
            list(texts[start : start + self.part_texts])
            for start in range(0, len(texts), self.part_texts)
        ]
        with dask_client(self.address, self.workers) as client:
            futures = client.map(_embed_on_worker, parts, pure=False)
            results = rows_in_order(futures, as_completed, progress)
        return np.concatenate(results)


def _embed_on_worker(texts: list[str]) -> np.ndarray:
    return _worker_embedder().embed(texts)


@functools.cache
def _worker_embedder() -> Embedder:
    """The worker's own local embedder, built on its first part."""
    return local_embedder()
