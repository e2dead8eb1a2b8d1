"""Fold values that depend only on dynamic sizes: computed at the largest size, cut to the run-time
size by ncnn (ATen level, after ``fold_constants``).

With a sequence length exported as ``torch.export.Dim("seq", max=N)``, the position ids, causal
masks, rotary tables, relative position buckets... of a model depend only on that length (and on
constants): ``fold_constants`` cannot compute them, and ncnn has no ``arange``. Such a value ``v``
(a *shape value*: made only of constants, sizes — ``sym_size``, ``new_ones(x)`` — and foldable
ops on them) is computed here for every dynamic dim at its largest size, and replaced by that
constant sliced, along each dynamic dim, to the run-time size (``aten.slice.Tensor`` with the
size of a model input as its end: an ncnn ``Crop`` that measures that input — or, for a size no
input has, such as a feature map's ``4*s0`` of an input ``32*s0``, the first run-time tensor
computed before the value's readers that has it as a dim).

That is exact when ``v`` is *prefix-stable*: computed at any smaller size, it is the leading part
of the largest one (``arange(n)``, ``tril``, ``x[:, :n]`` of a table, the relative distances
``j - i``... are; ``arange(n)[::-1]`` or ``n - arange(n)`` are not). This is checked numerically:
``v`` is computed at the smallest, the traced and a middle size too and compared with the cut
largest one; a value that fails (or whose sizes no tensor measures) stays unfolded: its operator
is then lowered as a run-time op and the values it reads are tried in turn (a detection head's
anchors, the grids of every feature map flattened and concatenated, are not prefix-stable; each
grid ``(h, w, 2)`` is, along both dims, and the flattening and ``cat`` run in ncnn).

An ``expand`` to a run-time size first becomes a product with ``ones`` of that size (a shape
value), since ncnn's ``Tile`` needs constant repeats.

Which values are cut: the shape values read by run-time operators. One whose largest form
would be much bigger than the constants it is made of (a causal mask ``(n, n)`` built from two
``arange(n)``: more than :data:`GROWTH` times and more than :data:`SMALL` elements) is not
folded itself; its operator runs in ncnn on the (cut) smaller values it reads instead, unless it
is a creation op (``arange``, ``full``...) that ncnn cannot run. A dynamic dim with no upper
bound cannot be folded and is reported (export with ``Dim(..., max=...)``).
"""
from __future__ import annotations

import logging
import math
import re
from typing import Any, Callable

import numpy as np

from ..diagnostics import Diagnostic
from ..ir import Graph, Operand, Operator, Provenance
from ..ir.vocab import is_aten
from ._aten import AtenEmitter
from .fold_constants import (_SCALAR_PREFIXES, FOLD_BUDGET, FOLDERS, MESHGRIDS, SHAPE_ARGS, SHAPE_ONLY, _Folder,
                             dim_value)
from .manager import graph_pass

log = logging.getLogger(__name__)

#: a shape value is folded when its largest form has at most this many elements ...
SMALL = 1 << 18
#: ... or is at most this many times larger than the constants it is computed from
GROWTH = 16
#: creation ops: their values must be folded (ncnn cannot make them), whatever their size
CREATION = {t for t in FOLDERS if any(k in t for k in ("arange", "full", "zeros", "ones", "eye", "_window",
                                                      "scalar_tensor", "new_empty", "empty"))} | SHAPE_ONLY
_SYMBOL = re.compile(r"[A-Za-z_]\w*")
_OFFSET = re.compile(r"([A-Za-z_]\w*)([+-]\d+)?")


def _symbols(dims) -> set[str]:
    out: set[str] = set()
    for d in dims or []:
        if isinstance(d, str):
            out.update(n for n in _SYMBOL.findall(d) if n not in ("max", "min"))
    return out


def largest_size(graph: Graph, d: Any) -> int | None:
    """A dim's largest value: itself when static, a symbol's upper bound (None when unbounded or
    not a plain symbol, which ncnn could not measure)."""
    if isinstance(d, int):
        return d
    if not _SYMBOL.fullmatch(str(d)):
        return None
    top = graph.meta.get("symbols", {}).get(str(d), {}).get("max")
    return int(top) if top is not None else None


