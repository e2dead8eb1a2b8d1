"""PyTorch's decomposition of one ATen node, traced and written out as plug-in code (the
``decompose`` template of :mod:`engine.convert.scaffold`).

:func:`trace_decomposition` calls the node's overload on example tensors of the node's shapes
and dtypes, with its argument values, under ``make_fx`` with the overload's entry of the core
ATen decomposition table (and the entries of any op that comes out and has no built-in rule,
until none is left). The traced graph becomes one ``ctx.aten(...)`` line per ATen call; values
that do not depend on the inputs' data (``scalar_tensor``, ``new_full``...) are computed at
scaffold time and written as ``ctx.constant(np.array(...))``.

This is the only engine module besides verification that imports torch, lazily, at scaffold
time; the plug-in it writes does not.
"""
from __future__ import annotations

import math
import re
from typing import Any

from ..errors import ScaffoldError
from ..ir import Operator
from ..records import field, record
from .scaffold import py_literal

#: ops whose first argument is read only for its dtype/device/shape: a result of these does
#: not depend on the data of that argument
_META_ONLY = {"new_full", "new_zeros", "new_ones", "new_empty", "zeros_like", "ones_like", "full_like",
              "empty_like", "sym_size", "scalar_tensor"}
#: a decomposition may go this many rounds into the ops it produces
_MAX_ROUNDS = 6
#: the most elements a constant written into the plug-in file may have
_MAX_CONSTANT = 64


def decomposable(op_name: str) -> bool:
    """Whether the core ATen decomposition table has an entry for ``op_name`` (imports torch;
    False without it)."""
    try:
        return _overload(op_name) in _core_table()
    except (ImportError, ScaffoldError):
        return False


def _core_table() -> dict:
    from torch._decomp import core_aten_decompositions

    return dict(core_aten_decompositions())


def _overload(op_name: str):
    import torch

    _, name, overload = op_name.removeprefix("torch.ops.").split(".")
    packet = getattr(torch.ops.aten, name, None)
    ov = getattr(packet, overload, None) if packet is not None else None
    if ov is None:
        raise ScaffoldError(op_name, f"torch {torch.__version__} has no such operator")
    return ov


@record
class TracedDecomposition:
    """The decomposition of one node as code lines (see :meth:`body`)."""

    lines: list[str]  #: body lines; ``\x00arg\x00`` stands for the node's tensor argument ``arg``
    traced_for: dict[str, Any]  #: the scalar argument values it was traced for
    shape_sensitive: bool  #: sizes are written into it (the validator then pins exact shapes)
    needs_numpy: bool = False
    ops: list[str] = field(default_factory=list)  #: the ATen overloads it emits, in order
    #: emitted overloads with no built-in rule (nor a decomposition): they need plug-ins of their own
    unconverted: list[str] = field(default_factory=list)

    def body(self, names: dict[str, str]) -> list[str]:
        """The lines, with the node's tensor arguments read into the variables ``names``
        (argument → variable; element ``i`` of a list argument is ``variable[i]``)."""
        def var(m: re.Match) -> str:
            arg, _, index = m.group(1).partition(".")
            return names[arg] + (f"[{index}]" if index else "")

        return [re.sub("\x00([^\x00]*)\x00", var, ln) for ln in self.lines]


# ----------------------------------------------------------------------------- torch ↔ IR values
def _short_dtypes() -> dict[str, str]:
    """torch dtype name (``float32``) → pnnx short dtype (``f32``)."""
    from ..build.values import SHORT_DTYPES

    return {st.torch_name: short for st, short in SHORT_DTYPES.items()}


def _to_torch(value: Any, type_: str):
    """An IR param value as the torch value the overload takes."""
    import torch

    base = type_.rstrip("?")
    if value is None:
        return None
    if base in ("ScalarType", "Layout", "MemoryFormat") and isinstance(value, str):
        return getattr(torch, value)
    if base == "Device" and isinstance(value, str):
        return torch.device(value)
    return value


def _to_ir(value: Any) -> Any:
    """A torch argument value in the IR's spelling (``"float32"``, ``"strided"``, ``"cpu"``)."""
    import torch

    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, (torch.layout, torch.memory_format)):
        return str(value).removeprefix("torch.")
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_to_ir(v) for v in value]
    return value


def _float32s(value: Any) -> Any:
    """Floats at float32 precision, each the shortest decimal that reads back the same."""
    import numpy as np

    if isinstance(value, list):
        return [_float32s(v) for v in value]
    if isinstance(value, float) and math.isfinite(value):
        return float(str(np.float32(value)))
    return value


