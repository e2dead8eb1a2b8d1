"""Constant folding on the ATen graph (before lowering).

An ATen operator is folded when this module knows how to compute it and every value it reads
is constant: a ``pnnx.Attribute`` (parameter, buffer, lifted constant or earlier fold) or an
operand with ``meta["const"]`` (a Python number). Shape values fold too: ``aten.sym_size.int`` /
``aten.sym_numel.default`` of a static dim (or of a symbol bound by ``--inputshape``,
``graph.meta["symbol_values"]``), and Python-operator arithmetic on them (``_operator.mul``,
``floordiv``...), so the shape arithmetic of dynamic models disappears where it can.

A folded operator is replaced by a ``pnnx.Attribute`` of the same name producing the same
operand (so uses and names do not change) with ``meta["folded_from"]`` = the op type. Scalar
results (SymInt/SymFloat/SymBool and Python-operator values) also get ``meta["const"]`` on the
operand. Tensor results are computed lazily (the attribute's loader) when their shape is
static, so folding a transposed weight reads nothing until the weight is written.

Some ops read only the shape of an argument (``new_zeros``, ``fill``, ``copy``'s destination:
:data:`SHAPE_ARGS`): they fold whenever that shape is static and their other arguments are
constant, so an attention mask built by filling slices of ``x.new_zeros(...)`` is a constant.

Splits of a constant (``split``, ``split_with_sizes``, ``chunk``, ``unbind``: :data:`SPLITS`)
fold piece by piece, one ``pnnx.Attribute`` per output; so does ``meshgrid`` of constant vectors.

Not folded: ops outside the table, other ops producing several outputs, random/uninitialised
creation ops (an ``empty`` then filled or copied into needs only its shape), and results more
than 16× (and 64 Ki elements) larger than their largest constant input, which ncnn is better
off broadcasting at run time — unless they feed a bool or integer tensor (a mask, an index),
which ncnn could not compute at all.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable

import numpy as np

from ..diagnostics import Diagnostic
from ..errors import PT2Error, PT2FormatError
from ..ir import Attribute, Graph, Operand, Operator
from ..ir.vocab import is_aten
from ..ncnn.expr import ExprError, evaluate
from ..reader.tensors import bf16_values
from ._rewrite import replace_chain
from .manager import graph_pass

log = logging.getLogger(__name__)

#: largest growth (output elements / largest constant input's) a fold may cause ...
MAX_GROWTH = 16
#: ... unless the result is at most this many elements
SMALL_RESULT = 1 << 16
#: a product or a gather of constants (:data:`COMPUTED`) may be far larger than its inputs without
#: being a broadcast ncnn could do at run time — Swin V2's position-bias MLP multiplies a (15, 15, 2)
#: coordinate table by a (512, 2) weight, then gathers (heads, 64, 64) from the (225, heads) result —
#: and folds up to this many elements (1 MiB of fp32)
COMPUTED_RESULT = 1 << 18
#: the most elements one folded constant may hold (64 MiB of fp32; ``ConvertOptions.fold_budget``):
#: a value that must be folded (a mask or an index ncnn cannot compute) but would be larger is
#: left unfolded with a warning naming it
FOLD_BUDGET = 1 << 24

NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                "i16": np.int16, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}

class _NotConstant(Exception):
    """A value the fold needs is not constant (or not computable here)."""


class Args:
    """The arguments of one operator, by schema name, with constant values substituted."""

    def __init__(self, op: Operator, value_of: Callable[[Operand], Any]):
        self.op = op
        self._value_of = value_of
        # names as they are now (a lazy fold evaluates after later passes renamed operands)
        self._by_operand_name = {opd.name: opd for opd in op.inputs}
        self._by_arg_name = dict(zip(op.input_names, op.inputs))

    def _named(self, name: str) -> Operand | None:
        return self._by_arg_name.get(name)

    def _resolve(self, v: Any) -> Any:
        if isinstance(v, str) and v.startswith("%"):
            if v[1:] in self._by_operand_name:
                return self._value_of(self._by_operand_name[v[1:]])
            raise _NotConstant(v)
        if isinstance(v, (list, tuple)):
            return [self._resolve(x) for x in v]
        return v

    def __getitem__(self, name: str) -> Any:
        opd = self._named(name)
        if opd is not None and name not in self.op.params:
            return self._value_of(opd)
        if name in self.op.params:
            return self._resolve(self.op.params[name])
        listed = [o for n, o in self._by_arg_name.items() if n.startswith(name + ".")]
        if listed:
            return [self._value_of(o) for o in listed]
        raise _NotConstant(name)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            v = self[name]
        except _NotConstant:
            return default
        return default if v is None else v

    def array(self, name: str) -> np.ndarray:
        return np.asarray(self[name])


# ----------------------------------------------------------------------------- the table
def _binary(fn: Callable, alpha: bool = False, swap: bool = False, second: str = "other"):
    def fold(a: Args):
        x, y = a.array("self"), a.array(second)
        if alpha:
            y = y * a.get("alpha", 1)
        return fn(y, x) if swap else fn(x, y)
    return fold


def _div_mode(a: Args):
    q = np.true_divide(a.array("self"), a.array("other"))
    mode = a.get("rounding_mode")
    return np.trunc(q) if mode == "trunc" else np.floor(q) if mode == "floor" else q


def _unary(fn: Callable):
    return lambda a: fn(a.array("self"))


def _linear(a: Args):
    y = a.array("input") @ a.array("weight").T
    bias = a.get("bias")
    return y if bias is None else y + np.asarray(bias)


def _addmm(a: Args):
    return a.get("beta", 1) * a.array("self") + a.get("alpha", 1) * (a.array("mat1") @ a.array("mat2"))


def _pow(a: Args):
    base, exp = a.array("self"), a.array("exponent")
    if np.issubdtype(np.result_type(base, exp), np.integer) and np.any(exp < 0):
        base = base.astype(np.float64)
    return np.power(base, exp)


def dim_value(d: Any, binding: dict[str, int]) -> int:
    """A dim (an int or an expression text like ``2*s3+1``, ``max(1;s3-2)``) at ``binding``."""
    if isinstance(d, int):
        return d
    try:
        return int(evaluate(str(d).replace(";", ","), binding))
    except (ExprError, TypeError, ValueError, ZeroDivisionError, KeyError) as e:
        raise ValueError(f"cannot evaluate size {d}: {e}") from None


def _sym_dim(graph: Graph, d: Any) -> int:
    """A dim at the sizes bound in ``graph.meta["symbol_values"]``: a bound symbol, or an
    expression of bound symbols (``4*s0``: a feature map of an input ``32*s0``)."""
    bound = graph.meta.get("symbol_values", {})
    if isinstance(d, str) and d in bound:
        return int(bound[d])
    if isinstance(d, int) or (isinstance(d, str) and bound):
        try:
            return dim_value(d, bound)
        except ValueError:
            pass
    raise _NotConstant(d)


def _view(a: Args):
    return a.array("self").reshape([int(s) for s in a["size" if "size" in a.op.params else "shape"]])


def _expand(a: Args):
    x = a.array("self")
    size = [int(s) for s in a["size"]]
    src = [1] * (len(size) - x.ndim) + list(x.shape)
    return np.broadcast_to(x.reshape(src), [s if s != -1 else d for s, d in zip(size, src)]).copy()


def _squeeze(a: Args):
    x = a.array("self")
    dims = a.get("dim", None)
    if dims is None:
        return np.squeeze(x)
    dims = [dims] if isinstance(dims, int) else list(dims)
    return np.squeeze(x, axis=tuple(d % max(x.ndim, 1) for d in dims if x.ndim and x.shape[d] == 1))


def _flatten(a: Args):
    x = a.array("self")
    if x.ndim == 0:
        return x.reshape(1)
    s, e = a.get("start_dim", 0) % x.ndim, a.get("end_dim", -1) % x.ndim
    return x.reshape(list(x.shape[:s]) + [-1] + list(x.shape[e + 1:]))


def _slice(a: Args):
    x = a.array("self")
    dim = a.get("dim", 0) % x.ndim
    index = [slice(None)] * x.ndim
    index[dim] = slice(a.get("start"), a.get("end"), a.get("step", 1))
    return x[tuple(index)]


def _slice_narrow(a: Args):
    x = a.array("self")
    start = a["start"] % x.shape[a["dim"] % x.ndim] if a["start"] < 0 else a["start"]
    return x[_slice_index(x.ndim, a["dim"], slice(start, start + a["length"]))]


def _select(a: Args):
    return np.take(a.array("self"), a["index"], axis=a["dim"])


def _full(a: Args):
    return np.full([int(s) for s in a["size"]], a["fill_value"])


def _arange(a: Args):
    return np.arange(a.get("start", 0), a["end"], a.get("step", 1))


def _linspace(a: Args):
    """``torch.linspace`` in float32 as its CPU kernel's scalar loop computes it: ``start + i *
    step`` for the first half, ``end - (steps - 1 - i) * step`` for the rest (both ends exact).
    Within an ulp of PyTorch's values, not always equal: its vectorized loop rounds by blocks of
    the CPU's vector width."""
    start, end, steps = float(a["start"]), float(a["end"]), int(a["steps"])
    if steps <= 1:
        return np.full(max(steps, 0), start, np.float32)
    f = np.float32
    step = (f(end) - f(start)) / f(steps - 1)
    i = np.arange(steps)
    half = steps // 2
    return np.where(i < half, f(start) + step * i.astype(f), f(end) - step * (steps - 1 - i).astype(f)).astype(f)


