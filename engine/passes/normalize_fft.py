"""FFTs over any dims as one-dim transforms along the last dim (ATen level), for
:mod:`decompose_fft`, which turns a transform along the last dim into a product with a constant
DFT basis.

A discrete Fourier transform over several dims is separable: one transform along each dim in
turn (the normalization factors multiply: ``1/√N`` of the whole is the product of the dims'
``1/√Nᵢ``, ``1/N`` likewise). A transform along dim ``d`` that is not the last is the same
transform between two ``transpose(d, -1)``; the transposes of complex values are then carried
out on their real layout by :mod:`realize_complex_views`. So:

* ``_fft_c2c(x, dims, normalization, forward)`` → one ``_fft_c2c`` per dim;
* ``_fft_c2c`` of a real tensor cast to complex (core ATen's ``fftn`` of a real signal) →
  ``_fft_r2c(x, [d], normalization, onesided=False)`` along one dim, ``_fft_c2c`` along the
  others (the cast then has no reader and is removed);
* ``_fft_r2c(x, dims, normalization, onesided)`` → ``_fft_r2c`` along the last of ``dims`` (the
  one a one-sided transform halves), ``_fft_c2c`` along the others;
* ``_fft_c2r`` and the training dialect's ``fft_rfft`` / ``fft_irfft`` along a dim that is not
  the last → the same op between the two transposes; ``_fft_c2r`` over several dims (and the
  training dialect's ``fft_irfft2`` / ``fft_irfftn``, ``s`` None) → inverse ``_fft_c2c`` along
  all but the last of them, then ``_fft_c2r`` along that;
* the training dialect's ``fft_fft`` / ``fft_ifft`` / ``fft_fft2`` / ``fft_ifft2`` /
  ``fft_fftn`` / ``fft_ifftn`` / ``fft_rfft2`` / ``fft_rfftn`` (``n`` / ``s`` None: no padding
  or cropping) → the core forms;
* ``real(x)`` / ``imag(x)`` of a complex ``x`` → ``select(view_as_real(x), -1, 0 / 1)``.

Only transforms whose dims have static sizes up to :data:`decompose_fft.MAX_POINTS` are
rewritten (others stay as they are and are reported unconverted); an inverse transform of a
real signal is left alone.
"""
from __future__ import annotations

from ..convert.shapes import normalize_dim
from ..ir import Graph, Operand, Operator
from ._aten import AtenEmitter
from .decompose_fft import _NORMS, MAX_POINTS
from .manager import graph_pass
from .realize_complex_views import REAL_OF

_COMPLEX_OF = {v: k for k, v in REAL_OF.items()}
#: training-dialect complex transforms: type → (size param, default dims, forward)
_TRAINING = {"aten.fft_fft.default": ("n", -1, True), "aten.fft_ifft.default": ("n", -1, False),
             "aten.fft_fft2.default": ("s", [-2, -1], True), "aten.fft_ifft2.default": ("s", [-2, -1], False),
             "aten.fft_fftn.default": ("s", None, True), "aten.fft_ifftn.default": ("s", None, False),
             "aten.fft_rfft2.default": ("s", [-2, -1], True), "aten.fft_rfftn.default": ("s", None, True)}
#: of those, the one-sided transforms of a real signal
_ONESIDED = ("aten.fft_rfft2.default", "aten.fft_rfftn.default")
#: one-dim ops kept as they are, only moved to the last dim (``dim`` names it)
_ONE_DIM = ("aten._fft_c2r.default", "aten.fft_rfft.default", "aten.fft_irfft.default")
_PARTS = {"aten.real.default": 0, "aten.imag.default": 1}
#: training-dialect inverse real transforms over several dims: type → default dims
_INVERSE_REAL = {"aten.fft_irfft2.default": [-2, -1], "aten.fft_irfftn.default": None}


class _Chain:
    """Emits one-dim transforms of a value in turn, each along the last dim."""

    def __init__(self, graph: Graph, op: Operator):
        self.em = AtenEmitter(graph, op)
        self.name = op.name
        self.k = 0

    def _transpose(self, x: Operand, d: int) -> Operand:
        rank = len(x.shape)
        shape = list(x.shape)
        shape[d], shape[-1] = shape[-1], shape[d]
        self.k += 1
        return self.em.op("aten.transpose.int", {"self": x}, shape=shape, dtype=x.dtype,
                          name=f"{self.name}_t{self.k}", dim0=d, dim1=rank - 1)

    def along(self, x: Operand, d: int, type: str, last: int, dtype: str, dim_param, **params) -> Operand:
        """``type`` along dim ``d`` of ``x``: its output's size there is ``last``."""
        rank = len(x.shape)
        moved = d != rank - 1
        src = self._transpose(x, d) if moved else x
        shape = list(src.shape[:-1]) + [last]
        y = self.em.op(type, {"self": src}, shape=shape, dtype=dtype, name=f"{self.name}_d{d}",
                       param_dict={"dim": dim_param(rank - 1)}, **params)
        return self._transpose(y, d) if moved else y


