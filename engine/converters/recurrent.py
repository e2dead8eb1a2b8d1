"""Recurrent layers: LSTM, GRU and RNN (tanh / relu).

ATen → pnnx (pnnx's module ops, params and attribute names):

=====================================  ==========================================================
``aten.lstm.input``                    ``nn.LSTM`` (``input_size, hidden_size, num_layers, bias,
                                       batch_first, bidirectional, proj_size``)
``aten.gru.input``                     ``nn.GRU`` (same, without ``proj_size``)
``aten.rnn_tanh.input``,               ``nn.RNN`` (same, plus ``nonlinearity`` ``tanh``/``relu``)
``aten.rnn_relu.input``
``aten.lstm_cell.default``,            ``nn.LSTMCell`` / ``nn.GRUCell`` / ``nn.RNNCell``
``aten.gru_cell.default``,             (``input_size, hidden_size, bias[, nonlinearity]``;
``aten.rnn_tanh/relu_cell.default``    attributes ``weight_ih, weight_hh, bias_ih, bias_hh``)
=====================================  ==========================================================

Attributes ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``,
``weight_hr_l{k}`` (``_reverse`` for the second direction), grouped from the op's flat
``params`` list as torch does. Initial states that are constant zeros are dropped (ncnn starts
from zeros); any other ``h0``/``c0`` becomes an input (both for an LSTM). Outputs: the sequence
and the final states. Core ATen unrolls these ops; the ``fuse_unrolled_rnn`` pass puts them back
together into the same ATen ops first, so both dialects take this path.

pnnx → ncnn (as pnnx's ``pass_ncnn/nn_LSTM.cpp``, ``nn_GRU.cpp``, ``nn_RNN.cpp``): one ncnn
``LSTM``/``GRU``/``RNN`` layer per torch layer (``direction`` 2 for bidirectional), chained
through their ``(T, directions * width)`` outputs. Weights: ``weight_xc_data``/``weight_hc_data``
as torch's ``(gates * hidden, in)`` matrices stacked per direction (LSTM gates reordered from
torch's IFGO to ncnn's IFOG, ``weight_hr_data`` the projection), one ``bias_c_data`` (LSTM/RNN
``b_ih + b_hh``; GRU rows ``b_ir + b_hr``, ``b_iz + b_hz``, ``b_in``, ``b_hn``).

Layouts (ncnn has no batch; the batch size must be 1):

* the sequence blob of every ncnn layer is 2-D ``(T, features)``. A ``batch_first`` input
  ``(1, T, F)`` already is that blob; a sequence-first ``(T, 1, F)`` input gets a ``Reshape``
  (which also accepts the 2-D ``(T, F)`` blob a user may feed). The output is the layer's blob
  for ``batch_first`` (batch axis dropped) and a ``Reshape`` to the unbatched ``(T, 1, D*H)``
  otherwise;
* the states ``(layers * directions, 1, width)`` are unbatched 3-D blobs; each layer reads /
  writes its ``(directions, width)`` rows (``Reshape`` + ``Slice`` in, ``Concat`` + ``Reshape``
  out). Unused final states are not computed.

ncnn's ``RNN`` only has tanh: a relu RNN (fixed ``T``) is unrolled into a ``Gemm`` for the
input projection, one ``Gemm`` + ``BinaryOp`` add + ``ReLU`` per step and ``Concat``.

A cell is the same ncnn layer on a one-row sequence: the ``(1, features)`` input and states are
reshaped to 2-D rows, the layer's output row is the new ``h`` (its cell blob the new ``c``).
"""
from __future__ import annotations

import logging

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import batch_dim, ncnn_shape, set_batch_dim
from ..ir import Attribute, Dim, Operand
from ..ncnn.enums import BinaryOpType, ReshapeDim
from ..records import record
from ._weights import derived
from .linear import gemm_layer
from .shape import intermediate, reshape_params, reshape_to

log = logging.getLogger(__name__)

