"""PyTorch source of the pnnx operators on tensors that have their own spelling (see
:mod:`.pnnx_py_ops`): reshapes with run-time sizes, ``expand``/``repeat``/``permute`` sizes,
``Tensor.slice`` as indexing (bounds computed at run time read from sizes), ``view_as_complex``
of a contiguous input, ``torch.cat``, ``torch.index_select`` with a constant index,
reductions (``dim=None``, several dims for ``prod``, ``max``/``min`` values), ``unsqueeze`` of
several dims, and functions whose pnnx params PyTorch spells otherwise (``F.pad``, ``F.elu``
with a scale, ``F.avg_pool1d``, ``torch.stft``/``istft`` with a named window, ``torch.einsum``'s
positional equation).
"""
from __future__ import annotations

import re

from ..converters.shape import _split_top
from ..ir import Operand
from .pnnx_py_ops import OpContext, OpSource, emitter, function_call
from .py_expr import expression, unparenthesized
from .py_source import call, literal

INT64_MAX = 2 ** 63 - 1
#: ``end`` values meaning "to the end" (ATen's and pnnx's)
_OPEN_END = (INT64_MAX, 2 ** 31 - 1)


# ---------------------------------------------------------------------------- shapes and indexing
@emitter("Tensor.reshape", "Tensor.view")
def _reshape(cx: OpContext) -> OpSource:
    """Static sizes as they are; one symbolic size as ``-1``; more read from the inputs: by the
    operator's own shape expression (``[-1,16,size(@1,2)//4,3]`` over the tensors it measures,
    which the converter writes when two or more sizes are computed at run time), else through
    the symbols."""
    op = cx.op
    method = op.type.split(".", 1)[1]
    shape = list(op.params.get("shape", []))
    dims = _expression_list(cx, "shape_expr") or cx.symbols.dims(shape)
    if dims is None:
        dims = [str(d) if isinstance(d, int) else str(_hint(op.outputs[0], k)) for k, d in enumerate(shape)]
    if not dims:  # a rank-0 result
        return OpSource(forward=[cx.assign(f"{cx.x}.{method}(())")])
    return OpSource(forward=[cx.assign(f"{cx.x}.{method}({', '.join(dims)})")])


def _expression_list(cx: OpContext, key: str) -> list[str] | None:
    """A list param computed at run time (``shape_expr``, ``size_expr``: ``[-1,floor_divide(size(@1,2),4)]``
    over the operator's inputs, as the ncnn lowering reads it) as source, one item each; None
    when the operator has none."""
    text = cx.op.params.get(key)
    if not text:
        return None
    items = _split_top(str(text).strip()[1:-1])
    return [unparenthesized(expression(e, lambda i: cx.var(cx.op.inputs[i]), numbers=True)) for e in items]


def _hint(opd: Operand, k: int) -> int:
    hint = opd.meta.get("shape_hint") or []
    return int(hint[k]) if k < len(hint) and isinstance(hint[k], int) else -1


@emitter("Tensor.expand", "Tensor.repeat")
def _sizes(cx: OpContext) -> OpSource:
    op = cx.op
    sizes = list(op.params.get("sizes", op.params.get("size", [])))
    shape = op.inputs[0].shape or []
    lead = len(sizes) - len(shape)
    spelled = []
    for k, s in enumerate(sizes):
        if isinstance(s, int):
            spelled.append(str(s))
        elif op.type == "Tensor.expand" and 0 <= k - lead < len(shape) and shape[k - lead] == s:
            spelled.append("-1")  # keeps the input's size
        else:
            spelled.append(cx.symbols.dim(s) or str(_hint(op.outputs[0], k)))
    method = op.type.split(".", 1)[1]
    return OpSource(forward=[cx.assign(f"{cx.x}.{method}({', '.join(spelled)})")])


@emitter("Tensor.permute", "torch.permute")
def _permute(cx: OpContext) -> OpSource:
    dims = ", ".join(str(int(d)) for d in cx.op.params["dims"])
    return OpSource(forward=[cx.assign(f"{cx.x}.permute({dims})")])