def size_operand(graph: Graph, symbol: str, before: Operator | None = None,
                 runtime: Callable[[Operand], bool] | None = None) -> Operand | None:
    """An operand holding the run-time value of ``symbol`` (a symbol or any size expression): a
    ``sym_size`` of the first model input that has it as a dim, else — given ``before`` — of the
    first tensor computed before that operator that has it and that ``runtime`` accepts (ncnn
    computes it: not a value about to be folded; a feature map ``4*s0`` of an input ``32*s0``);
    one per size, placed right after the tensor's producer."""
    for op in graph.ops_of_type("aten.sym_size.int"):
        if op.meta.get("measures") == symbol:
            measured = op.inputs[0].producer
            if before is None or measured is None or measured.type == "pnnx.Input" or \
                    graph.ops.index(op) < graph.ops.index(before):
                return op.outputs[0]
    for producer in _measurable(graph, before):
        out = producer.outputs[0]
        if producer.type != "pnnx.Input" and runtime is not None and not runtime(out):
            continue
        if out.shape and symbol in out.shape and "const" not in out.meta:
            em = AtenEmitter(graph, producer, after=True)
            opd = em.op("aten.sym_size.int", {"self": out}, shape=[], dtype="i64",
                        name=f"{re.sub(r'[^0-9A-Za-z]+', '_', symbol)}_size", dim=out.shape.index(symbol))
            opd.meta["expr"] = symbol
            opd.producer.meta["measures"] = symbol
            opd.producer.provenance = Provenance((opd.producer.name,), ())
            return opd
    return None


def _measurable(graph: Graph, before: Operator | None):
    """The model inputs, then (given ``before``) the operators before it that compute a tensor."""
    yield from graph.ops_of_type("pnnx.Input")
    if before is None:
        return
    for op in graph.ops:
        if op is before:
            return
        if op.outputs and op.type not in ("pnnx.Input", "pnnx.Attribute") and not op.type.startswith(_SCALAR_PREFIXES):
            yield op


def offset_size_operand(graph: Graph, dim: str, before: Operator | None = None,
                        runtime: Callable[[Operand], bool] | None = None) -> Operand | None:
    """An operand holding the run-time value of ``dim``: a symbol (:func:`size_operand`) or a
    symbol plus or minus a constant (``s3+1``: the size and an ``_operator.add``, made once and
    placed right after the size); given ``before``, also any size expression that a run-time
    tensor computed before that operator has as a dim. None for anything else."""
    if before is not None:
        measured = size_operand(graph, str(dim), before, runtime)
        if measured is not None:
            return measured
    m = _OFFSET.fullmatch(str(dim).replace(" ", ""))
    size = size_operand(graph, m.group(1)) if m else None
    if size is None or not m.group(2):
        return size
    c = int(m.group(2))
    for op in size.consumers:
        if op.type == "_operator.add" and op.meta.get("offset_of") == m.group(1) and op.params.get("b") == c:
            return op.outputs[0]
    em = AtenEmitter(graph, size.producer, after=True)
    out = em.op("_operator.add", [("a", size)], shape=[], dtype="i64",
                name=f"{m.group(1)}_{'plus' if c >= 0 else 'minus'}_{abs(c)}", a=f"%{size.name}", b=c)
    out.meta["expr"] = str(dim)
    out.producer.meta["offset_of"] = m.group(1)
    return out


def cut_constant_to(graph: Graph, em: AtenEmitter, large: np.ndarray, shape: list, *, name: str,
                    dtype: str | None = None, before: Operator | None = None,
                    runtime: Callable[[Operand], bool] | None = None) -> Operand | None:
    """``large`` (a value at the largest sizes) as a constant sliced, along each dim of ``shape``
    that is a symbol (or a symbol plus a constant), to its run-time size (ncnn ``Crop``
    measuring a model input — given ``before``, the operator the cut value is placed before,
    also any tensor computed earlier with that size as a dim that ``runtime`` accepts); None
    when a dynamic dim is not such a size."""
    cuts = []
    for axis, d in enumerate(shape):
        if isinstance(d, int):
            continue
        if offset_size_operand(graph, str(d), before, runtime) is None:
            return None
        cuts.append((axis, str(d)))
    cur = em.constant(np.ascontiguousarray(large), name=name)
    cut_shape = list(large.shape)
    for axis, sym in cuts:
        cut_shape[axis] = sym
        size = offset_size_operand(graph, sym, before, runtime)
        cur = em.op("aten.slice.Tensor", [("self", cur), ("end", size)], shape=list(cut_shape),
                    dtype=dtype or cur.dtype, name=f"{name}_cut", dim=axis, start=0, end=f"%{size.name}", step=1)
    return cur