def _static(shape, dims, op: Operator | None = None) -> bool:
    """Every dim in ``dims`` has a static size the DFT basis can take; otherwise ``op`` (when
    given) is told why it stays (its report then says so)."""
    for d in dims:
        n = shape[d]
        if not (isinstance(n, int) and 0 < n <= MAX_POINTS):
            if op is not None:
                op.meta["fft_left"] = True  # its real/imag readers are refused with it
                size = f"size {n}" if isinstance(n, int) else "a run-time size"
                op.meta["unsupported_reason"] = (
                    f"unsupported: a Fourier transform over dim {d} of {size} (ncnn has no FFT: a transform "
                    f"becomes a product with a constant DFT basis, which needs a static size up to {MAX_POINTS})")
            return False
    return True


def _dims(value, rank: int) -> list[int] | None:
    if value is None:
        return list(range(rank))
    vals = value if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(d, int) for d in vals):
        return None
    dims = [normalize_dim(d, rank) for d in vals]
    return dims if len(set(dims)) == len(dims) and dims else None


def _source(op: Operator) -> tuple[Operand, Operator | None]:
    """The transform's input, seen through a cast of a real tensor to complex."""
    x = op.inputs[0]
    cast = x.producer
    if (cast is not None and cast.type == "aten._to_copy.default" and x.dtype in REAL_OF and cast.inputs
            and cast.inputs[0].dtype == REAL_OF[x.dtype] and cast.inputs[0].shape == x.shape):
        return cast.inputs[0], cast
    return x, None


def _transform(graph: Graph, op: Operator, dims: list[int], normalization: int, forward: bool,
               onesided: bool = False, *, core: bool = True) -> bool:
    """Rewrite ``op`` (a transform of its first input over ``dims``) as one-dim transforms
    (``core``: ``op`` is a core ATen transform, left as it is when already one along the last dim)."""
    x, cast = _source(op)
    out = op.outputs[0]
    if x.shape is None or out.shape is None or len(op.outputs) != 1 or not _static(x.shape, dims, op):
        return False
    real_input = x.dtype not in REAL_OF
    if real_input and (not forward or x.dtype not in _COMPLEX_OF):
        return False
    if core and cast is None and len(dims) == 1 and dims[0] == len(x.shape) - 1:
        return False  # already what decompose_fft takes
    chain = _Chain(graph, op)
    y, rest = x, list(dims)
    if real_input:
        d = rest.pop()
        last = x.shape[d] // 2 + 1 if onesided else x.shape[d]
        y = chain.along(y, d, "aten._fft_r2c.default", last, _COMPLEX_OF[x.dtype], lambda r: [r],
                        normalization=normalization, onesided=onesided)
    for d in rest:
        y = chain.along(y, d, "aten._fft_c2c.default", y.shape[d], y.dtype, lambda r: [r],
                        normalization=normalization, forward=forward)
    chain.em.replace(y)
    graph.remove_op(op)
    if cast is not None and not cast.outputs[0].consumers:
        graph.remove_op(cast)
    return True


def _inverse_real(graph: Graph, op: Operator, dims: list[int], normalization: int, last: int) -> bool:
    """An inverse real transform over ``dims``: inverse complex ones along all but the last of them,
    then the inverse real one (of ``last`` points) along that."""
    x, out = op.inputs[0], op.outputs[0]
    if x.dtype not in REAL_OF or x.shape is None or out.shape is None or len(op.outputs) != 1 \
            or not _static(x.shape, dims, op):
        return False
    if not 0 < last <= MAX_POINTS:
        op.meta["fft_left"] = True
        op.meta["unsupported_reason"] = f"unsupported: an inverse real transform to {last} points (up to {MAX_POINTS})"
        return False
    chain = _Chain(graph, op)
    y = x
    for d in dims[:-1]:
        y = chain.along(y, d, "aten._fft_c2c.default", y.shape[d], y.dtype, lambda r: [r],
                        normalization=normalization, forward=False)
    y = chain.along(y, dims[-1], "aten._fft_c2r.default", last, REAL_OF[x.dtype], lambda r: [r],
                    normalization=normalization, last_dim_size=last)
    chain.em.replace(y)
    graph.remove_op(op)
    return True