@emitter("Tensor.slice")
def _slice(cx: OpContext) -> OpSource:
    """Indexing (``x[:, 1:-1]``). Bounds computed at run time (``start_expr``/``end_expr``, pnnx
    expressions over the input and the tensors it measures) are read from their sizes; the pair
    ``[i, i + n]`` a run-time select or narrow makes is ``x.narrow(dim, i, n)`` (which, as ncnn's
    Crop, counts a negative ``i`` from the end, where ``x[i:i + 1]`` would be empty for ``i = -1``)."""
    op = cx.op
    rank = len(op.inputs[0].shape or [])
    dims = op.params.get("dims", [op.params.get("dim", 0)])
    per = {k: op.params.get(f"{k}s", [op.params.get(k)] * len(dims)) for k in ("start", "end", "step")}
    exprs = {k: op.params.get(f"{k}_expr") for k in ("start", "end")}
    run_time = {k: _bound(cx, e) for k, e in exprs.items() if e}
    length = _run_time_length(exprs["start"], exprs["end"])
    if length is not None:
        d = int(dims[0]) % rank if rank else int(dims[0])
        return OpSource(forward=[cx.assign(f"{cx.x}.narrow({d}, {run_time['start']}, {length})")])
    parts: dict[int, str] = {}
    for i, d in enumerate(dims):
        d = int(d) % rank if rank else int(d)
        start, end, step = per["start"][i], per["end"][i], per["step"][i]
        text = run_time.get("start") or ("" if start in (None, 0) else cx.value(start))
        text += ":" + (run_time.get("end") or ("" if end is None or end in _OPEN_END else cx.value(end)))
        text += "" if step in (None, 1) else f":{cx.value(step)}"
        parts[d] = text
    index = [parts.get(k, ":") for k in range(max(parts) + 1)]
    return OpSource(forward=[cx.assign(f"{cx.x}[{', '.join(index)}]")])


def _run_time_length(start, end) -> int | None:
    """``n`` when the bounds are ``[i, i + n]`` with ``i`` computed at run time (``end_expr`` is
    ``add(<start_expr>,n)``), else None."""
    if not start or not end:
        return None
    m = re.fullmatch(r"add\((.*),(\d+)\)", str(end).replace(" ", ""))
    return int(m.group(2)) if m and m.group(1) == str(start).replace(" ", "") else None


def _bound(cx: OpContext, expr) -> str:
    """A run-time slice bound: its expression over the sizes of the operator's inputs."""
    return unparenthesized(expression(str(expr), lambda i: cx.var(cx.op.inputs[i]), numbers=True))


@emitter("torch.view_as_complex")
def _view_as_complex(cx: OpContext) -> OpSource:
    """``view_as_complex`` takes (…, 2) pairs adjacent in memory: the input is made contiguous
    first (a permute or a slice gives other strides, and elementwise results keep them; a no-op
    otherwise, which the converter drops)."""
    return OpSource(forward=[cx.assign(f"torch.view_as_complex({cx.x}.contiguous())")])


@emitter("torch.cat", "torch.stack")
def _cat(cx: OpContext) -> OpSource:
    tensors = "[" + ", ".join(cx.var(i) for i in cx.op.inputs) + "]"
    return OpSource(forward=[cx.assign(call(cx.op.type, [tensors], cx.params()))])


@emitter("torch.index_select")
def _index_select(cx: OpContext) -> OpSource:
    op = cx.op
    index = op.params["index"]
    if len(op.inputs) > 1:
        return function_call(cx)
    size = (op.inputs[0].shape or [None] * (abs(int(op.params["dim"])) + 1))[int(op.params["dim"])]
    if isinstance(size, int):  # index_select takes no negative index
        index = [int(i) + size if int(i) < 0 else int(i) for i in index]
    idx = f"torch.tensor({literal(list(index))})"
    return OpSource(forward=[cx.assign(call("torch.index_select", [cx.x], [("dim", cx.value(op.params["dim"])),
                                                                             ("index", idx)]))])


# ---------------------------------------------------------------------------- reductions
@emitter("torch.max", "torch.min")
def _max_min(cx: OpContext) -> OpSource:
    op = cx.op
    dim = op.params.get("dim")
    keep = literal(bool(op.params.get("keepdim", False)))
    name = op.type.split(".")[1]
    if isinstance(dim, (list, tuple)) and len(dim) == 1:
        dim = dim[0]
    if dim is None:
        return OpSource(forward=[cx.assign(f"torch.{name}({cx.x})")])
    if isinstance(dim, int) and len(op.outputs) == 2:
        return OpSource(forward=[cx.assign(f"torch.{name}({cx.x}, dim={dim}, keepdim={keep})")])
    return OpSource(forward=[cx.assign(f"torch.a{name}({cx.x}, dim={literal(dim)}, keepdim={keep})")])


@emitter("torch.mean", "torch.sum", "torch.amax", "torch.amin", "torch.norm", "torch.logsumexp", "torch.var",
         "torch.std")
def _reduce(cx: OpContext) -> OpSource:
    """``dim=None`` (every dim) spelled as the list of dims, which every reduction takes."""
    op = cx.op
    params = cx.params()
    if op.params.get("dim", 0) is None:
        rank = len(op.inputs[0].shape or [])
        params = [(k, literal(list(range(rank))) if k == "dim" else v) for k, v in params
                  if k not in ("dim", "keepdim") or op.inputs[0].shape is not None]
    pos, kw = cx.inputs()
    return OpSource(forward=[cx.assign(call(op.type, pos, kw + params))])


