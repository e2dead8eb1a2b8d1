"""PyTorch source of the operators a partial conversion left at ATen level (see
:mod:`.pnnx_py_ops`): ``torch.ops.<ns>.<op>.<overload>(...)`` with the schema's argument order,
enum params as torch objects, so the generated module still runs in PyTorch; Python-operator
nodes as ``operator.<fn>``.
"""
from __future__ import annotations

from ..build import schemas
from .pnnx_py_ops import ATEN, OpContext, OpSource, family
from .py_source import TORCH_DTYPES, call

#: enum-valued ATen schema types and how their values are spelled
_ENUMS = {"ScalarType": lambda v: TORCH_DTYPES.get(v, f"torch.{v}"), "MemoryFormat": lambda v: f"torch.{v}",
          "Layout": lambda v: f"torch.{v}", "Device": lambda v: f"torch.device({v!r})"}


@family(ATEN)
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
