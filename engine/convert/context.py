"""The conversion context handed to every converter rule.

A rule ``fn(ctx, op)`` reads ``op`` (its input operands, ``op.params``, ``op.meta``), emits the
replacement operators with :meth:`ConversionContext.emit` (pnnx vocabulary) or
:meth:`ConversionContext.layer` (ncnn vocabulary), and returns the operand(s) that replace
``op``'s outputs. Emitted operators are inserted just before ``op`` and inherit its provenance
and source metadata, so names and provenance stay traceable with no effort from the rule.

A rule that finds something it cannot express calls :meth:`ConversionContext.unsupported`;
the lowering pass rolls back whatever the rule emitted and records a diagnostic.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from ..diagnostics import Diagnostic, DiagnosticList
from ..ir import Attribute, Graph, Operand, Operator
from ..ncnn.layers import make_params

log = logging.getLogger(__name__)

#: Operator types that carry graph structure rather than computation.
STRUCTURAL = ("pnnx.Input", "pnnx.Output", "pnnx.Attribute")

#: meta keys copied from a source operator onto the operators that replace it
_INHERITED_META = ("source", "module_stack", "aten_op")


class Unsupported(Exception):
    """Raised by a rule (via :meth:`ConversionContext.unsupported`) to refuse an operator."""


class ConversionContext:
    """State shared by the rules of one lowering step. ``options`` is the
    :class:`engine.convert.api.ConvertOptions` of the run."""

    def __init__(self, graph: Graph, *, options: Any = None, diagnostics: DiagnosticList | None = None,
                 stage: str = ""):
        self.graph = graph
        self.options = options
        self.diagnostics = diagnostics if diagnostics is not None else DiagnosticList()
        self.stage = stage
        self.current: Operator | None = None
        self.emitted: list[Operator] = []

    # ------------------------------------------------------------------ emission
    @property
    def name(self) -> str:
        """The current operator's own name (while a rule runs, ``op.name`` carries a temporary
        suffix so the replacement can take the name): use this to name derived things."""
        assert self.current is not None, "ctx.name outside a rule"
        return self.current.meta.get("lowering_name", self.current.name)

    def emit(self, type: str, inputs: Sequence[Operand] = (), *, params: dict | None = None,
             attrs: dict[str, Attribute] | None = None, outputs: int | Sequence[Operand | None] = 1,
             name: str | None = None, input_names: Sequence[str] | None = None,
             dtype: str | None = None, shape: Sequence | None = None) -> Any:
        """Insert an operator before the current one; returns its output operand (or a list when
        ``outputs`` > 1). Output dtype/shape default to the current op's first output
        (override with ``dtype``/``shape`` or set them on the returned operand)."""
        cur = self.current
        assert cur is not None, "emit() outside a rule"
        op_name = self.graph.unique_op_name(name or self.name)
        if outputs == 1 and isinstance(outputs, int):  # made with its dtype and shape
            like = cur.outputs[0] if cur.outputs else None
            if like is not None:
                dtype = like.dtype if dtype is None else dtype
                shape = like.shape if shape is None else shape
            outs = [self.graph.new_operand(op_name, dtype=dtype, shape=shape)]
            dtype = shape = None
        elif isinstance(outputs, int):
            outs = [self.graph.new_operand(f"{op_name}_out{k}") for k in range(outputs)]
        else:
            outs = [o if o is not None else self.graph.new_operand(f"{op_name}_out{k}") for k, o in enumerate(outputs)]
        if dtype is not None:
            outs[0].dtype = dtype
        if shape is not None:
            outs[0].shape = list(shape)
        op = self.graph.add_op(type, op_name, list(inputs), outs, params=params, attrs=attrs,
                               input_names=input_names, provenance=cur.provenance, before=cur, exact=True)
        for k in _INHERITED_META:
            if k in cur.meta:
                op.meta[k] = cur.meta[k]
        if "aten_op" not in op.meta and cur.type.startswith(("aten.", "prims.", "_operator.")):
            op.meta["aten_op"] = cur.type
        self.emitted.append(op)
        return outs[0] if isinstance(outputs, int) and outputs == 1 else outs

    def layer(self, type: str, /, inputs: Sequence[Operand] = (), *, weights: dict[str, Any] | None = None,
              outputs: int | Sequence[Operand | None] = 1, name: str | None = None,
              dtype: str | None = None, shape: Sequence | None = None, **params: Any) -> Any:
        """Emit an ncnn layer with named params (translated to ids by :mod:`engine.ncnn.layers`)
        and weights (numpy arrays or Attributes) in load order."""
        attrs = {k: (v if isinstance(v, Attribute) else Attribute(np.asarray(v))) for k, v in (weights or {}).items()}
        return self.emit(type, inputs, params=make_params(type, **params), attrs=attrs, outputs=outputs,
                         name=name, dtype=dtype, shape=shape)

    def aten(self, type: str, args: dict[str, Any], *, shape: Sequence, dtype: str,
             name: str | None = None) -> Operand:
        """Emit the ATen operator ``type`` (an overload, ``aten.log.default``), which the ATen
        registry then lowers in turn like the program's own operators (a rule that decomposes
        its op into others). ``args`` maps the schema's argument names to operands (tensors;
        lists of them) or values; arguments left out take their schema defaults. Returns its
        output operand, of ``shape`` and ``dtype`` (a pnnx short dtype: ``f32``, ``bool``)."""
        from ..build import schemas

        schema = schemas.get(type)
        if schema is None:
            self.unsupported(f"{type} is not an overload of the ATen schema table")
        unknown = [k for k in args if schema.argument(k) is None]
        if unknown:
            self.unsupported(f"{type} has no argument {unknown[0]!r} "
                             f"(its arguments: {', '.join(a.name for a in schema.arguments)})")
        inputs: list[Operand] = []
        names: list[str] = []
        params: dict[str, Any] = {}
        defaulted: list[str] = []

        def arg(value: Any, path: str) -> Any:  # the builder's form: operands are inputs, "%name" in params
            if isinstance(value, Operand):
                inputs.append(value)
                names.append(path)
                return "%" + value.name
            if isinstance(value, (list, tuple)):
                return [arg(v, f"{path}.{i}") for i, v in enumerate(value)]
            return value

        for a in schema.arguments:
            if a.name in args:
                value = args[a.name]
                p = arg(value, a.name)
                only_operands = isinstance(value, Operand) or (
                    isinstance(value, (list, tuple)) and value and all(isinstance(v, Operand) for v in value))
                if not only_operands:
                    params[a.name] = p
            elif a.has_default:
                params[a.name] = list(a.default) if isinstance(a.default, list) else a.default
                defaulted.append(a.name)
            elif not a.is_out:
                self.unsupported(f"{type}: argument {a.name!r} is required")
        out = self.emit(type, inputs, params=params, input_names=names, name=name, dtype=dtype, shape=shape)
        op = out.producer
        op.meta.pop("aten_op", None)  # an ATen operator of its own, not a piece of the current one
        op.meta["target"] = "torch.ops." + type
        op.meta["defaulted"] = defaulted
        return out

    def constant(self, value: np.ndarray, *, name: str | None = None) -> Operand:
        """Emit a ``pnnx.Attribute`` holding ``value`` and return its operand."""
        arr = np.asarray(value)
        out = self.emit("pnnx.Attribute", [], attrs={"data": Attribute(arr)},
                        name=name or f"{self.name}_const",
                        dtype=Attribute(arr).dtype, shape=list(arr.shape))
        return out

    # ------------------------------------------------------------------ queries
    @staticmethod
    def attribute(operand: Operand) -> Attribute | None:
        """The weight behind a constant operand (a ``pnnx.Attribute`` output), else None."""
        p = operand.producer
        if p is not None and p.type == "pnnx.Attribute" and "data" in p.attrs:
            return p.attrs["data"]
        return None

    def const_value(self, operand: Operand) -> np.ndarray | None:
        """The numpy value of a constant operand (loads the weight), else None."""
        if "const" in operand.meta:
            return np.asarray(operand.meta["const"])
        a = self.attribute(operand)
        return None if a is None else a.data

    def is_const(self, operand: Operand) -> bool:
        return "const" in operand.meta or self.attribute(operand) is not None

    @staticmethod
    def param(op: Operator, name: Any, default: Any = None) -> Any:
        return op.params.get(name, default)

    # ------------------------------------------------------------------ reporting
    def unsupported(self, reason: str) -> "None":
        """Refuse the current operator: ``raise Unsupported(reason)``."""
        if not reason.startswith("unsupported"):
            reason = "unsupported: " + reason
        raise Unsupported(reason)

    def warn(self, reason: str, op: Operator | None = None) -> None:
        target = op or self.current
        if target is not None:
            self.diagnostics.add(Diagnostic.for_operator(target, reason, severity="warning", stage=self.stage))

    def error(self, reason: str, op: Operator | None = None, *, plugin: str = "") -> None:
        """Record ``op`` (default: the current one) as not converted, for ``reason``;
        ``plugin``: the ``file:line`` of the plug-in code at fault."""
        target = op or self.current
        if target is not None:
            target.meta["unsupported"] = reason
            self.diagnostics.add(Diagnostic.for_operator(target, reason, stage=self.stage, plugin=plugin))