def _clamp(a: Args):
    x = a.array("self")
    lo, hi = a.get("min"), a.get("max")
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


def _shape_of(a: Args, name: str = "self") -> list[int]:
    return list(a.array(name).shape)


def _sizes(a: Args, name: str = "size") -> list[int]:
    return [int(s) for s in a[name]]


def _copy(a: Args):
    """``self.copy_(src)``: ``src`` broadcast to ``self``'s shape (cast to its dtype later)."""
    return np.broadcast_to(a.array("src"), _shape_of(a)).copy()


def _slice_index(ndim: int, dim: int, item) -> tuple:
    index = [slice(None)] * ndim
    index[dim % ndim] = item
    return tuple(index)


def _slice_scatter(a: Args):
    out = a.array("self").copy()
    item = slice(a.get("start"), a.get("end"), a.get("step", 1))
    out[_slice_index(out.ndim, a.get("dim", 0), item)] = a.array("src")
    return out


def _select_scatter(a: Args):
    out = a.array("self").copy()
    out[_slice_index(out.ndim, a["dim"], a["index"])] = a.array("src")
    return out


def _index_tuple(a: Args, x: np.ndarray) -> tuple:
    """``indices`` (optional tensors, None = the whole dim) as a numpy index."""
    op = a.op
    names = op.params.get("indices") or [n for n in op.input_names if n.startswith("indices.")]
    return tuple(slice(None) if v is None else np.asarray(a[f"indices.{k}"]) for k, v in enumerate(names))


def _index(a: Args):
    x = a.array("self")
    return x[_index_tuple(a, x)]


def _index_put(a: Args):
    out = a.array("self").copy()
    idx = _index_tuple(a, out)
    if a.get("accumulate", False):
        np.add.at(out, idx, a.array("values"))
    else:
        out[idx] = a.array("values")
    return out


def _unfold(a: Args):
    """``x.unfold(dim, size, step)``: windows along ``dim``, each window's samples last."""
    x = a.array("self")
    dim = int(a["dimension"]) % max(x.ndim, 1)
    windows = np.lib.stride_tricks.sliding_window_view(x, int(a["size"]), axis=dim)
    return np.ascontiguousarray(np.take(windows, np.arange(0, windows.shape[dim], int(a["step"])), axis=dim))


def _constant_pad(a: Args):
    """``constant_pad_nd``: ``pad`` pairs from the last dim back; a negative width crops."""
    x = a.array("self")
    pad = [int(p) for p in a["pad"]]
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    x = x[tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(widths))]
    return np.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi in widths], constant_values=a.get("value", 0) or 0)


def _masked_fill(a: Args):
    x = a.array("self")
    return np.where(a.array("mask"), np.asarray(a["value"], dtype=x.dtype), x)


def _where(a: Args):
    return np.where(a.array("condition"), a.array("self"), a.array("other"))


def _roll(a: Args):
    x = a.array("self")
    shifts, dims = a["shifts"], a.get("dims", [])
    if not dims:
        return np.roll(x.reshape(-1), shifts).reshape(x.shape)
    return np.roll(x, shifts, [d % x.ndim for d in dims])


def _reduce(fn: Callable):
    def fold(a: Args):
        x = a.array("self")
        dims = a.get("dim", None)
        dims = None if dims is None or dims == [] else tuple(d % max(x.ndim, 1) for d in
                                                             (dims if isinstance(dims, (list, tuple)) else [dims]))
        return fn(x, axis=dims, keepdims=bool(a.get("keepdim", False)))
    return fold


