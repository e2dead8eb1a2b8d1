"""The PyTorch source of each pnnx operator, for the generated ``_pnnx.py`` (:mod:`.pnnx_py`):
the emitter registry, what an emitter is given (:class:`OpContext`) and returns
(:class:`OpSource`), and the generic families.

One emitter per operator type (or family), registered with :func:`emitter` / :func:`family`,
returns the lines ``__init__`` needs (an ``nn.*`` module built with the operator's params), the
weights it loads from the ``.pnnx.bin`` (:class:`Weight`) and the lines of ``forward``. The
families follow pnnx's own generator: ``F.*``/``torch.*`` → a call with the inputs (named inputs
as keywords, ``input`` first) and the params as keywords; ``Tensor.*`` → a method of the first
input; ``pnnx.Expression`` → infix code. Operators with their own spelling live in
:mod:`.pnnx_py_tensor` (shapes, indexing, reductions, functions with pnnx-only params),
:mod:`.pnnx_py_nn` (``nn.*`` modules, recurrent layers, the fused attention) and
:mod:`.pnnx_py_aten` (operators a partial conversion left at ATen level). Symbolic sizes in
params are read from the inputs at run time.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable

from ..ir import Attribute, Operand, Operator
from ..ir.vocab import is_aten
from ..records import field, record
from .py_expr import ExpressionSourceError, SymbolCode, expression, unparenthesized
from .py_source import call, literal, sequence


@record
class Weight:
    """One tensor loaded from the ``.pnnx.bin``: stored at ``<owner>.<name>``."""

    owner: str  #: ``self.conv2d`` or ``self``
    name: str
    member: str  #: ``<operator>.<attr>``, the zip member
    attr: Attribute
    kind: str = "parameter"  #: ``parameter`` | ``buffer`` | ``constant``
    persistent: bool = True
    shape: tuple | None = None  #: the shape to load it as (default: the attribute's)


@record
class OpSource:
    """The Python source one operator contributes to ``_pnnx.py``: ``__init__`` lines, weights, ``forward`` lines."""

    init: list[str] = field(default_factory=list)
    weights: list[Weight] = field(default_factory=list)
    forward: list[str] = field(default_factory=list)


class OpContext:
    """What an emitter may use: the operator, variable names, its ``self.`` attribute name and
    the run-time spelling of symbolic sizes."""

    def __init__(self, op: Operator, var: Callable[[Operand], str], attr: str, symbols: SymbolCode,
                 is_number: Callable[[Operand], bool], names: Callable[[Any, str], str]):
        self.op = op
        self.var = var
        self.attr = attr
        self.symbols = symbols
        self.is_number = is_number
        self._names = names

    def temp(self, base: str) -> str:
        """A fresh variable for an intermediate value (``temp("v_q")``)."""
        return self._names(("temp", self.op.name, base), base)

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
        if isinstance(v, (list, tuple)):
            for x in v:  # (a loop: cheaper than any() on the few items of sizes and strides)
                if isinstance(x, str):
                    return sequence([self.value(x) for x in v], isinstance(v, list))
        return literal(v)

    def _placeholder(self, name: str) -> Operand | None:
        return next((i for i in self.op.inputs if i.name == name), None)

    def assign(self, expr: str) -> str:
        """``<outputs> = expr``."""
        outs = self.op.outputs
        if len(outs) == 1:
            return f"{self.var(outs[0])} = {expr}"
        if not outs:
            return expr
        return ", ".join(self.var(o) for o in outs) + f" = {expr}"

    def params(self, skip=()) -> list[tuple[str, str]]:
        value = self.value
        if not skip:
            return [(str(k), value(v)) for k, v in self.op.params.items()]
        return [(str(k), value(v)) for k, v in self.op.params.items() if k not in skip]

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


@functools.lru_cache(maxsize=4096)  # a graph repeats a few string params thousands of times
def _symbolic(text: str) -> bool:
    """A string param that is a symbolic size (``s77``, ``2*s77-1``) rather than a word."""
    return bool(_EXPRESSION_CHARS.fullmatch(text)) and bool(_SYMBOL.search(text))


_EXPRESSION_CHARS = re.compile(r"[\w*+\-/%();]+")
_SYMBOL = re.compile(r"(?<![A-Za-z_])[su]\d+")


_EMITTERS: dict[str, Callable[[OpContext], OpSource]] = {}
#: emitters of whole families by type prefix (``nn.``), and of operators left at ATen level (:data:`ATEN`)
_FAMILIES: dict[str, Callable[[OpContext], OpSource]] = {}
ATEN = "<aten>"


def emitter(*types: str):
    """Register an emitter for these operator types."""
    def register(fn):
        for t in types:
            _EMITTERS[t] = fn
        return fn

    return register


def family(prefix: str):
    """Register the emitter of every type starting with ``prefix`` (``nn.``; :data:`ATEN`) that
    has no emitter of its own."""
    def register(fn):
        _FAMILIES[prefix] = fn
        return fn

    return register


def source_of(cx: OpContext) -> OpSource:
    """The source of ``cx.op``; an operator nothing can spell raises ``NotImplementedError``
    when the module runs (the module is still written and loads)."""
    op = cx.op
    fn = _EMITTERS.get(op.type)
    if fn is None:
        key = ATEN if is_aten(op) else op.type.split(".", 1)[0] + "."
        fn = _FAMILIES.get(key, _unsupported)
    try:
        return fn(cx)
    except ExpressionSourceError as e:
        return _unsupported(cx, str(e))


def _unsupported(cx: OpContext, reason: str = "") -> OpSource:
    why = f"{cx.op.type} ({cx.op.name})" + (f": {reason}" if reason else " has no PyTorch spelling")
    return OpSource(forward=[f"raise NotImplementedError({why!r})"])


# ---------------------------------------------------------------------------- families
def function_call(cx: OpContext) -> OpSource:
    """``F.*``/``torch.*``: the function called with the inputs and the params as keywords."""
    pos, kw = cx.inputs()
    return OpSource(forward=[cx.assign(call(cx.op.type, pos, kw + cx.params()))])


def _method(cx: OpContext) -> OpSource:
    pos, kw = cx.inputs(1)
    method = cx.op.type.split(".", 1)[1]
    return OpSource(forward=[cx.assign(call(f"{cx.x}.{method}", pos, kw + cx.params()))])


_FAMILIES.update({"F.": function_call, "torch.": function_call, "Tensor.": _method})


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
    return OpSource(forward=[cx.assign(unparenthesized(code))])