@emitter("torch.prod")
def _prod(cx: OpContext) -> OpSource:
    op = cx.op
    dims = op.params.get("dim")
    keep = bool(op.params.get("keepdim", False))
    if dims is None:
        return OpSource(forward=[cx.assign(f"torch.prod({cx.x})")])
    if isinstance(dims, int):
        dims = [dims]
    rank = len(op.inputs[0].shape or [])
    code = cx.x
    for d in sorted((int(d) % rank if rank else int(d) for d in dims), reverse=True):
        code = f"torch.prod({code}, dim={d}, keepdim={keep})"
    return OpSource(forward=[cx.assign(code)])


@emitter("torch.unsqueeze")
def _unsqueeze(cx: OpContext) -> OpSource:
    dims = cx.op.params["dim"]
    if isinstance(dims, int):
        dims = [dims]
    rank = len(cx.op.outputs[0].shape or []) or len(dims)
    code = cx.x + "".join(f".unsqueeze({d})" for d in sorted(int(d) % rank for d in dims))
    return OpSource(forward=[cx.assign(code)])


# ---------------------------------------------------------------------------- functions with pnnx-only params
@emitter("F.pad")
def _pad(cx: OpContext) -> OpSource:
    """No ``value`` outside constant mode; a non-constant pad of ``k`` dims on an input of more than
    ``k + 2`` dims (which PyTorch refuses) runs on the leading dims flattened; an all-zero pad is
    the input itself."""
    op = cx.op
    pad = [int(p) for p in op.params.get("pad", [])]
    if not any(pad):
        return OpSource(forward=[cx.assign(cx.x)])
    mode = op.params.get("mode", "constant")
    skip = ("value",) if mode != "constant" else ()
    rank, k = len(op.inputs[0].shape or []), len(pad) // 2
    if mode == "constant" or rank <= k + 2:
        return OpSource(forward=[cx.assign(call("F.pad", [cx.x], cx.params(skip)))])
    lead = rank - k - 1
    code = call("F.pad", [f"{cx.x}.flatten(0, {lead})"], cx.params(skip))
    return OpSource(forward=[cx.assign(f"{code}.unflatten(0, {cx.x}.shape[:{lead + 1}])")])


@emitter("F.interpolate", "F.upsample")
def _interpolate(cx: OpContext) -> OpSource:
    """A ``size`` computed at run time (``size_expr`` over the input and the tensors it measures,
    which are extra inputs only for ncnn) is read from their sizes."""
    sizes = _expression_list(cx, "size_expr")
    if sizes is None:
        return function_call(cx)
    params = [(k, f"[{', '.join(sizes)}]" if k == "size" else v) for k, v in cx.params(("size_expr",))]
    return OpSource(forward=[cx.assign(call(cx.op.type, [cx.x], params))])


@emitter("F.avg_pool1d")
def _avg_pool1d(cx: OpContext) -> OpSource:
    """``F.avg_pool1d`` has no ``divisor_override``."""
    return OpSource(forward=[cx.assign(call("F.avg_pool1d", [cx.x], cx.params(("divisor_override",))))])


@emitter("F.elu")
def _elu(cx: OpContext) -> OpSource:
    scale = cx.op.params.get("scale", 1.0)
    if scale == 1:
        return OpSource(forward=[cx.assign(call("F.elu", [cx.x], cx.params(("scale",))))])
    alpha = literal(cx.op.params.get("alpha", 1.0))
    return OpSource(forward=[cx.assign(f"torch.ops.aten.elu({cx.x}, {alpha}, {literal(scale)})")])


#: the PyTorch window functions for pnnx's ``window`` names (``ones``: the rectangular window)
_WINDOW_FUNCTIONS = {"hann": "torch.hann_window", "hamming": "torch.hamming_window", "ones": "torch.ones"}


@emitter("torch.stft", "torch.istft")
def _spectral(cx: OpContext) -> OpSource:
    """pnnx names the window (``hann``, ``hamming``, ``ones`` of ``win_length`` samples); PyTorch
    takes the tensor, made here in the signal's real dtype."""
    op = cx.op
    dtype = f"{cx.x}.dtype" if op.type == "torch.stft" else \
        f"(torch.float64 if {cx.x}.dtype == torch.complex128 else torch.float32)"  # (.real would be an op)
    window = f"{_WINDOW_FUNCTIONS[op.params['window']]}({int(op.params['win_length'])}, dtype={dtype})"
    params = [(k, v) for k, v in cx.params(("window",)) if not (k == "pad_mode" and op.type == "torch.istft")]
    params.append(("window", window))
    if op.type == "torch.stft":
        params.append(("return_complex", "True"))
    return OpSource(forward=[cx.assign(call(op.type, [cx.x], params))])


@emitter("torch.einsum")
def _einsum(cx: OpContext) -> OpSource:
    """``torch.einsum`` takes its equation first, positionally."""
    pos, _ = cx.inputs()
    return OpSource(forward=[cx.assign(call("torch.einsum", [literal(cx.op.params["equation"])] + pos))])