#: ATen overload → (pnnx kind, nonlinearity)
_ATEN = {"aten.lstm.input": ("LSTM", None), "aten.gru.input": ("GRU", None),
         "aten.rnn_tanh.input": ("RNN", "tanh"), "aten.rnn_relu.input": ("RNN", "relu")}
_CELLS = {"aten.lstm_cell.default": ("LSTM", None), "aten.gru_cell.default": ("GRU", None),
          "aten.rnn_tanh_cell.default": ("RNN", "tanh"), "aten.rnn_relu_cell.default": ("RNN", "relu")}
#: gate blocks per kind (rows of weight_ih = gates * hidden_size)
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_SUFFIX = ("", "_reverse")
#: ops that create a tensor of zeros (an initial state torch made up)
_ZERO_MAKERS = {"aten.zeros.default": None, "aten.new_zeros.default": None, "aten.zeros_like.default": None,
                "aten.full.default": "fill_value", "aten.new_full.default": "fill_value"}


# ---------------------------------------------------------------------------- ATen → pnnx
def _listed(op, prefix: str) -> list[Operand]:
    return [o for o, n in zip(op.inputs, op.input_names) if n == prefix or n.startswith(prefix + ".")]


def _has_projection(kind: str, states: list[Operand]) -> bool:
    return kind == "LSTM" and len(states) == 2 and states[0].shape[-1] != states[1].shape[-1]


def _weight_names(op) -> list[str] | str:
    """The pnnx attribute name of each ``params`` entry, in order (or a refusal)."""
    kind, _ = _ATEN[op.type]
    per = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if op.params.get("has_biases") else [])
    if _has_projection(kind, _listed(op, "hx")):
        per.append("weight_hr")
    layers, dirs = int(op.params["num_layers"]), 2 if op.params.get("bidirectional") else 1
    names = [f"{n}_l{k}{_SUFFIX[d]}" for k in range(layers) for d in range(dirs) for n in per]
    n_params = len(_listed(op, "params"))
    if n_params != len(names):
        return f"unsupported: {op.type} has {n_params} weights, expected {len(names)} ({', '.join(per)} per layer)"
    return names


def _check_aten(op, ctx):
    x = op.inputs[0]
    if x.shape is None or len(x.shape) != 3:
        return f"unsupported: {op.type} input {x.name} of shape {x.shape} (expected 3-D)"
    if any(s.shape is None or len(s.shape) != 3 for s in _listed(op, "hx")):
        return f"unsupported: {op.type} initial states must be 3-D"
    names = _weight_names(op)
    if isinstance(names, str):
        return names
    for opd in _listed(op, "params"):
        if ctx.attribute(opd) is None:
            return f"unsupported: {op.type} weight {opd.name} is not a constant"
    if op.params.get("train") and float(op.params.get("dropout") or 0) > 0 and int(op.params["num_layers"]) > 1:
        return f"unsupported: {op.type} in training mode with dropout"
    return None


def _is_zero(ctx, opd: Operand) -> bool:
    p = opd.producer
    if p is not None and p.type in _ZERO_MAKERS:
        key = _ZERO_MAKERS[p.type]
        return key is None or p.params.get(key) == 0
    value = ctx.const_value(opd)
    return value is not None and not np.any(value)