def _compare(fn: Callable):
    return lambda a: fn(a.array("self"), a.array("other"))


_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _diff(a: Args):
    """``torch.diff``: ``prepend``/``append`` have the input's rank (its shape but along ``dim``)."""
    x = a.array("self")
    dim = a.get("dim", -1)
    joined = np.concatenate([np.asarray(p) for p in (a.get("prepend"), x, a.get("append")) if p is not None], axis=dim)
    out = np.diff(joined, n=a.get("n", 1), axis=dim)
    return out if x.dtype != np.bool_ else out.astype(bool)


def _weight_norm(a: Args):
    """``v * (g / ||v||)``, the norm over every dim but ``dim`` (all of them when ``dim`` is -1)."""
    v, g = a.array("v"), a.array("g")
    dim = a.get("dim", 0)
    axes = tuple(range(v.ndim)) if dim == -1 else tuple(d for d in range(v.ndim) if d != dim % v.ndim)
    norm = np.sqrt(np.sum(np.square(v.astype(np.float64)), axis=axes, keepdims=True))
    return v * (g.reshape(norm.shape if g.size == norm.size else g.shape) / norm)


def _vector_norm(a: Args):
    x = a.array("self").astype(np.float64)
    order = a.get("ord", 2)
    dims = a.get("dim", None)
    axes = None if dims in (None, []) else tuple(d % x.ndim for d in (dims if isinstance(dims, (list, tuple)) else [dims]))
    keep = bool(a.get("keepdim", False))
    if order == math.inf:
        return np.amax(np.abs(x), axis=axes, keepdims=keep)
    if order == 0:
        return np.sum(x != 0, axis=axes, keepdims=keep).astype(np.float64)
    return np.power(np.sum(np.power(np.abs(x), order), axis=axes, keepdims=keep), 1.0 / order)


def _window(kind: str):
    """``torch.<kind>_window``: the symmetric window of ``window_length + 1`` points without its
    last point when ``periodic`` (torch's default)."""
    def fold(a: Args):
        n = int(a["window_length"])
        periodic = bool(a.get("periodic", True))
        if n <= 1:
            return np.ones(max(n, 0))
        m = n + 1 if periodic else n
        k = np.arange(m, dtype=np.float64)
        if kind == "hann":
            w = 0.5 - 0.5 * np.cos(2 * np.pi * k / (m - 1))
        elif kind == "hamming":
            alpha, beta = a.get("alpha", 0.54), a.get("beta", 0.46)
            w = alpha - beta * np.cos(2 * np.pi * k / (m - 1))
        elif kind == "blackman":
            w = 0.42 - 0.5 * np.cos(2 * np.pi * k / (m - 1)) + 0.08 * np.cos(4 * np.pi * k / (m - 1))
        elif kind == "bartlett":
            w = 1 - np.abs(2 * k / (m - 1) - 1)
        else:  # kaiser
            beta = a.get("beta", 12.0)
            w = np.i0(beta * np.sqrt(1 - (2 * k / (m - 1) - 1) ** 2)) / np.i0(beta)
        return w[:n]
    return fold


def _arg_reduce(fn: Callable):
    def fold(a: Args):
        x = a.array("self")
        dim = a.get("dim", None)
        if dim is None:
            out = fn(x.reshape(-1))
            return np.asarray(out).reshape([1] * x.ndim) if a.get("keepdim", False) else out
        out = fn(x, axis=dim)
        return np.expand_dims(out, dim) if a.get("keepdim", False) else out
    return fold


def _logical(fn: Callable):
    """Bitwise ops of bools are the logical ones; of integers, numpy's bitwise ones."""
    def fold(a: Args):
        x, y = a.array("self"), a.array("other")
        return fn(x, y)
    return fold


def _any_all(fn: Callable):
    def fold(a: Args):
        x = a.array("self").astype(bool)
        dims = a.get("dim", None)
        axes = None if dims in (None, []) else tuple(d % max(x.ndim, 1) for d in
                                                     (dims if isinstance(dims, (list, tuple)) else [dims]))
        return fn(x, axis=axes, keepdims=bool(a.get("keepdim", False)))
    return fold

def _batch_norm(a: Args) -> list[np.ndarray]:
    """A batch norm of a constant, with its batch's statistics when ``training`` is set (or when
    no running statistics are given: ``_native_batch_norm_legit.no_stats``), else the running
    ones: ``[out, mean, 1 / sqrt(var + eps)]``, the outputs of the ``native_`` forms. NF-Nets
    standardise their convolution weights so: a training-mode batch norm over the weight."""
    x = a.array("input")
    mean, var = a.get("running_mean"), a.get("running_var")
    if a.get("training", False) or mean is None or var is None:
        axes = tuple(d for d in range(x.ndim) if d != 1)
        mean, var = x.mean(axis=axes, dtype=np.float64), x.var(axis=axes, dtype=np.float64)  # biased, as PyTorch
    bcast = [1, -1] + [1] * (x.ndim - 2)
    rstd = 1.0 / np.sqrt(np.asarray(var, np.float64) + float(a.get("eps", 1e-5)))
    y = (x - np.reshape(mean, bcast)) * rstd.reshape(bcast)
    weight, bias = a.get("weight"), a.get("bias")
    if weight is not None:
        y = y * np.reshape(weight, bcast)
    if bias is not None:
        y = y + np.reshape(bias, bcast)
    return [y.astype(x.dtype), np.asarray(mean, x.dtype), rstd.astype(x.dtype)]


#: batch norms of several outputs folded whole (:meth:`_Folder.fold_batch_norm`)
BATCH_NORMS = {"aten.native_batch_norm.default", "aten._native_batch_norm_legit.default",
               "aten._native_batch_norm_legit.no_stats", "aten._native_batch_norm_legit_no_training.default"}