# ----------------------------------------------------------------------------- tracing
def _example(opd, where: str):
    import torch

    from ..build.values import SHORT_DTYPES

    shape = opd.meta.get("shape_hint") or opd.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise ScaffoldError(where, f"tensor {opd.name} has no static shape to trace the decomposition with")
    names = {short: st.torch_name for st, short in SHORT_DTYPES.items()}
    dtype = getattr(torch, names.get(opd.dtype or "f32", "float32"))
    gen = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=gen).bool()
    return torch.randint(0, 5, tuple(shape), generator=gen).to(dtype)


def _call_of(node: Operator):
    """``(fn, examples, slots)``: ``fn(*tensors)`` calls the node's overload with its arguments,
    ``examples`` are tensors for it, ``slots[i]`` names the argument tensor ``i`` stands for
    (``self``, ``tensors.0``). Also returns the scalar arguments traced for."""
    from ..build import schemas

    schema = schemas.get(node.type)
    overload = _overload(node.type)
    examples, slots, traced_for = [], [], {}
    positional, keywords = [], {}

    def tensor(path: str):
        opd = node.named_input(path)
        if opd is None:
            raise ScaffoldError(node.name, f"argument {path} is not a tensor of the node")
        examples.append(_example(opd, node.name))
        slots.append(path)
        return len(examples) - 1

    for a in schema.arguments:
        if a.is_out:
            continue
        if a.is_tensor:
            if a.type.startswith(("Tensor[", "Tensor?[")):
                count = sum(1 for n in node.input_names if n.startswith(a.name + "."))
                value: Any = ("list", [tensor(f"{a.name}.{i}") for i in range(count)])
            elif node.named_input(a.name) is not None:
                value = ("one", tensor(a.name))
            else:
                value = None
        else:
            raw = node.params.get(a.name)
            if isinstance(raw, str) and raw.startswith("%") or a.name in (node.input_names or ()):
                raise ScaffoldError(node.name, f"argument {a.name} is computed while the model runs; "
                                               "the decomposition can only be traced for constant arguments")
            value = _to_torch(raw, a.type)
            if a.name not in node.meta.get("defaulted", ()):
                traced_for[a.name] = raw
        if a.kwarg_only:
            keywords[a.name] = value
        else:
            positional.append(value)

    def bind(v, tensors):
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "one":
            return tensors[v[1]]
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "list":
            return [tensors[i] for i in v[1]]
        return v

    def fn(*tensors):
        return overload(*[bind(v, tensors) for v in positional], **{k: bind(v, tensors) for k, v in keywords.items()})

    return fn, examples, slots, traced_for


def _registered(key: str) -> bool:
    """Whether a rule (built in, or of a loaded plug-in) converts overload ``key``."""
    from .. import converters  # noqa: F401  (registers the built-in rules)
    from .registry import ATEN

    return key in ATEN


def _supported(target) -> bool:
    return hasattr(target, "_opname") and _registered(f"aten.{target._opname}.{target._overloadname}")


def _trace(node: Operator):
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    core = _core_table()
    root = _overload(node.type)
    if root not in core:
        raise ScaffoldError(node.type, "PyTorch's core ATen decomposition table has no entry for it "
                                       "(use the pnnx or ncnn_custom template)")
    fn, examples, slots, traced_for = _call_of(node)
    table = {root: core[root]}
    for _ in range(_MAX_ROUNDS):
        gm = make_fx(fn, decomposition_table=table, tracing_mode="fake")(*examples)
        more = {n.target for n in gm.graph.nodes if n.op == "call_function" and n.target in core
                and n.target not in table and not _supported(n.target)}
        if not more:
            break
        table.update({t: core[t] for t in more})
    with torch.no_grad():
        values = _run(gm, examples)
    return gm, slots, traced_for, values


def _run(gm, examples) -> dict:
    """Each node's value on the real example tensors."""
    import torch.fx

    values: dict = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            values[n] = super().run_node(n)
            return values[n]

    Recorder(gm).run(*examples)
    return values