def symbol_ranges(graph: Graph) -> dict[str, tuple]:
    """``(min, max)`` of each symbolic size of ``graph`` that no given input shape binds."""
    bound = graph.meta.get("symbol_values", {})
    return {n: (s.get("min"), s.get("max")) for n, s in graph.meta.get("symbols", {}).items() if n not in bound}


class _Shapes:
    """Which operands are shape values, and the sizes they take."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.values: set[int] = set()
        self.ranges = symbol_ranges(graph)
        for op in graph.ops:
            if self._computes_shape_value(op):
                self.values.update(id(o) for o in op.outputs)

    def is_value(self, opd: Operand) -> bool:
        p = opd.producer
        return id(opd) in self.values or "const" in opd.meta or (p is not None and p.type == "pnnx.Attribute")

    def _computes_shape_value(self, op: Operator) -> bool:
        if op.type == "pnnx.Attribute":
            return True
        if op.type in MESHGRIDS:  # several outputs: grids of shape values are shape values
            return all(self.is_value(i) for i in op.inputs)
        if not is_aten(op) or len(op.outputs) != 1:
            return False
        if op.type in ("aten.sym_size.int", "aten.sym_numel.default"):
            return True
        if op.type not in FOLDERS and op.type not in SHAPE_ONLY:
            return False
        if op.type in SHAPE_ONLY:
            return True
        shaped = SHAPE_ARGS.get(op.type, ())
        return all(self.is_value(i) or n in shaped for n, i in zip(op.input_names or [""] * len(op.inputs),
                                                                  op.inputs))


class _Evaluator:
    """Shape values computed at given sizes, in a copy of the graph (``fold_constants``'s code)."""

    def __init__(self, graph: Graph, budget: int):
        self.graph, self.budget = graph, budget

    def values(self, names: list[str], binding: dict[str, int], *,
               prepare: Callable[[Graph], None] | None = None) -> dict[str, np.ndarray]:
        """``names``' values at ``binding``; ``prepare(copy)`` may change the copy first."""
        g = self.graph.copy()
        g.meta["symbol_values"] = {**self.graph.meta.get("symbol_values", {}), **binding}
        if prepare is not None:
            prepare(g)
        folder = _Folder(g, self.budget)
        needed: set[int] = set()
        stack = [g.operands[n] for n in names]
        while stack:
            p = stack.pop().producer
            if p is None or id(p) in needed or not is_aten(p):
                continue
            needed.add(id(p))
            stack.extend(p.inputs)
        for op in list(g.ops):
            if id(op) in needed:
                folder.try_fold(op, force=True)
        out = {}
        for n in names:
            p = g.operands[n].producer
            if p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs:
                out[n] = np.asarray(p.attrs["data"].data)
        return out


def _prefix_of(small: np.ndarray, large: np.ndarray) -> bool:
    if small.ndim != large.ndim or any(a > b for a, b in zip(small.shape, large.shape)):
        return False
    cut = large[tuple(slice(0, n) for n in small.shape)]
    return bool(np.array_equal(small, cut, equal_nan=small.dtype.kind == "f"))


class _Folding:
    def __init__(self, graph: Graph, cx):
        self.graph, self.cx = graph, cx
        budget = getattr(getattr(cx, "options", None), "fold_budget", None) or FOLD_BUDGET
        self.shapes = _Shapes(graph)
        self.eval = _Evaluator(graph, budget)
        self.budget = budget
        self.folded = 0

    # -------------------------------------------------------------- which values
    def _dynamic(self, opd: Operand) -> bool:
        return opd.shape is not None and any(not isinstance(d, int) for d in opd.shape)

    def frontier(self) -> list[Operand]:
        """Tensor shape values of dynamic shape read by run-time operators."""
        out, seen = [], set()
        for op in self.graph.ops:
            if id(op.outputs[0]) in self.shapes.values if op.outputs else False:
                continue
            for i in op.inputs:
                p = i.producer
                if (id(i) in self.shapes.values and id(i) not in seen and self._dynamic(i) and p is not None
                        and not p.type.startswith(_SCALAR_PREFIXES) and i.shape != []):
                    seen.add(id(i))
                    out.append(i)
        return out

    # -------------------------------------------------------------- bindings
    def bindings(self, opds: list[Operand]) -> list[dict[str, int]] | None:
        """The largest sizes first, then the others to check against."""
        names = set()
        for o in opds:
            names |= _symbols(o.shape)
        hi, others = {}, [{}, {}, {}]
        symbols = self.graph.meta.get("symbols", {})
        for n in names:
            lo, top = self.shapes.ranges.get(n, (None, None))
            if top is None or lo is None:
                return None
            hint = symbols.get(n, {}).get("hint")
            hi[n] = int(top)
            others[0][n] = int(lo)
            others[1][n] = int(hint) if isinstance(hint, int) and lo <= hint <= top else (lo + top) // 2
            others[2][n] = (lo + top) // 2
        return [hi] + others

    # -------------------------------------------------------------- folding one value
    def evaluate(self, values: list[Operand]) -> list[dict[str, np.ndarray]] | None:
        """Each value at the largest sizes, then at the sizes checked against (one copy of the
        graph per size); None when a size has no upper bound."""
        binds = self.bindings(values)
        if binds is None:
            return None
        out = []
        for b in binds:
            try:
                out.append(self.eval.values([v.name for v in values], b))
            except Exception as e:  # noqa: BLE001 - a value numpy cannot compute stays unfolded
                log.debug("shape values not computable at %s: %s", b, e)
                out.append({})
        return out

    def decide(self, v: Operand, computed: list[dict[str, np.ndarray]]) -> bool | None:
        """True: folded; False: leave it; None: too big (fold what it reads instead)."""
        large = computed[0].get(v.name)
        if large is None:
            return False
        p = v.producer
        if large.size > SMALL and p is not None and p.type not in CREATION:
            hi = self.bindings([v])[0]
            biggest = max([self._largest_size(i, hi) for i in p.inputs] + [1])
            if large.size > GROWTH * biggest:
                return None
        for other in computed[1:]:
            small = other.get(v.name)
            if small is None or not _prefix_of(small, large):
                log.debug("%s is not prefix-stable", v.name)
                return False
        return self._replace(v, large)

    def _largest_size(self, opd: Operand, hi: dict[str, int]) -> int:
        if opd.shape is None:
            return 0
        try:
            return math.prod(dim_value(d, hi) for d in opd.shape)
        except ValueError:
            return 0

    def _unbounded(self, v: Operand) -> None:
        diagnostics = getattr(self.cx, "diagnostics", None)
        p = v.producer
        if diagnostics is None or p is None:
            return
        names = ", ".join(sorted(n for n in _symbols(v.shape) if self.shapes.ranges.get(n, (0, None))[1] is None))
        diagnostics.add(Diagnostic.for_operator(
            p, f"not folded: it depends on the dynamic size {names}, which has no upper bound (export with "
               "torch.export.Dim(..., max=...) so it can be computed at the largest size)",
            severity="warning", stage="fold_dynamic_constants"))

    def _replace(self, v: Operand, large: np.ndarray) -> bool:
        first = min(v.consumers, key=self.graph.ops.index)
        em = AtenEmitter(self.graph, first)
        em.base = f"{v.name}_largest"
        cur = cut_constant_to(self.graph, em, large, v.shape, name=f"{v.name}_largest", dtype=v.dtype, before=first,
                              runtime=lambda o: id(o) not in self.shapes.values)
        if cur is None:
            return False  # only a dim that is a model input's size can be measured by ncnn
        const = cur
        while const.producer.type != "pnnx.Attribute":
            const = const.producer.inputs[0]
        const.producer.provenance = self._provenance(v)
        const.producer.meta["folded_from"] = v.producer.type if v.producer is not None else ""
        self.graph.replace_all_uses(v, cur)
        self.graph.prune([v])
        self.folded += 1
        log.debug("folded %s at its largest size %s", v.name, list(large.shape))
        return True

    def _provenance(self, v: Operand) -> Provenance:
        seen, stack, provs = set(), [v], []
        while stack:
            p = stack.pop().producer
            if p is None or id(p) in seen or p.type == "pnnx.Input":
                continue
            seen.add(id(p))
            if p.type != "pnnx.Attribute" or "folded_from" in p.meta:
                provs.append(p.provenance)
            if id(p.outputs[0]) in self.shapes.values and p.type != "pnnx.Attribute":
                stack.extend(p.inputs)
        return Provenance.merge(provs)

    # -------------------------------------------------------------- driver
    def run(self) -> None:
        pending, done = self.frontier(), set()
        while pending:
            batch = []
            for v in pending:
                if id(v) not in done and v.name in self.graph.operands and v.consumers:
                    done.add(id(v))
                    batch.append(v)
            pending = []
            bounded = [v for v in batch if self.bindings([v]) is not None]
            for v in batch:
                if v not in bounded:
                    self._unbounded(v)
            computed = self.evaluate(bounded) if bounded else None
            for v in bounded:
                # too big, not prefix-stable or not measurable as a whole: run its operator in ncnn
                # on the values it reads, folded themselves where they can be
                if not self.decide(v, computed) and v.producer is not None and v.producer.type not in CREATION:
                    self.shapes.values.discard(id(v))
                    pending += [i for i in v.producer.inputs if id(i) in self.shapes.values and self._dynamic(i)
                                and i.shape != [] and not (i.producer and i.producer.type.startswith(_SCALAR_PREFIXES))]


def expand_by_product(graph: Graph) -> int:
    """``expand(x, size)`` to a run-time size (ncnn's Tile needs constant repeats) becomes
    ``x * ones(s)``, ``s`` the size with 1 wherever ``x`` keeps its own: BinaryOp broadcasting
    makes the same tensor, and ``ones(s)`` is a shape value folded here."""
    count = 0
    for op in graph.ops_of_type("aten.expand.default"):
        x, out = op.inputs[0], op.outputs[0]
        if x.shape is None or out.shape is None or all(isinstance(d, int) for d in out.shape):
            continue
        size = list(op.params.get("size") or [])
        pad = len(out.shape) - len(x.shape)
        ones, inputs = [], []
        for i, d in enumerate(size):
            own = x.shape[i - pad] if i >= pad else 1
            if isinstance(d, str) and d.startswith("%") and own == 1:
                opd = op.named_input(f"size.{i}")
                if opd is None:
                    break
                inputs.append((f"size.{len(ones)}", opd))
                ones.append(d)
            else:
                ones.append(1)
        else:
            if not inputs:
                continue
            em = AtenEmitter(graph, op)
            shape = [out.shape[i] if ones[i] != 1 else 1 for i in range(len(ones))]
            renamed = [(f"size.{i}", opd) for i, (_, opd) in zip([k for k, v in enumerate(ones) if v != 1], inputs)]
            one = em.op("aten.ones.default", renamed, shape=shape, dtype=x.dtype, name=f"{op.name}_ones", size=ones)
            prod = em.op("aten.mul.Tensor", {"self": x, "other": one}, shape=list(out.shape), dtype=out.dtype)
            em.replace(prod)
            graph.prune([out])
            count += 1
    return count


#: elementwise operators that may read a run-time size as a tensor operand (``x / (w - 1)``)
_SIZE_READERS = {"aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor", "aten.rsub.Tensor",
                 "aten.maximum.default", "aten.minimum.default"}
#: Python arithmetic on sizes → the ATen operator computing it on one-element tensors
_SIZE_ARITHMETIC = {"_operator.add": "aten.add.Tensor", "_operator.sub": "aten.sub.Tensor",
                    "_operator.mul": "aten.mul.Tensor", "_operator.truediv": "aten.div.Tensor"}


class _SizesAsTensors:
    """A run-time size read as a number by a float elementwise operator (a coordinate grid
    normalised by ``w - 1``, a box scaled by the feature map's size) is computed by ncnn as a
    one-element tensor: the sum of a ``ones`` vector of the largest size, cut (``Crop``, as
    :func:`cut_constant_to` cuts any folded value) to the size of a tensor that has it as a dim;
    ``+ - * /`` on sizes no tensor has become the same operators on these tensors. Exact while
    the size stays below 2^24."""

    def __init__(self, graph: Graph, shapes: _Shapes):
        self.graph, self.shapes = graph, shapes
        self.made: dict[int, Operand] = {}

    def run(self) -> int:
        count = 0
        for op in list(self.graph.ops_of_type(*_SIZE_READERS)):
            out = op.outputs[0]
            if out.dtype not in ("f32", "f16", "bf16", "f64") or id(out) in self.shapes.values:
                continue
            for k, (name, opd) in enumerate(zip(op.input_names, op.inputs)):
                if opd.shape != [] or "expr" not in opd.meta or opd.producer is None:
                    continue
                t = self.tensor(opd, op)
                if t is None:
                    continue
                self.graph.set_input(op, k, t)
                op.params[name] = f"%{t.name}"
                count += 1
        return count

    def tensor(self, size: Operand, reader: Operator) -> Operand | None:
        """``size`` as a one-element f32 tensor computed before ``reader``; None when not possible."""
        if id(size) in self.made:
            return self.made[id(size)]
        p = size.producer
        em = AtenEmitter(self.graph, reader)
        em.base = f"{size.name}_as_tensor"
        expr = str(size.meta["expr"])
        top = self._largest(expr)
        cut = None if top is None else cut_constant_to(self.graph, em, np.ones(top, np.float32), [expr],
                                                       name=f"{size.name}_ones", dtype="f32", before=reader,
                                                       runtime=lambda o: id(o) not in self.shapes.values)
        if cut is not None:  # a size some tensor computed before the reader has as a dim
            t = em.op("aten.sum.dim_IntList", {"self": cut}, shape=[1], dtype="f32", dim=[0], keepdim=True)
        elif p.type in _SIZE_ARITHMETIC:
            args = []
            for key in ("a", "b"):
                v = p.named_input(key)
                if v is not None:
                    v = self.tensor(v, reader)
                    if v is None:
                        return None
                else:
                    v = p.params.get(key)
                    if not isinstance(v, (int, float)) or isinstance(v, bool):
                        return None
                args.append(v)
            kind = _SIZE_ARITHMETIC[p.type]
            if not isinstance(args[0], Operand):  # a number first: ``c + s``, ``c * s``, ``c - s``
                if p.type == "_operator.sub":
                    args[1], kind = em.op("aten.neg.default", {"self": args[1]}, shape=[1], dtype="f32"), \
                        "aten.add.Tensor"
                elif p.type == "_operator.truediv":  # c / s = c * (1 / s)
                    args[1], kind = em.op("aten.reciprocal.default", {"self": args[1]}, shape=[1], dtype="f32"), \
                        "aten.mul.Tensor"
                args = [args[1], args[0]]
            a, b = args
            inputs = {"self": a} if not isinstance(b, Operand) else {"self": a, "other": b}
            extra = {} if isinstance(b, Operand) else {"other": b}
            t = em.op(kind, inputs, shape=[1], dtype="f32", **extra)
        elif p.type in ("torch.sym_float", "aten.sym_float.default") and p.inputs:
            t = self.tensor(p.inputs[0], reader)
        else:
            return None
        if t is not None:
            t.producer.provenance = p.provenance
            self.made[id(size)] = t
        return t

    def _largest(self, expr: str) -> int | None:
        hi = {}
        for n in _symbols([expr]):
            top = self.shapes.ranges.get(n, (None, None))[1]
            if top is None:
                return None
            hi[n] = int(top)
        try:
            value = dim_value(expr, hi)
        except ValueError:
            return None
        return value if 0 < value <= 1 << 24 else None


@graph_pass("fold_dynamic_constants", "values of dynamic size made of sizes and constants: fold at the largest "
                                      "size, cut to the run-time size")
def run(graph: Graph, cx) -> None:
    if not any(s.get("max") is not None or s.get("min") is not None for s in graph.meta.get("symbols", {}).values()):
        return
    expand_by_product(graph)
    f = _Folding(graph, cx)
    if f.shapes.ranges:
        f.run()
    turned = _SizesAsTensors(graph, f.shapes).run() if f.shapes.ranges else 0
    if f.folded or turned:  # what computed the folded values at their traced size is unread now
        graph.remove_dead(keep=lambda op: op.type == "pnnx.Input")