FOLDERS: dict[str, Callable[[Args], Any]] = {
    "aten.add.Tensor": _binary(np.add, alpha=True), "aten.add.Scalar": _binary(np.add, alpha=True),
    "aten.sub.Tensor": _binary(np.subtract, alpha=True), "aten.sub.Scalar": _binary(np.subtract, alpha=True),
    "aten.rsub.Tensor": _binary(np.subtract, alpha=True, swap=True),
    "aten.rsub.Scalar": _binary(np.subtract, alpha=True, swap=True),
    "aten.mul.Tensor": _binary(np.multiply), "aten.mul.Scalar": _binary(np.multiply),
    "aten.div.Tensor": _binary(np.true_divide), "aten.div.Scalar": _binary(np.true_divide),
    "aten.div.Tensor_mode": _div_mode, "aten.div.Scalar_mode": _div_mode,
    "aten.maximum.default": _binary(np.maximum), "aten.minimum.default": _binary(np.minimum),
    "aten.pow.Tensor_Tensor": _pow, "aten.pow.Tensor_Scalar": _pow, "aten.pow.Scalar": _pow,
    "aten.floor_divide.default": _binary(np.floor_divide), "aten.remainder.Tensor": _binary(np.remainder),
    "aten.remainder.Scalar": _binary(np.remainder), "aten.remainder.Scalar_Tensor": _binary(np.remainder),
    "aten.fmod.Tensor": _binary(np.fmod),
    "aten.fmod.Scalar": _binary(np.fmod),
    "aten.neg.default": _unary(np.negative), "aten.abs.default": _unary(np.abs),
    "aten.sqrt.default": _unary(np.sqrt), "aten.rsqrt.default": _unary(lambda x: 1.0 / np.sqrt(x)),
    "aten.exp.default": _unary(np.exp), "aten.log.default": _unary(np.log), "aten.log2.default": _unary(np.log2),
    "aten.reciprocal.default": _unary(lambda x: 1.0 / x), "aten.square.default": _unary(np.square),
    "aten.sigmoid.default": _unary(lambda x: 1.0 / (1.0 + np.exp(-x))), "aten.tanh.default": _unary(np.tanh),
    "aten.relu.default": _unary(lambda x: np.maximum(x, 0)), "aten.floor.default": _unary(np.floor),
    "aten.ceil.default": _unary(np.ceil), "aten.round.default": _unary(np.round),
    "aten.trunc.default": _unary(np.trunc), "aten.sign.default": _unary(np.sign),
    "aten.sin.default": _unary(np.sin), "aten.cos.default": _unary(np.cos), "aten.erf.default": _unary(_ERF),
    "aten.clamp.default": _clamp, "aten.clamp.Tensor": _clamp,
    "aten.linear.default": _linear, "aten.addmm.default": _addmm,
    "aten.matmul.default": lambda a: a.array("self") @ a.array("other"),
    "aten.mm.default": lambda a: a.array("self") @ a.array("mat2"),
    "aten.bmm.default": lambda a: a.array("self") @ a.array("mat2"),
    "aten.view.default": _view, "aten._unsafe_view.default": _view, "aten.reshape.default": _view,
    "aten.view_copy.default": _view, "aten.reshape_as.default": lambda a: a.array("self").reshape(_shape_of(a, "other")),
    "aten.expand_copy.default": _expand, "aten.unsqueeze_copy.default": lambda a: np.expand_dims(
        a.array("self"), a["dim"] % (a.array("self").ndim + 1)),
    "aten.permute_copy.default": lambda a: np.transpose(a.array("self"), a["dims"]),
    "aten.transpose_copy.int": lambda a: np.swapaxes(a.array("self"), a["dim0"], a["dim1"]),
    "aten.expand_as.default": lambda a: np.broadcast_to(a.array("self"), _shape_of(a, "other")).copy(),
    "aten.permute.default": lambda a: np.transpose(a.array("self"), a["dims"]),
    "aten.transpose.int": lambda a: np.swapaxes(a.array("self"), a["dim0"], a["dim1"]),
    "aten.t.default": lambda a: a.array("self").T, "aten.numpy_T.default": lambda a: a.array("self").T,
    "aten.repeat_interleave.self_int": lambda a: np.repeat(a.array("self"), a["repeats"], axis=a.get("dim")),
    "aten.unsqueeze.default": lambda a: np.expand_dims(a.array("self"), a["dim"] % (a.array("self").ndim + 1)),
    "aten.squeeze.dim": _squeeze, "aten.squeeze.dims": _squeeze, "aten.squeeze.default": _squeeze,
    "aten.flatten.using_ints": _flatten, "aten.expand.default": _expand,
    "aten.slice.Tensor": _slice, "aten.select.int": _select, "aten.slice_copy.Tensor": _slice,
    "aten.select_copy.int": _select, "aten.squeeze_copy.dims": _squeeze, "aten.squeeze_copy.dim": _squeeze,
    "aten.cat.default": lambda a: np.concatenate([np.asarray(t) for t in a["tensors"]], axis=a.get("dim", 0)),
    "aten.clone.default": _unary(np.array), "aten.contiguous.default": _unary(np.array),
    "aten.alias.default": _unary(np.array), "aten.detach.default": _unary(np.array),
    "aten.lift_fresh_copy.default": _unary(np.array), "aten._to_copy.default": _unary(np.array),
    "aten.to.dtype": _unary(np.array), "aten.to.dtype_layout": _unary(np.array),
    "aten.full.default": _full, "aten.zeros.default": lambda a: np.zeros([int(s) for s in a["size"]]),
    "aten.ones.default": lambda a: np.ones([int(s) for s in a["size"]]),
    "aten.scalar_tensor.default": lambda a: np.asarray(a["s"]),
    "aten.full_like.default": lambda a: np.full(a.array("self").shape, a["fill_value"]),
    "aten.zeros_like.default": lambda a: np.zeros(a.array("self").shape),
    "aten.ones_like.default": lambda a: np.ones(a.array("self").shape),
    "aten.arange.default": _arange, "aten.arange.start": _arange, "aten.arange.start_step": _arange,
    "aten.linspace.default": _linspace,
    "aten.new_zeros.default": lambda a: np.zeros(_sizes(a)), "aten.new_ones.default": lambda a: np.ones(_sizes(a)),
    "aten.new_full.default": lambda a: np.full(_sizes(a), a["fill_value"]),
    # a tensor's one value as a Python number (YOLO's ``stride[i].item()``)
    "aten.item.default": lambda a: a.array("self").item(),
    "aten._local_scalar_dense.default": lambda a: a.array("self").item(),
    "aten.zero.default": lambda a: np.zeros(_shape_of(a)),
    "aten.fill.Scalar": lambda a: np.full(_shape_of(a), a["value"]),
    "aten.fill.Tensor": lambda a: np.full(_shape_of(a), a.array("value")),
    "aten.copy.default": _copy, "aten.slice_scatter.default": _slice_scatter,
    "aten.select_scatter.default": _select_scatter, "aten.index.Tensor": _index, "aten.index_put.default": _index_put,
    "aten.unfold.default": _unfold, "aten.constant_pad_nd.default": _constant_pad,
    "aten.index_select.default": lambda a: np.take(a.array("self"), a.array("index"), axis=a["dim"]),
    "aten.embedding.default": lambda a: np.take(a.array("weight"), a.array("indices"), axis=0),
    "aten.gather.default": lambda a: np.take_along_axis(a.array("self"), a.array("index"), axis=a["dim"]),
    "aten.masked_fill.Scalar": _masked_fill, "aten.masked_fill.Tensor": _masked_fill,
    "aten.where.self": _where, "aten.where.ScalarSelf": _where, "aten.where.ScalarOther": _where,
    "aten.where.Scalar": _where,
    "aten.eq.Scalar": _compare(np.equal), "aten.eq.Tensor": _compare(np.equal),
    "aten.ne.Scalar": _compare(np.not_equal), "aten.ne.Tensor": _compare(np.not_equal),
    "aten.lt.Scalar": _compare(np.less), "aten.lt.Tensor": _compare(np.less),
    "aten.le.Scalar": _compare(np.less_equal), "aten.le.Tensor": _compare(np.less_equal),
    "aten.gt.Scalar": _compare(np.greater), "aten.gt.Tensor": _compare(np.greater),
    "aten.ge.Scalar": _compare(np.greater_equal), "aten.ge.Tensor": _compare(np.greater_equal),
    "aten.logical_not.default": _unary(np.logical_not), "aten.bitwise_not.default": _unary(np.invert),
    "aten.logical_and.default": _compare(np.logical_and), "aten.logical_or.default": _compare(np.logical_or),
    "aten.logical_xor.default": _compare(np.logical_xor),
    "aten.roll.default": _roll, "aten.flip.default": lambda a: np.flip(a.array("self"), [int(d) for d in a["dims"]]),
    "aten.tril.default": lambda a: np.tril(a.array("self"), a.get("diagonal", 0)),
    "aten.triu.default": lambda a: np.triu(a.array("self"), a.get("diagonal", 0)),
    "aten.stack.default": lambda a: np.stack([np.asarray(t) for t in a["tensors"]], axis=a.get("dim", 0)),
    "aten.repeat.default": lambda a: np.tile(a.array("self"), [int(r) for r in a["repeats"]]),
    "aten.tile.default": lambda a: np.tile(a.array("self"), [int(r) for r in a["dims"]]),
    "aten.swapaxes.default": lambda a: np.swapaxes(a.array("self"), a["axis0"], a["axis1"]),
    "aten.swapdims.default": lambda a: np.swapaxes(a.array("self"), a["dim0"], a["dim1"]),
    "aten.movedim.int": lambda a: np.moveaxis(a.array("self"), a["source"], a["destination"]),
    "aten.narrow.default": lambda a: _slice_narrow(a),
    "aten.sum.dim_IntList": _reduce(np.sum), "aten.sum.default": _reduce(np.sum), "aten.mean.dim": _reduce(np.mean),
    "aten.mean.default": _reduce(np.mean), "aten.amax.default": _reduce(np.amax), "aten.amin.default": _reduce(np.amin),
    "aten.prod.dim_int": _reduce(np.prod),
    "aten.cumsum.default": lambda a: np.cumsum(a.array("self"), axis=a["dim"]),
    "aten.cumprod.default": lambda a: np.cumprod(a.array("self"), axis=a["dim"]),
    "aten.diff.default": _diff,
    "aten.batch_norm.default": lambda a: _batch_norm(a)[0],
    "aten.__and__.Tensor": _logical(np.bitwise_and), "aten.__and__.Scalar": _logical(np.bitwise_and),
    "aten.__or__.Tensor": _logical(np.bitwise_or), "aten.__or__.Scalar": _logical(np.bitwise_or),
    "aten.__xor__.Tensor": _logical(np.bitwise_xor), "aten.__xor__.Scalar": _logical(np.bitwise_xor),
    "aten.bitwise_and.Tensor": _logical(np.bitwise_and), "aten.bitwise_and.Scalar": _logical(np.bitwise_and),
    "aten.bitwise_or.Tensor": _logical(np.bitwise_or), "aten.bitwise_or.Scalar": _logical(np.bitwise_or),
    "aten.bitwise_xor.Tensor": _logical(np.bitwise_xor), "aten.bitwise_xor.Scalar": _logical(np.bitwise_xor),
    "aten.isnan.default": _unary(np.isnan), "aten.isinf.default": _unary(np.isinf),
    "aten.isfinite.default": _unary(np.isfinite),
    "aten.any.default": _any_all(np.any), "aten.any.dim": _any_all(np.any), "aten.any.dims": _any_all(np.any),
    "aten.all.default": _any_all(np.all), "aten.all.dim": _any_all(np.all), "aten.all.dims": _any_all(np.all),
    "aten.argmax.default": _arg_reduce(np.argmax), "aten.argmin.default": _arg_reduce(np.argmin),
    "aten.max.default": _reduce(np.amax), "aten.min.default": _reduce(np.amin),
    "aten.max.other": _binary(np.maximum), "aten.min.other": _binary(np.minimum),
    "aten.log1p.default": _unary(np.log1p), "aten.log10.default": _unary(np.log10),
    "aten.expm1.default": _unary(np.expm1), "aten.atan2.default": _binary(np.arctan2),
    "aten.true_divide.Tensor": _binary(np.true_divide), "aten.floor_divide.Scalar": _binary(np.floor_divide),
    "aten.to.device": _unary(np.array), "aten.to.other": _unary(np.array), "aten.type_as.default": _unary(np.array),
    "aten.to.prim_dtype": _unary(np.array), "aten._assert_tensor_metadata.default": _unary(np.array),
    "aten._weight_norm.default": _weight_norm, "aten.linalg_vector_norm.default": _vector_norm,
    "aten.hann_window.default": _window("hann"), "aten.hann_window.periodic": _window("hann"),
    "aten.hamming_window.default": _window("hamming"), "aten.hamming_window.periodic": _window("hamming"),
    "aten.hamming_window.periodic_alpha": _window("hamming"),
    "aten.hamming_window.periodic_alpha_beta": _window("hamming"),
    "aten.blackman_window.default": _window("blackman"), "aten.blackman_window.periodic": _window("blackman"),
    "aten.bartlett_window.default": _window("bartlett"), "aten.bartlett_window.periodic": _window("bartlett"),
    "aten.kaiser_window.default": _window("kaiser"), "aten.kaiser_window.periodic": _window("kaiser"),
    "aten.kaiser_window.beta": _window("kaiser"),
    "aten.eye.default": lambda a: np.eye(a["n"]), "aten.eye.m": lambda a: np.eye(a["n"], a["m"]),
    "aten.clamp_min.default": lambda a: np.maximum(a.array("self"), a["min"]),
    "aten.clamp_max.default": lambda a: np.minimum(a.array("self"), a["max"]),
    # Python-operator arithmetic on SymInt/SymFloat/SymBool values
    "_operator.add": lambda a: a["a"] + a["b"], "_operator.sub": lambda a: a["a"] - a["b"],
    "_operator.mul": lambda a: a["a"] * a["b"], "_operator.truediv": lambda a: a["a"] / a["b"],
    "_operator.floordiv": lambda a: a["a"] // a["b"], "_operator.mod": lambda a: a["a"] % a["b"],
    "_operator.pow": lambda a: a["a"] ** a["b"], "_operator.neg": lambda a: -a["a"],
    "_operator.eq": lambda a: a["a"] == a["b"], "_operator.ne": lambda a: a["a"] != a["b"],
    "_operator.lt": lambda a: a["a"] < a["b"], "_operator.le": lambda a: a["a"] <= a["b"],
    "_operator.gt": lambda a: a["a"] > a["b"], "_operator.ge": lambda a: a["a"] >= a["b"],
    "torch.sym_float": lambda a: float(a["a"]), "torch.sym_int": lambda a: int(a["a"]),
    "torch.sym_max": lambda a: max(a["a"], a["b"]), "torch.sym_min": lambda a: min(a["a"], a["b"]),
    "torch.sym_not": lambda a: not a["a"], "math.ceil": lambda a: math.ceil(a["a"]),
    "math.floor": lambda a: math.floor(a["a"]), "math.sqrt": lambda a: math.sqrt(a["a"]),
}