# ----------------------------------------------------------------------------- writing
def trace_decomposition(node: Operator) -> TracedDecomposition:
    """The decomposition of ``node`` (an ATen operator of a model's graph) as plug-in lines.
    Raises :class:`ScaffoldError` when torch is missing, the overload has no decomposition, or
    the node's arguments cannot be traced (sizes or scalars computed at run time)."""
    try:
        import torch
    except ImportError:
        raise ScaffoldError(node.type, "the decompose template needs PyTorch installed (it traces "
                                       "PyTorch's decomposition when writing the file)") from None
    gm, slots, traced_for, values = _trace(node)
    shorts = _short_dtypes()
    out_shapes = [list(o.shape) for o in node.outputs if o.shape is not None]
    in_shapes = {slot: list(node.named_input(slot).shape or []) for slot in slots}
    names: dict = {}  # fx node → expression in the generated code
    data: set = set()  # fx nodes that depend on the inputs' data
    lines: list[str] = []
    ops: list[str] = []
    sensitive, needs_np = False, False
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, slot in zip(placeholders, slots):
        names[n] = f"\x00{slot}\x00"
        data.add(n)

    def shape_expr(shape: list[int]) -> str:
        nonlocal sensitive
        if out_shapes and shape == [d for d in out_shapes[0]]:
            return "out.shape"
        for slot, s in in_shapes.items():
            if shape == s:
                return f"\x00{slot}\x00.shape"
        sensitive = True
        return repr(shape)

    def arg_expr(v) -> str:
        nonlocal sensitive
        if isinstance(v, torch.fx.Node):
            return names[v]
        if isinstance(v, (list, tuple)):
            if v and all(isinstance(e, int) for e in v):
                sensitive = True
            return "[" + ", ".join(arg_expr(e) for e in v) + "]"
        return py_literal(_to_ir(v))

    def constant(n) -> str:
        nonlocal needs_np
        value = values[n]
        if not isinstance(value, torch.Tensor):
            return py_literal(value)
        if value.numel() > _MAX_CONSTANT:
            raise ScaffoldError(node.name, f"the decomposition computes a constant of {value.numel()} elements "
                                           f"({n.name}); too large to write into the plug-in")
        needs_np = True
        np_dtype = {"f32": "np.float32", "f64": "np.float32", "f16": "np.float32", "bool": "np.bool_",
                    "i64": "np.int64", "i32": "np.int32"}.get(shorts.get(str(value.dtype).removeprefix("torch."), ""), "np.float32")
        var = _var(n)
        data_ = _float32s(value.tolist()) if value.dtype.is_floating_point else value.tolist()
        lines.append(f"{var} = ctx.constant(np.array({py_literal(data_)}, {np_dtype}))")
        return var

    used: set[str] = set()

    def _var(n) -> str:
        v = n.name
        while v in used or v in ("op", "ctx", "out", "np", "x") or v in {s.partition(".")[0] for s in slots}:
            v += "_"
        used.add(v)
        return v

    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        if n.op == "get_attr":
            continue  # a constant tensor: written where a data-dependent op uses it
        target = n.target
        opname = getattr(target, "_opname", None)
        inputs = [a for a in n.all_input_nodes]
        meta_only = opname in _META_ONLY
        depends = any(a in data for a in (inputs[1:] if meta_only else inputs))
        if not depends:
            continue
        if not hasattr(target, "_schema"):
            raise ScaffoldError(node.name, f"the decomposition calls {target}, not an ATen operator")
        key = f"aten.{opname}.{target._overloadname}"
        val = n.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise ScaffoldError(node.name, f"the decomposition calls {key}, which returns several values; "
                                           "write this rule with the pnnx template")
        for a in inputs:
            if a not in names:
                names[a] = constant(a)
        schema = target._schema
        given = dict(zip([a.name for a in schema.arguments], n.args))
        given.update(n.kwargs)
        from ..build import schemas as table

        shipped = table.get(key)
        args = []
        for a in schema.arguments:
            if a.name not in given:
                continue
            v = given[a.name]
            sa = shipped.argument(a.name) if shipped is not None else None
            if sa is not None and sa.has_default and not isinstance(v, torch.fx.Node) and _to_ir(v) == sa.default:
                continue  # left to its default
            args.append(f'"{a.name}": {arg_expr(v)}')
        var = _var(n)
        dtype = shorts.get(str(val.dtype).removeprefix("torch."), "f32")
        lines.append(f'{var} = ctx.aten("{key}", {{{", ".join(args)}}}, shape={shape_expr(list(val.shape))}, '
                     f'dtype="{dtype}")')
        names[n] = var
        data.add(n)
        ops.append(key)
    (result,) = [n for n in gm.graph.nodes if n.op == "output"]
    outs = result.args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    for o in outs:
        if isinstance(o, torch.fx.Node) and o not in names:
            names[o] = constant(o)
    ret = ", ".join(names[o] if isinstance(o, torch.fx.Node) else py_literal(o) for o in outs)
    lines.append(f"return {ret}" if len(outs) == 1 else f"return [{ret}]")
    unconverted = sorted({k for k in ops if not _registered(k)})
    return TracedDecomposition(lines, traced_for, sensitive, needs_np, ops, unconverted)
