"""The PyTorch source of each pnnx operator, for the generated ``_pnnx.py`` (:mod:`.pnnx_py`).

One emitter per operator type (or family), registered with :func:`emitter`, returns an
:class:`OpSource`: the lines ``__init__`` needs (an ``nn.*`` module built with the operator's
params), the weights it loads from the ``.pnnx.bin`` (:class:`Weight`) and the lines of
``forward``. The families follow pnnx's own generator: ``nn.*`` → ``self.<name>(...)``;
``F.*``/``torch.*`` → a call with the inputs (named inputs as keywords, ``input`` first) and the
params as keywords; ``Tensor.*`` → a method of the first input; ``pnnx.Expression`` → infix code;
``Tensor.slice`` → indexing. Operators the converter left at ATen level (a partial conversion)
become ``torch.ops.aten.<op>.<overload>(...)`` calls with their schema's argument order, so the
module still runs in PyTorch. Symbolic sizes in params are read from the inputs at run time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..build import schemas
from ..converters.shape import _split_top
from ..ir import Attribute, Operand, Operator
from ..ir.vocab import is_aten
from .py_expr import ExpressionSourceError, SymbolCode, expression
from .py_source import TORCH_DTYPES, call, literal

INT64_MAX = 2 ** 63 - 1
#: ``end`` values meaning "to the end" (ATen's and pnnx's)
_OPEN_END = (INT64_MAX, 2 ** 31 - 1)
#: module types whose ``bias`` exists unless disabled; a missing ``@bias`` means none
_BIASED_MODULES = ("nn.Linear", "nn.LayerNorm", "nn.GroupNorm", "nn.Conv1d", "nn.Conv2d", "nn.Conv3d",
                   "nn.ConvTranspose1d", "nn.ConvTranspose2d", "nn.ConvTranspose3d")
#: module attributes that are buffers, not parameters
_BUFFERS = ("running_mean", "running_var")
#: enum-valued ATen schema types and how their values are spelled
_ENUMS = {"ScalarType": lambda v: TORCH_DTYPES.get(v, f"torch.{v}"), "MemoryFormat": lambda v: f"torch.{v}",
          "Layout": lambda v: f"torch.{v}", "Device": lambda v: f"torch.device({v!r})"}


@dataclass
class Weight:
    """One tensor loaded from the ``.pnnx.bin``: stored at ``<owner>.<name>``."""

    owner: str  #: ``self.conv2d`` or ``self``
    name: str
    member: str  #: ``<operator>.<attr>``, the zip member
    attr: Attribute
    kind: str = "parameter"  #: ``parameter`` | ``buffer`` | ``constant``
    persistent: bool = True
    shape: tuple | None = None  #: the shape to load it as (default: the attribute's)


@dataclass
class OpSource:
    init: list[str] = field(default_factory=list)
    weights: list[Weight] = field(default_factory=list)
    forward: list[str] = field(default_factory=list)


class OpContext:
    """What an emitter may use: the operator, variable names, its ``self.`` attribute name and
    the run-time spelling of symbolic sizes."""

    def __init__(self, op: Operator, var: Callable[[Operand], str], attr: str, symbols: SymbolCode,
                 is_number: Callable[[Operand], bool], temp: Callable[[str], str]):
        self.op = op
        self.var = var
        self.attr = attr
        self.symbols = symbols
        self.is_number = is_number
        self.temp = temp  #: a fresh variable for an intermediate value (``temp("v_q")``)

    @property
    def x(self) -> str:
        return self.var(self.op.inputs[0])

    def value(self, v: Any) -> str:
        """A param value as source: symbolic sizes read at run time, ``%name`` placeholders as the
        named input's variable, anything else a literal."""
        if isinstance(v, str):
            if v.startswith("%"):
                opd = self._placeholder(v[1:])
                if opd is not None:
                    return self.var(opd)
            if _symbolic(v):
                code = self.symbols.dim(v)
                if code is not None:
                    return code
            return literal(v)
        if isinstance(v, (list, tuple)) and any(isinstance(x, str) for x in v):
            inner = ", ".join(self.value(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
        return literal(v)

    def _placeholder(self, name: str) -> Operand | None:
        return next((i for i in self.op.inputs if i.name == name), None)

    def assign(self, expr: str) -> str:
        """``<outputs> = expr``."""
        outs = self.op.outputs
        if not outs:
            return expr
        return ", ".join(self.var(o) for o in outs) + f" = {expr}"

    def params(self, skip=()) -> list[tuple[str, str]]:
        return [(str(k), self.value(v)) for k, v in self.op.params.items() if k not in skip]

    def inputs(self, first: int = 0) -> tuple[list[str], list[tuple[str, str]]]:
        """Inputs from ``first`` on as (positional, keyword) arguments: named inputs are keywords
        except a leading ``input``/``self``."""
        op = self.op
        names = op.input_names if len(op.input_names) == len(op.inputs) else [""] * len(op.inputs)
        pos, kw = [], []
        for k in range(first, len(op.inputs)):
            name = names[k]
            if not name or (k == first and name in ("input", "self")):
                pos.append(self.var(op.inputs[k]))
            else:
                kw.append((name, self.var(op.inputs[k])))
        return pos, kw


def _symbolic(text: str) -> bool:
    """A string param that is a symbolic size (``s77``, ``2*s77-1``) rather than a word."""
    import re

    return bool(re.fullmatch(r"[\w*+\-/%();]+", text)) and bool(re.search(r"(?<![A-Za-z_])[su]\d+", text))


_EMITTERS: dict[str, Callable[[OpContext], OpSource]] = {}


def emitter(*types: str):
    def register(fn):
        for t in types:
            _EMITTERS[t] = fn
        return fn

    return register


def source_of(cx: OpContext) -> OpSource:
    """The source of ``cx.op``; an operator nothing can spell raises ``NotImplementedError``
    when the module runs (the module is still written and loads)."""
    op = cx.op
    fn = _EMITTERS.get(op.type)
    if fn is None:
        if is_aten(op):
            fn = _aten
        else:
            fn = _FAMILIES.get(op.type.split(".", 1)[0] + ".", _unsupported)
    try:
        return fn(cx)
    except ExpressionSourceError as e:
        return _unsupported(cx, str(e))


def _unsupported(cx: OpContext, reason: str = "") -> OpSource:
    why = f"{cx.op.type} ({cx.op.name})" + (f": {reason}" if reason else " has no PyTorch spelling")
    return OpSource(forward=[f"raise NotImplementedError({why!r})"])


# ---------------------------------------------------------------------------- families
def _module(cx: OpContext) -> OpSource:
    op = cx.op
    src = OpSource(init=[f"self.{cx.attr} = {call(op.type, [], cx.params())}"])
    src.weights += _module_weights(cx)
    if op.type in _BIASED_MODULES and "weight" in op.attrs and "bias" not in op.attrs and op.params.get("bias") is not False:
        src.init.append(f"self.{cx.attr}.bias = None")
    src.forward.append(cx.assign(call(f"self.{cx.attr}", [cx.var(i) for i in op.inputs])))
    return src


def _module_weights(cx: OpContext) -> list[Weight]:
    out = []
    for key, a in sorted(cx.op.attrs.items()):
        shape = _NORMALIZED_SHAPE.get(cx.op.type, lambda op, k, s: s)(cx.op, key, a.shape)
        out.append(Weight(f"self.{cx.attr}", key, f"{cx.op.name}.{key}", a, "buffer" if key in _BUFFERS else "parameter",
                          shape=tuple(shape)))
    return out


def _normalized(op: Operator, key: str, shape):
    """LayerNorm/RMSNorm affine weights have the module's ``normalized_shape`` (the converter may
    keep them flat)."""
    ns = op.params.get("normalized_shape")
    if key in ("weight", "bias") and isinstance(ns, (list, tuple)) and all(isinstance(d, int) for d in ns):
        return list(ns)
    return shape


_NORMALIZED_SHAPE = {"nn.LayerNorm": _normalized, "nn.RMSNorm": _normalized}


def _function(cx: OpContext) -> OpSource:
    pos, kw = cx.inputs()
    return OpSource(forward=[cx.assign(call(cx.op.type, pos, kw + cx.params()))])


def _method(cx: OpContext) -> OpSource:
    pos, kw = cx.inputs(1)
    method = cx.op.type.split(".", 1)[1]
    return OpSource(forward=[cx.assign(call(f"{cx.x}.{method}", pos, kw + cx.params()))])


_FAMILIES = {"nn.": _module, "F.": _function, "torch.": _function, "Tensor.": _method}


# ---------------------------------------------------------------------------- graph boundary, weights, expressions
@emitter("pnnx.Input", "pnnx.Output")
def _boundary(cx: OpContext) -> OpSource:
    return OpSource()


@emitter("pnnx.Attribute")
def _attribute(cx: OpContext) -> OpSource:
    op = cx.op
    if "data" not in op.attrs:
        return _unsupported(cx, "no data")
    kind = op.params.get("kind", "buffer")
    persistent = bool(op.params.get("persistent", kind == "buffer" and "kind" in op.params))
    w = Weight("self", cx.attr, f"{op.name}.data", op.attrs["data"], kind, persistent)
    return OpSource(weights=[w], forward=[cx.assign(f"self.{cx.attr}")])


@emitter("pnnx.Expression")
def _expression(cx: OpContext) -> OpSource:
    op = cx.op
    numbers = bool(op.inputs) and all(cx.is_number(i) for i in op.inputs)
    code = expression(op.params["expr"], lambda i: cx.var(op.inputs[i]), numbers=numbers)
    return OpSource(forward=[cx.assign(code[1:-1] if code.startswith("(") and _balanced(code[1:-1]) else code)])


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return False
    return depth == 0


# ---------------------------------------------------------------------------- shapes and indexing
@emitter("Tensor.reshape", "Tensor.view")
def _reshape(cx: OpContext) -> OpSource:
    """Static sizes as they are; one symbolic size as ``-1``; more read from the inputs: by the
    operator's own shape expression (``[1,16,size(@1,2),size(@1,3)]``) when it has one, else
    through the symbols."""
    op = cx.op
    method = op.type.split(".", 1)[1]
    shape = list(op.params.get("shape", []))
    expr = op.params.get("shape_expr")
    dims = cx.symbols.dims(shape)
    if dims is None and expr and len(op.inputs) > 1:
        items = _split_top(str(expr).strip()[1:-1])  # [1,16,size(@1,2),...], as the ncnn lowering reads it
        dims = [expression(e, lambda i: cx.var(op.inputs[i]), numbers=True) for e in items]
    if dims is None:
        dims = [str(d) if isinstance(d, int) else str(_hint(op.outputs[0], k)) for k, d in enumerate(shape)]
    return OpSource(forward=[cx.assign(f"{cx.x}.{method}({', '.join(dims)})")])


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
    op = cx.op
    rank = len(op.inputs[0].shape or [])
    dims = op.params.get("dims", [op.params.get("dim", 0)])
    per = {k: op.params.get(f"{k}s", [op.params.get(k)] * len(dims)) for k in ("start", "end", "step")}
    parts: dict[int, str] = {}
    for i, d in enumerate(dims):
        d = int(d) % rank if rank else int(d)
        start, end, step = per["start"][i], per["end"][i], per["step"][i]
        text = ("" if start in (None, 0) else cx.value(start)) + ":"
        text += "" if end is None or end in _OPEN_END else cx.value(end)
        text += "" if step in (None, 1) else f":{cx.value(step)}"
        parts[d] = text
    index = [parts.get(k, ":") for k in range(max(parts) + 1)]
    return OpSource(forward=[cx.assign(f"{cx.x}[{', '.join(index)}]")])


@emitter("torch.cat", "torch.stack")
def _cat(cx: OpContext) -> OpSource:
    tensors = "[" + ", ".join(cx.var(i) for i in cx.op.inputs) + "]"
    return OpSource(forward=[cx.assign(call(cx.op.type, [tensors], cx.params()))])


@emitter("torch.index_select")
def _index_select(cx: OpContext) -> OpSource:
    op = cx.op
    index = op.params["index"]
    if len(op.inputs) > 1:
        return _function(cx)
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


# ---------------------------------------------------------------------------- recurrent modules
@emitter("nn.LSTM", "nn.GRU", "nn.RNN")
def _rnn(cx: OpContext) -> OpSource:
    src = _module(cx)
    op = cx.op
    ins = [cx.var(i) for i in op.inputs]
    outs = [cx.var(o) for o in op.outputs] + ["_"] * (3 - len(op.outputs))
    if op.type == "nn.LSTM":
        state = f", ({ins[1]}, {ins[2]})" if len(ins) >= 3 else ""
        target = f"{outs[0]}, ({outs[1]}, {outs[2]})" if len(op.outputs) == 3 else f"{outs[0]}, _"
    else:
        state = f", {ins[1]}" if len(ins) >= 2 else ""
        target = f"{outs[0]}, {outs[1]}"
    src.forward = [f"{target} = self.{cx.attr}({ins[0]}{state})"]
    return src


@emitter("nn.LSTMCell")
def _lstm_cell(cx: OpContext) -> OpSource:
    src = _module(cx)
    ins = [cx.var(i) for i in cx.op.inputs]
    state = f", ({ins[1]}, {ins[2]})" if len(ins) >= 3 else ""
    src.forward = [cx.assign(f"self.{cx.attr}({ins[0]}{state})")]
    return src


# ---------------------------------------------------------------------------- fused attention
@emitter("nn.MultiheadAttention")
def _attention(cx: OpContext) -> OpSource:
    """The fused attention as the functional code it stands for: q/k/v projections of the
    tokens, ``num_heads`` heads, ``scaled_dot_product_attention`` and the output projection
    (the inputs hold the tokens × features, with size-1 dims around them)."""
    op = cx.op
    p = op.params
    heads, embed = int(p["num_heads"]), int(p["embed_dim"])
    q, k, v = (cx.var(op.named_input(n) or op.inputs[i]) for i, n in enumerate(("query", "key", "value")))
    mask = op.named_input("attn_mask")
    own = f"self.{cx.attr}"
    src = OpSource(init=[f"{own} = nn.Module()"])
    src.weights = [Weight(own, key, f"{op.name}.{key}", a) for key, a in sorted(op.attrs.items())]
    w = lambda n: f"{own}.{n}_weight" + (f", {own}.{n}_bias" if f"{n}_bias" in op.attrs else "")  # noqa: E731
    out = cx.var(op.outputs[0])
    tq, tk, tv = (cx.temp(f"{out}_{n}") for n in "qkv")
    head = embed // heads
    src.forward += [
        f"{tq} = F.linear({q}.reshape(-1, {p['qdim']}), {w('q')}).reshape(-1, {heads}, {head}).transpose(0, 1)",
        f"{tk} = F.linear({k}.reshape(-1, {p['kdim']}), {w('k')}).reshape(-1, {heads}, {head}).transpose(0, 1)",
        f"{tv} = F.linear({v}.reshape(-1, {p['vdim']}), {w('v')}).reshape(-1, {heads}, {head}).transpose(0, 1)",
        f"{out} = F.scaled_dot_product_attention({tq}, {tk}, {tv}"
        + (f", attn_mask={_heads_mask(cx, mask)}" if mask is not None else "")
        + (f", scale={literal(p['scale'])}" if p.get("scale") is not None else "") + ")",
    ]
    dims = cx.symbols.dims(list(op.outputs[0].shape or [-1, p["out_dim"]]))
    shape = ", ".join(dims) if dims is not None else f"-1, {p['out_dim']}"
    src.forward.append(f"{out} = F.linear({out}.transpose(0, 1).reshape(-1, {embed}), {w('out')}).reshape({shape})")
    return src


def _heads_mask(cx: OpContext, mask: Operand) -> str:
    """The mask with its leading dims merged (``(heads or 1, L, S)``), as the heads are dim 0."""
    rank = len(mask.shape or [])
    return f"{cx.var(mask)}.flatten(0, -3)" if rank > 3 else cx.var(mask)


# ---------------------------------------------------------------------------- ATen operators left unconverted
def _aten(cx: OpContext) -> OpSource:
    """``torch.ops.<ns>.<op>.<overload>(...)`` with the schema's argument order (a partial
    conversion keeps running in PyTorch); Python-operator nodes as ``operator.<fn>``."""
    op = cx.op
    if op.type.startswith("_operator."):
        pos, _ = cx.inputs()
        return OpSource(forward=[cx.assign(call("operator." + op.type.split(".", 1)[1], pos))])
    if op.type.startswith(("torch.sym_", "math.")):
        pos, _ = cx.inputs()
        return OpSource(forward=[cx.assign(call(op.type, pos))])
    schema = schemas.get(op.type)
    fn = "torch.ops." + op.type
    if schema is None:
        pos = [cx.var(i) for i in op.inputs]
        return OpSource(forward=[cx.assign(call(fn, pos, cx.params()))])
    args, kwargs, skipped = [], [], False
    for a in schema.arguments:
        code = _aten_argument(cx, a)
        if code is None:  # left at its default
            skipped = True
        elif a.kwarg_only or skipped:
            kwargs.append((a.name, code))
        else:
            args.append(code)
    return OpSource(forward=[cx.assign(call(fn, args, kwargs))])


def _aten_argument(cx: OpContext, a) -> str | None:
    op = cx.op
    named = op.named_input(a.name)
    if named is not None:
        return cx.var(named)
    if a.name not in op.params:
        elems = [(n, i) for n, i in zip(op.input_names, op.inputs) if n.startswith(a.name + ".")]
        if elems:
            elems.sort(key=lambda e: int(e[0].rsplit(".", 1)[1]))
            return "[" + ", ".join(cx.var(i) for _, i in elems) + "]"
        return None
    v = op.params[a.name]
    base = a.type.rstrip("?")
    if base in _ENUMS and isinstance(v, str):
        return _ENUMS[base](v)
    if isinstance(v, list):
        parts = []
        for j, x in enumerate(v):
            elem = op.named_input(f"{a.name}.{j}")
            parts.append(cx.var(elem) if elem is not None else cx.value(x))
        return "[" + ", ".join(parts) + "]"
    return cx.value(v)