#: ops that read only their input's shape (the input itself need not be constant)
#: products and gathers (see COMPUTED_RESULT)
COMPUTED = {"aten.linear.default", "aten.addmm.default", "aten.matmul.default", "aten.mm.default", "aten.bmm.default",
            "aten.index.Tensor", "aten.index_select.default", "aten.gather.default", "aten.embedding.default"}
SHAPE_ONLY = {"aten.sym_size.int", "aten.sym_numel.default", "aten.full_like.default", "aten.zeros_like.default",
              "aten.ones_like.default"}

#: ops some of whose tensor arguments give only their shape (and dtype), not their values
SHAPE_ARGS = {t: ("self",) for t in (
    "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default", "aten.zero.default",
    "aten.fill.Scalar", "aten.fill.Tensor", "aten.copy.default")}
SHAPE_ARGS.update({t: ("other",) for t in (
    "aten.expand_as.default", "aten.reshape_as.default", "aten.type_as.default", "aten.to.other")})

#: tensor dtypes ncnn never computes with: ops producing them are folded whatever their size
_NOT_NCNN_DTYPES = ("bool", "i64", "i32", "i16", "i8", "u8")

#: ops whose result is a Python number (SymInt/SymFloat/SymBool)
_SCALAR_PREFIXES = ("_operator.", "torch.sym_", "math.", "aten.sym_", "aten.item.", "aten._local_scalar_dense.")