def _move_to_last(graph: Graph, op: Operator) -> bool:
    """A one-dim transform along a dim that is not the last, between two transposes."""
    x, out = op.inputs[0], op.outputs[0]
    if x.shape is None or out.shape is None or len(op.inputs) != 1 or len(op.outputs) != 1:
        return False
    dims = _dims(op.params.get("dim", -1), len(x.shape))
    if dims is None or len(dims) != 1 or dims[0] == len(x.shape) - 1 or not _static(x.shape, dims, op):
        return False
    d = dims[0]
    params = {k: v for k, v in op.params.items() if k != "dim"}
    listed = isinstance(op.params.get("dim"), (list, tuple))
    chain = _Chain(graph, op)
    y = chain.along(x, d, op.type, out.shape[d], out.dtype, (lambda r: [r]) if listed else (lambda r: r), **params)
    chain.em.replace(y)
    graph.remove_op(op)
    return True


def _part(graph: Graph, op: Operator) -> bool:
    """``real`` / ``imag`` of a complex tensor: a select of its real layout."""
    x, out = op.inputs[0], op.outputs[0]
    if x.dtype not in REAL_OF or x.shape is None:
        return False
    if x.producer is not None and x.producer.meta.get("fft_left"):  # a transform that stays: say so
        op.meta["unsupported_reason"] = f"unsupported: reads the spectrum of {x.producer.name}, which is not converted"
        return False
    em = AtenEmitter(graph, op)
    pairs = em.op("aten.view_as_real.default", {"self": x}, shape=list(x.shape) + [2], dtype=REAL_OF[x.dtype],
                  name=f"{op.name}_pairs")
    em.replace(em.op("aten.select.int", {"self": pairs}, shape=list(x.shape), dtype=out.dtype or REAL_OF[x.dtype],
                     name=f"{op.name}_part", dim=len(x.shape), index=_PARTS[op.type]))
    graph.remove_op(op)
    return True


def _rewrite(graph: Graph, op: Operator) -> bool:
    t, p = op.type, op.params
    rank = len(op.inputs[0].shape) if op.inputs and op.inputs[0].shape is not None else None
    if rank is None:
        return False
    if t in _PARTS:
        return _part(graph, op)
    if t in _INVERSE_REAL:
        dims = _dims(p.get("dim", _INVERSE_REAL[t]), rank)
        norm = p.get("norm")
        if p.get("s") is not None or norm not in _NORMS or dims is None or not isinstance(op.inputs[0].shape[dims[-1]], int):
            return False
        return _inverse_real(graph, op, dims, _NORMS[norm][1], 2 * (op.inputs[0].shape[dims[-1]] - 1))
    if t == "aten._fft_c2r.default":
        dims = _dims(p.get("dim"), rank)
        if dims is not None and len(dims) > 1 and isinstance(p.get("last_dim_size"), int):
            return _inverse_real(graph, op, dims, int(p.get("normalization", 0)), p["last_dim_size"])
    if t in _ONE_DIM:
        return _move_to_last(graph, op)
    if t in _TRAINING:
        size_key, default, forward = _TRAINING[t]
        norm = p.get("norm")
        dims = _dims(p.get("dim", default), rank)
        if p.get(size_key) is not None or norm not in _NORMS or dims is None:
            return False
        if t in _ONESIDED and op.inputs[0].dtype in REAL_OF:
            return False
        return _transform(graph, op, dims, _NORMS[norm][0 if forward else 1], forward, t in _ONESIDED, core=False)
    dims = _dims(p.get("dim"), rank)
    if dims is None:
        return False
    if t == "aten._fft_c2c.default":
        return _transform(graph, op, dims, int(p.get("normalization", 0)), bool(p.get("forward", True)))
    return _transform(graph, op, dims, int(p.get("normalization", 0)), True, bool(p.get("onesided", True)))


#: every transform this pass rewrites (what decompose_fft takes stays)
_TRANSFORMS = (*_TRAINING, *_INVERSE_REAL, *_ONE_DIM, "aten._fft_c2c.default", "aten._fft_r2c.default")


@graph_pass("normalize_fft", "FFTs over any dims as one-dim transforms along the last dim; real/imag as selects")
def run(graph: Graph, cx) -> None:
    for op in graph.ops_of_type(*_TRANSFORMS):
        _rewrite(graph, op)
    for op in graph.ops_of_type(*_PARTS):  # after the transforms: what they read is known now
        _rewrite(graph, op)