def _emit(ctx, op, type_: str, kind: str, params: dict, weights: dict, nonlinearity: str | None) -> list[Operand]:
    """The pnnx op: the input, the initial states unless all are constant zeros, the outputs
    shaped as ``op``'s."""
    w_ih = weights[next(n for n in weights if n.startswith("weight_ih"))]
    params = {"input_size": int(w_ih.shape[1]), "hidden_size": int(w_ih.shape[0]) // _GATES[kind], **params}
    if nonlinearity:
        params["nonlinearity"] = nonlinearity
    states = _listed(op, "hx")
    inputs = [op.inputs[0]] + ([] if all(_is_zero(ctx, s) for s in states) else states)
    outs = ctx.emit(type_, inputs, params=params, attrs=weights, outputs=[None] * len(op.outputs))
    for new, old in zip(outs, op.outputs):
        new.dtype, new.shape = old.dtype, None if old.shape is None else list(old.shape)
    return outs


@aten_converter(*_ATEN, validator=_check_aten)
def recurrent(ctx, op):
    kind, nonlinearity = _ATEN[op.type]
    weights = {n: ctx.attribute(o) for n, o in zip(_weight_names(op), _listed(op, "params"))}
    params = {"num_layers": int(op.params["num_layers"]), "bias": bool(op.params.get("has_biases")),
              "batch_first": bool(op.params.get("batch_first")), "bidirectional": bool(op.params.get("bidirectional"))}
    if kind == "LSTM":
        params["proj_size"] = int(weights["weight_hr_l0"].shape[0]) if "weight_hr_l0" in weights else 0
    return _emit(ctx, op, f"nn.{kind}", kind, params, weights, nonlinearity)


_CELL_WEIGHTS = {"w_ih": "weight_ih", "w_hh": "weight_hh", "b_ih": "bias_ih", "b_hh": "bias_hh"}


def _check_cell(op, ctx):
    for arg in _CELL_WEIGHTS:
        opd = op.named_input(arg)
        if opd is None and arg.startswith("w_"):
            return f"unsupported: {op.type} without {arg}"
        if opd is not None and ctx.attribute(opd) is None:
            return f"unsupported: {op.type} weight {opd.name} is not a constant"
    if (op.named_input("b_ih") is None) != (op.named_input("b_hh") is None):
        return f"unsupported: {op.type} with only one of b_ih, b_hh"
    if any(o.shape is None or len(o.shape) != 2 for o in [op.inputs[0], *_listed(op, "hx")]):
        return f"unsupported: {op.type} on inputs that are not 2-D (batch, features)"
    return None


@aten_converter(*_CELLS, validator=_check_cell)
def recurrent_cell(ctx, op):
    """``nn.LSTMCell``/``GRUCell``/``RNNCell`` → pnnx ``nn.LSTMCell``/``nn.GRUCell``/``nn.RNNCell``."""
    kind, nonlinearity = _CELLS[op.type]
    weights = {name: ctx.attribute(op.named_input(arg)) for arg, name in _CELL_WEIGHTS.items() if op.named_input(arg)}
    return _emit(ctx, op, f"nn.{kind}Cell", kind, {"bias": "bias_ih" in weights}, weights, nonlinearity)


# ---------------------------------------------------------------------------- pnnx → ncnn
@record(frozen=True)
class _Spec:
    """One pnnx recurrent op, as the ncnn rule needs it."""

    kind: str  #: LSTM | GRU | RNN
    layers: int
    dirs: int
    input_size: int
    hidden: int
    width: int  #: per-direction output width (proj_size for a projected LSTM, else hidden)
    bias: bool
    batch_first: bool
    relu: bool
    cell: bool  #: an LSTMCell/GRUCell/RNNCell (one step, weights named without ``_l0``)

    @classmethod
    def of(cls, op) -> "_Spec":
        p = op.params
        hidden = int(p["hidden_size"])
        name = op.type.split(".")[1]
        return cls(name.removesuffix("Cell"), int(p.get("num_layers", 1)), 2 if p.get("bidirectional") else 1,
                   int(p["input_size"]), hidden, int(p.get("proj_size") or 0) or hidden, bool(p.get("bias")),
                   bool(p.get("batch_first")), p.get("nonlinearity") == "relu", name.endswith("Cell"))

    def layer_input(self, k: int) -> int:
        return self.input_size if k == 0 else self.dirs * self.width

    def state_widths(self) -> list[int]:
        return [self.width, self.hidden] if self.kind == "LSTM" else [self.hidden]


def _seq_dims(x: Operand, spec: _Spec):
    """(batch, T, features) of the torch input."""
    b, t, f = x.shape
    return (b, t, f) if spec.batch_first else (t, b, f)


def _check_ncnn(op, ctx):
    spec = _Spec.of(op)
    x = op.inputs[0]
    if x.shape is None or len(x.shape) != 3:
        return f"unsupported: {op.type} input of shape {x.shape}"
    b, t, f = _seq_dims(x, spec)
    if b != 1 and batch_dim(x) != (0 if spec.batch_first else 1):
        return f"unsupported: {op.type} with batch size {b} that is not ncnn's batch axis"
    if not isinstance(f, int):
        return f"unsupported: {op.type} with a symbolic feature size {f}"
    if spec.relu and not isinstance(t, int):
        return "unsupported: relu RNN with a dynamic sequence length (ncnn's RNN is tanh only; it is unrolled)"
    for s in op.inputs[1:]:
        if s.shape is None or len(s.shape) != 3 or (s.shape[1] != 1 and batch_dim(s) != 1):
            return f"unsupported: {op.type} initial state {s.name} of shape {s.shape} whose batch is not ncnn's batch axis"
    return None


# weights ---------------------------------------------------------------------
def _raw(attrs, spec: _Spec, k: int, d: int) -> dict[str, np.ndarray]:
    """One layer/direction's torch weights as float32 arrays; absent biases are zeros."""
    suffix = "" if spec.cell else f"_l{k}{_SUFFIX[d]}"
    out = {n: np.asarray(attrs[n + suffix].data, np.float32) for n in ("weight_ih", "weight_hh", "weight_hr")
           if n + suffix in attrs}
    rows = _GATES[spec.kind] * spec.hidden
    for n in ("bias_ih", "bias_hh"):
        out[n] = np.asarray(attrs[n + suffix].data, np.float32) if spec.bias else np.zeros(rows, np.float32)
    return out


def _ifog(a: np.ndarray) -> np.ndarray:
    """torch's gate blocks i, f, g, o (rows) in ncnn's order i, f, o, g."""
    i, f, g, o = np.split(a, 4, axis=0)
    return np.concatenate([i, f, o, g], axis=0)


def _gru_bias(w):
    (b_ir, b_iz, b_in), (b_hr, b_hz, b_hn) = np.split(w["bias_ih"], 3), np.split(w["bias_hh"], 3)
    return np.concatenate([b_ir + b_hr, b_iz + b_hz, b_in, b_hn])


#: kind → ncnn weight name → its value from one layer/direction's torch weights
_PACK = {
    "LSTM": {"weight_xc_data": lambda w: _ifog(w["weight_ih"]),
             "bias_c_data": lambda w: _ifog(w["bias_ih"] + w["bias_hh"]),
             "weight_hc_data": lambda w: _ifog(w["weight_hh"]),
             "weight_hr_data": lambda w: w["weight_hr"]},
    "GRU": {"weight_xc_data": lambda w: w["weight_ih"], "bias_c_data": _gru_bias,
            "weight_hc_data": lambda w: w["weight_hh"]},
    "RNN": {"weight_xc_data": lambda w: w["weight_ih"], "bias_c_data": lambda w: w["bias_ih"] + w["bias_hh"],
            "weight_hc_data": lambda w: w["weight_hh"]},
}


def _layer_weights(op, spec: _Spec, k: int) -> dict[str, Attribute]:
    """ncnn weights of layer ``k`` (lazy), directions stacked."""
    pack = _PACK[spec.kind]
    sizes = {"weight_xc_data": _GATES[spec.kind] * spec.hidden * spec.layer_input(k),
             "bias_c_data": (4 if spec.kind in ("LSTM", "GRU") else 1) * spec.hidden,
             "weight_hc_data": _GATES[spec.kind] * spec.hidden * spec.width}
    if spec.kind == "LSTM" and spec.width != spec.hidden:
        sizes["weight_hr_data"] = spec.hidden * spec.width

    def one(name):  # packs only this weight (each loader runs on its own, when written)
        return derived(lambda: np.concatenate([pack[name](_raw(op.attrs, spec, k, d)).reshape(-1)
                                               for d in range(spec.dirs)]), (spec.dirs * sizes[name],))

    return {name: one(name) for name in sizes}


# layout ------------------------------------------------------------------------
def _states_in(ctx, s: Operand, spec: _Spec, width: int) -> list[Operand]:
    """An initial state ``(L*D, 1, width)`` as one ``(D, width)`` blob per layer."""
    flat = reshape_to(ctx, s, [spec.layers * spec.dirs, width])
    if spec.layers == 1:
        return [flat]
    parts = ctx.layer("Slice", [flat], outputs=spec.layers, slices=[spec.dirs] * spec.layers, axis=0)
    return [intermediate(p, [spec.dirs, width]) for p in parts]


def _sequence_blob(ctx, x: Operand, dims: list) -> Operand:
    """``x`` as the ncnn blob ``dims`` whose outermost axis is time, reshaped (when needed)
    with that axis left to ncnn (-1): the converted layers run at any sequence length."""
    if ncnn_shape(x) == dims:
        return x
    params = reshape_params(dims)
    params["h" if len(dims) == 2 else "c"] = int(ReshapeDim.INFER)
    return intermediate(ctx.layer("Reshape", [x], **params), dims)


def _result(ctx, blob: Operand, like: Operand, *, sequence: bool = False) -> Operand:
    """``blob`` as the rule's value for ``like`` (the pnnx output it replaces): a Reshape when
    ncnn's view of ``like`` differs, then ``like``'s torch shape and batch marking."""
    dims = ncnn_shape(like)
    y = _sequence_blob(ctx, blob, dims) if sequence else reshape_to(ctx, blob, dims)
    y.shape, y.dtype = list(like.shape), like.dtype
    set_batch_dim(y, batch_dim(like))
    return y


def _concat(ctx, parts: list[Operand], axis: int, shape: list) -> Operand:
    return parts[0] if len(parts) == 1 else intermediate(ctx.layer("Concat", parts, axis=axis), shape)


# layers ------------------------------------------------------------------------
def _ncnn_layer(ctx, op, spec: _Spec, k: int, seq: Operand, t: Dim, init: list[Operand],
                n_states: int) -> list[Operand]:
    """One ncnn LSTM/GRU/RNN layer over the ``(t, F)`` blob ``seq``: ``[sequence, *final
    states]`` (``n_states`` of them)."""
    extra = {"hidden_size": spec.hidden} if spec.kind == "LSTM" else {}
    name = f"{ctx.name}_l{k}"
    outs = ctx.layer(spec.kind, [seq, *init], outputs=1 + n_states, weights=_layer_weights(op, spec, k), name=name,
                     num_output=spec.width, direction=2 if spec.dirs == 2 else 0,
                     weight_data_size=spec.dirs * _GATES[spec.kind] * spec.hidden * spec.layer_input(k), **extra)
    outs = [outs] if isinstance(outs, Operand) else outs
    shapes = [[t, spec.dirs * spec.width]] + [[spec.dirs, w] for w in spec.state_widths()]
    return [intermediate(o, s) for o, s in zip(outs, shapes)]


def _gemm(ctx, x: Operand, weight: np.ndarray, bias: np.ndarray | None, rows: int) -> Operand:
    """``x @ weight.T (+ bias)`` for a 2-D ``x`` of ``rows`` rows."""
    return intermediate(gemm_layer(ctx, x, weight, bias, rows), [rows, weight.shape[0]])


def _relu_direction(ctx, w, seq: Operand, t: int, h: Operand | None, reverse: bool) -> tuple[Operand, Operand]:
    """One direction of a relu RNN layer unrolled over the ``t`` rows of ``seq``."""
    hidden = w["weight_hh"].shape[0]
    xw = _gemm(ctx, seq, w["weight_ih"], w["bias_ih"] + w["bias_hh"], t)
    rows = [xw] if t == 1 else [intermediate(r, [1, hidden]) for r in
                                ctx.layer("Slice", [xw], outputs=t, slices=[1] * t, axis=0)]
    steps: list[Operand | None] = [None] * t
    for i in (reversed(range(t)) if reverse else range(t)):
        pre = rows[i]
        if h is not None:
            pre = intermediate(ctx.layer("BinaryOp", [pre, _gemm(ctx, h, w["weight_hh"], None, 1)],
                                         op_type=int(BinaryOpType.ADD)), [1, hidden])
        h = steps[i] = intermediate(ctx.layer("ReLU", [pre]), [1, hidden])
    return _concat(ctx, steps, 0, [t, hidden]), h


def _relu_layer(ctx, op, spec: _Spec, k: int, seq: Operand, t: int, init: list[Operand]) -> list[Operand]:
    """A relu RNN layer (ncnn's RNN is tanh only): ``[sequence, final state]``."""
    h0 = [None] * spec.dirs
    if init and spec.dirs == 1:
        h0 = init
    elif init:
        h0 = [intermediate(p, [1, spec.hidden]) for p in ctx.layer("Slice", init, outputs=2, slices=[1, 1], axis=0)]
    outs, last = [], []
    for d in range(spec.dirs):
        o, h = _relu_direction(ctx, _raw(op.attrs, spec, k, d), seq, t, h0[d], reverse=d == 1)
        outs.append(o)
        last.append(h)
    return [_concat(ctx, outs, 1, [t, spec.dirs * spec.hidden]), _concat(ctx, last, 0, [spec.dirs, spec.hidden])]


@ncnn_rule("nn.LSTM", "nn.GRU", "nn.RNN", validator=_check_ncnn)
def recurrent_layer(ctx, op):
    spec = _Spec.of(op)
    _, t, features = _seq_dims(op.inputs[0], spec)
    seq = _sequence_blob(ctx, op.inputs[0], [t, features])
    states = [_states_in(ctx, s, spec, w) for s, w in zip(op.inputs[1:], spec.state_widths())]
    n_states = len(spec.state_widths()) if any(o.consumers for o in op.outputs[1:]) else 0
    finals = []
    for k in range(spec.layers):
        init = [s[k] for s in states]
        if spec.relu:
            seq, *last = _relu_layer(ctx, op, spec, k, seq, t, init)
        else:
            seq, *last = _ncnn_layer(ctx, op, spec, k, seq, t, init, n_states)
        finals.append(last)
    results = [_result(ctx, seq, op.outputs[0], sequence=True)]
    for j, like in enumerate(op.outputs[1:]):
        if not like.consumers:
            results.append(None)
            continue
        shape = [spec.layers * spec.dirs, like.shape[-1]]
        results.append(_result(ctx, _concat(ctx, [f[j] for f in finals], 0, shape), like))
    return results


# cells -------------------------------------------------------------------------
def _check_cell_ncnn(op, ctx):
    for opd in op.inputs:
        if opd.shape is None or len(opd.shape) != 2 or opd.shape[0] != 1:
            return f"unsupported: {op.type} on {opd.name} of shape {opd.shape} (batch must be 1)"
    return None


@ncnn_rule("nn.LSTMCell", "nn.GRUCell", "nn.RNNCell", validator=_check_cell_ncnn)
def recurrent_cell_layer(ctx, op):
    """One step: the ncnn layer on a 1-row sequence, the states as its hidden/cell blobs."""
    spec = _Spec.of(op)
    seq = reshape_to(ctx, op.inputs[0], [1, spec.input_size])
    init = [reshape_to(ctx, s, [1, w]) for s, w in zip(op.inputs[1:], spec.state_widths())]
    if spec.relu:
        hy, _ = _relu_layer(ctx, op, spec, 0, seq, 1, init)
        return [_result(ctx, hy, op.outputs[0])]
    want_cell = len(op.outputs) > 1 and bool(op.outputs[1].consumers)
    hy, *states = _ncnn_layer(ctx, op, spec, 0, seq, 1, init, 2 if want_cell else 0)
    return [_result(ctx, hy, op.outputs[0])] + ([_result(ctx, states[1], op.outputs[1]) if want_cell else None]
                                               if len(op.outputs) > 1 else [])