# ----------------------------------------------------------------------------- the pass
class _Folder:
    def __init__(self, graph: Graph, budget: int = FOLD_BUDGET):
        self.graph = graph
        self.folded = 0
        self.budget = budget
        #: operators a forced fold left because their value would exceed the budget, with its size
        self.over_budget: dict[int, tuple[Operator, int]] = {}

    def const(self, opd: Operand) -> Any:
        if "const" in opd.meta:
            return opd.meta["const"]
        p = opd.producer
        if p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs:
            return p.attrs["data"].data
        raise _NotConstant(opd.name)

    def is_const(self, opd: Operand) -> bool:
        p = opd.producer
        return "const" in opd.meta or (p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs)

    def shape_value(self, op: Operator) -> Any:
        x = op.inputs[0]
        if x.shape is None:
            raise _NotConstant(x.name)
        shape = [_sym_dim(self.graph, d) for d in x.shape]
        if op.type == "aten.sym_size.int":
            return shape[op.params["dim"]]
        if op.type == "aten.sym_numel.default":
            return int(np.prod(shape)) if shape else 1
        return np.zeros(shape, dtype=np.int8)  # *_like: only the shape matters

    def try_fold(self, op: Operator, force: bool = False) -> bool:
        if not is_aten(op):
            return False
        if op.type in SPLITS and len(op.outputs) > 1:
            return self.fold_split(op)
        if op.type in MESHGRIDS:
            return self.fold_meshgrid(op)
        if op.type in BATCH_NORMS:
            return self.fold_batch_norm(op)
        if len(op.outputs) != 1 or not op.outputs[0].consumers:
            return False
        out = op.outputs[0]
        if _static(out.shape) and 0 in out.shape and short_dtype_of(out) is not None:
            # an empty tensor has no values to compute (Phi-3's q[..., rotary_dim:] of a full rotation)
            self._replace(op, Attribute(np.zeros(out.shape, NUMPY_DTYPES[out.dtype])))
            return True
        if op.type not in FOLDERS and op.type not in SHAPE_ONLY:
            return False
        shape_only = op.type in SHAPE_ONLY
        shaped = self.shape_arguments(op)
        if shaped is None or (not shape_only and not all(self.is_const(i) for i in op.inputs if id(i) not in shaped)):
            return False
        out = op.outputs[0]
        scalar = op.type.startswith(_SCALAR_PREFIXES)
        try:
            if op.type in ("aten.sym_size.int", "aten.sym_numel.default"):
                value = self.shape_value(op)
            elif shape_only:
                like = self.shape_value(op)
                value = FOLDERS[op.type](Args(op, lambda o: like))
            elif scalar or not _static(out.shape) or short_dtype_of(out) is None:
                value = FOLDERS[op.type](Args(op, lambda o: shaped[id(o)] if id(o) in shaped else self.const(o)))
            else:
                value = None  # computed lazily below
        except _NotConstant:
            return False
        except Exception as e:  # a value numpy cannot compute here: leave the op
            log.debug("not folding %s (%s): %s", op.name, op.type, e)
            return False
        if scalar:
            value = _python_scalar(value)
            if value is None:
                return False
            self._replace(op, Attribute(np.asarray(value)), const=value)
            return True
        if value is not None:
            arr = _cast(np.asarray(value), out)
            if arr is None or (out.shape is not None and _static(out.shape) and list(arr.shape) != list(out.shape)):
                return False
            attr = _tagged(Attribute(arr), out)
        else:
            attr = self._lazy(op, out, shaped)
        n = math.prod(attr.shape)  # an Attribute's shape: ints
        if n > self.budget:
            if force:
                self.over_budget[id(op)] = (op, n)
            else:
                op.meta["fold_skipped"] = f"not folded: its {n:,}-element value is over the fold budget ({self.budget:,})"
                op.meta["fold_over_budget"] = True  # the lowering need not try again
            return False
        if not force and not self._small_enough(op, attr):
            op.meta["fold_skipped"] = (f"not folded: its {n}-element value would be more than {MAX_GROWTH}x its "
                                       "largest constant input (left for ncnn to compute at run time)")
            return False
        self._replace(op, attr)
        return True

    def force(self, op: Operator, seen: set[int]) -> bool:
        """Fold ``op`` and the constant computation feeding it whatever the sizes (for values
        ncnn cannot compute at run time: masks, indices). False when something is not constant."""
        # depth-first without recursion (a chain back through a 32-layer ViT is thousands deep):
        # every producer is listed before what reads it, then folded in that order
        order, stack = [], [(op, False)]
        while stack:
            cur, done = stack.pop()
            if done:
                order.append(cur)
                continue
            if id(cur) in seen:
                continue
            seen.add(id(cur))
            stack.append((cur, True))
            for i in cur.inputs:
                if self.is_const(i):
                    continue
                p = i.producer
                if p is None or not is_aten(p):
                    return False
                stack.append((p, False))
        return all(self.try_fold(cur, force=True) for cur in order)

    def shape_arguments(self, op: Operator) -> dict[int, np.ndarray] | None:
        """Stand-ins (zeros of the right shape) for the arguments of ``op`` that only give their
        shape (:data:`SHAPE_ARGS`); None when such a shape is not static."""
        out: dict[int, np.ndarray] = {}
        shape_names = SHAPE_ARGS.get(op.type, ())
        # an operand also passed where its values count (x.expand_as(x)) is no stand-in
        valued = {id(i) for n, i in zip(op.input_names, op.inputs) if n not in shape_names}
        for name in shape_names:
            opd = op.named_input(name)
            if opd is None or self.is_const(opd) or id(opd) in valued:
                continue
            if opd.shape is None:
                return None
            try:
                shape = [_sym_dim(self.graph, d) for d in opd.shape]
            except _NotConstant:
                return None
            out[id(opd)] = np.zeros(shape, dtype=NUMPY_DTYPES.get(opd.dtype or "f32", np.float32))
        return out

    def _lazy(self, op: Operator, out: Operand, shaped: dict[int, np.ndarray]) -> Attribute:
        """An attribute computing ``op`` on first access (inputs captured now: constants by
        value, weights as their lazy attributes, shape-only arguments as zeros)."""
        captured = {id(i): (shaped[id(i)],) if id(i) in shaped else (i.meta["const"],) if "const" in i.meta
                    else i.producer.attrs["data"] for i in op.inputs}
        dtype = NUMPY_DTYPES[out.dtype]
        fn = FOLDERS[op.type]

        def value_of(opd: Operand) -> Any:
            c = captured[id(opd)]
            return c[0] if isinstance(c, tuple) else c.data

        args = Args(op, value_of)
        name, target, shape = op.name, op.type, [int(d) for d in out.shape]

        def load() -> np.ndarray:
            # runs when a writer or a later pass asks for the value: a node the file describes
            # wrongly (an argument missing, a declared shape numpy disagrees with) is the
            # file's fault, reported like any other unreadable part of it
            try:
                arr = np.array(np.asarray(fn(args)), dtype=dtype, order="C")
            except PT2Error:
                raise
            except Exception as e:
                reason = f"missing argument {e}" if isinstance(e, _NotConstant) else f"{type(e).__name__}: {e}"
                raise PT2FormatError(name, f"{target}: cannot compute this constant ({reason})") from None
            if list(arr.shape) != shape:
                raise PT2FormatError(name, f"{target} computes shape {list(arr.shape)} but the graph declares {shape}")
            return arr

        return Attribute(loader=load, shape=shape, dtype=out.dtype)

    def _small_enough(self, op: Operator, attr: Attribute) -> bool:
        n = math.prod(attr.shape)
        if n <= SMALL_RESULT or op.type in SHAPE_ONLY or (op.type in COMPUTED and n <= COMPUTED_RESULT):
            return True
        sizes = [math.prod(i.shape) for i in op.inputs if i.shape is not None and _static(i.shape)]
        return not sizes or n <= MAX_GROWTH * max(max(sizes), 1)

    def fold_split(self, op: Operator) -> bool:
        """A split of a constant (``nn.MultiheadAttention``'s packed ``in_proj_weight`` cut into
        q / k / v): one ``pnnx.Attribute`` per piece, each producing the op's output operand."""
        x = op.inputs[0] if op.inputs else None
        if x is None or not self.is_const(x) or not _static(x.shape):
            return False
        return self._fold_outputs(op, lambda: _pieces(np.asarray(self.const(x)), op))

    def fold_meshgrid(self, op: Operator) -> bool:
        """``meshgrid`` of constant vectors (the relative-position tables of BEiT-style
        attention): one ``pnnx.Attribute`` per grid."""
        if not op.inputs or not all(self.is_const(i) for i in op.inputs):
            return False
        indexing = op.params.get("indexing", "ij")
        return self._fold_outputs(op, lambda: np.meshgrid(*[np.asarray(self.const(i)) for i in op.inputs],
                                                          indexing=indexing))

    def fold_batch_norm(self, op: Operator) -> bool:
        """A batch norm of constants with its statistics as outputs (:func:`_batch_norm`)."""
        if not op.inputs or not all(self.is_const(i) for i in op.inputs):
            return False
        return self._fold_outputs(op, lambda: _batch_norm(Args(op, self.const))[:len(op.outputs)])

    def _fold_outputs(self, op: Operator, compute: Callable[[], list[np.ndarray]]) -> bool:
        """Replace multi-output ``op`` by one ``pnnx.Attribute`` per output, from ``compute()``
        (outputs of dynamic shape only at bound sizes: ``fold_dynamic_constants``' evaluation)."""
        try:
            shapes = [[_sym_dim(self.graph, d) for d in o.shape] for o in op.outputs if o.shape is not None]
            if len(shapes) != len(op.outputs):
                return False
            pieces = compute()
        except _NotConstant:
            return False
        except Exception as e:  # numpy cannot compute it so: leave the op
            log.debug("not folding %s (%s): %s", op.name, op.type, e)
            return False
        if len(pieces) != len(op.outputs) or any(list(p.shape) != s for s, p in zip(shapes, pieces)):
            return False
        outs = list(op.outputs)
        fresh = []
        for k, (o, piece) in enumerate(zip(outs, pieces)):
            f = self.graph.new_operand(f"{o.name}_folded", dtype=o.dtype, shape=list(piece.shape))
            f.meta = dict(o.meta)
            new = self.graph.add_op("pnnx.Attribute", self.graph.unique_op_name(f"{op.name}_{k}"), [], [f],
                                    attrs={"data": _tagged(Attribute(np.ascontiguousarray(piece)), o)},
                                    provenance=op.provenance, before=op)
            new.meta["folded_from"] = op.type
            self.graph.replace_all_uses(o, f)
            fresh.append((f, o.name))
        self.graph.remove_op(op)
        for f, name in fresh:
            self.graph.rename_operand(f, name)
        self.folded += 1
        return True

    def _replace(self, op: Operator, attr: Attribute, const: Any = None) -> None:
        # the constant stands for every ATen node folded into it: this op's and its folded inputs'
        folded = [i.producer.provenance for i in op.inputs if i.producer is not None and "folded_from" in i.producer.meta]
        new = replace_chain(self.graph, op, [], "pnnx.Attribute", [], attrs={"data": attr})
        new.provenance = new.provenance.union(*folded)
        new.meta["folded_from"] = op.type
        out = new.outputs[0]
        if const is None:
            out.shape = list(attr.shape)
        else:
            out.meta["const"] = const
        self.folded += 1


#: multi-output ops folded piece by piece (:meth:`_Folder.fold_split`): cut along ``dim`` at the
#: sizes their outputs have; an unbind takes each index of ``dim``
SPLITS = {"aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default", "aten.split_copy.Tensor",
          "aten.split_with_sizes_copy.default", "aten.unbind.int", "aten.unbind_copy.int"}

#: ``meshgrid`` of constant vectors folds one grid per output (:meth:`_Folder.fold_meshgrid`)
MESHGRIDS = {"aten.meshgrid.default", "aten.meshgrid.indexing"}


def _pieces(arr: np.ndarray, op: Operator) -> list[np.ndarray]:
    dim = int(op.params.get("dim", 0)) % arr.ndim
    if op.type.startswith("aten.unbind"):
        return [np.take(arr, i, axis=dim) for i in range(arr.shape[dim])]
    return np.split(arr, np.cumsum([o.shape[dim] for o in op.outputs])[:-1], axis=dim)


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def short_dtype_of(opd: Operand) -> str | None:
    return opd.dtype if opd.dtype in NUMPY_DTYPES else None


def _cast(arr: np.ndarray, out: Operand) -> np.ndarray | None:
    dtype = short_dtype_of(out)
    if dtype is None:
        if out.dtype == "bf16":
            return bf16_values(arr)
        if out.dtype is not None:
            return None
        return arr if arr.dtype != np.float64 else arr.astype(np.float32)
    return np.array(arr, dtype=NUMPY_DTYPES[dtype], order="C")


def _tagged(attr: Attribute, out: Operand) -> Attribute:
    """``attr`` saying ``bf16`` when it holds a bfloat16 value (as float32 values, like every
    ``bf16`` attribute: see :mod:`engine.build.builder`)."""
    if out.dtype == "bf16" and attr.dtype == "f32":
        attr.dtype = "bf16"
    return attr


def _python_scalar(v: Any) -> Any:
    if isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, np.generic) or (isinstance(v, np.ndarray) and v.ndim == 0):
        return v.item()
    return None


def _report_over_budget(folder: _Folder, cx) -> None:
    diagnostics = getattr(cx, "diagnostics", None)
    for op, n in folder.over_budget.values():
        if diagnostics is None or op not in folder.graph.ops:
            continue
        diagnostics.add(Diagnostic.for_operator(
            op, f"not folded: this constant would hold {n:,} elements, more than the folding budget of "
                f"{folder.budget:,} (ConvertOptions.fold_budget); it is left for the converters",
            severity="warning", stage="fold_constants"))


def fold_late(graph: Graph, op: Operator, budget: int | None = None) -> int | None:
    """Fold ``op`` however much larger than its inputs its value is, within the fold budget: what
    the lowering does with a value this pass left for ncnn to compute at run time (``meta
    ["fold_skipped"]``) when no rule can compute it there — swin3d's relative position bias, a
    gather of 153,664 indices from a constant table in thousands of runs. Returns the folded
    value's element count; None when it did not fold."""
    out = op.outputs[0] if len(op.outputs) == 1 else None
    if out is None or not _static(out.shape):
        return None
    n = math.prod(out.shape)
    return n if _Folder(graph, budget or FOLD_BUDGET).try_fold(op, force=True) else None


@graph_pass("fold_constants", "compute ATen ops whose inputs are all constant (and static shape arithmetic)")
def run(graph: Graph, cx) -> None:
    budget = getattr(getattr(cx, "options", None), "fold_budget", None) or FOLD_BUDGET
    folder = _Folder(graph, budget)
    for op in list(graph.ops):
        folder.try_fold(op)
    folded = folder.folded
    # bool/integer tensors (and what reads them: masked_fill, where): ncnn computes floats only,
    # so these fold whatever their size
    for op in list(graph.ops):
        out = op.outputs[0] if len(op.outputs) == 1 else None
        if not is_aten(op) or out is None or out.producer is not op:
            continue
        if out.dtype in _NOT_NCNN_DTYPES or any(i.dtype == "bool" for i in op.inputs):
            folder.force(op, set())
    if folder.folded != folded:
        for op in list(graph.ops):  # what reads the forced values may fold now
            folder.try_fold(op)
    _report_over_budget(folder, cx)
    if folder.folded:
        log.debug("folded %d operators", folder.folded)


__all__ = ["FOLDERS", "SHAPE_ARGS", "SHAPE_ONLY", "Args", "fold_late", "run"]
