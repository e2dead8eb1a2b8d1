"""Build the ATen-level IR from an ExportedProgram: :func:`build_graph`.

Accepts both dialects: ``torch.export.export()`` output (TRAINING: ``aten.conv2d``,
``aten.batch_norm``, in-place ``relu_``/``add_``...) and ``run_decompositions()`` output (core
ATen: ``aten.convolution``, multi-output ``aten._native_batch_norm_legit_no_training``...).
No weight is read while building: attributes load lazily.

Conventions (converters and the GUI rely on them)
--------------------------------------------------
Operators, in this order:

* one ``pnnx.Input`` per user input, named after the input (``x``), no inputs, one output
  operand of the same name;
* one ``pnnx.Attribute`` per parameter / buffer / lifted tensor constant, named after its graph
  input (``p_conv_weight``), one output operand of that name, one lazy attribute ``data``
  (``ep.tensor(fqn)``; a bfloat16 payload loads as its values in float32, the attribute still
  saying ``bf16`` — every ``bf16`` attribute holds float32 values, folded ones too — and a
  float8 one as its float32 values, saying ``f32``; with ``float32_weights=True`` f16/bf16
  payloads load as float32, the operand and attribute dtype say ``f32`` and
  ``meta["stored_dtype"]`` keeps the original) and
  params ``target`` (the FQN), ``kind`` (``parameter`` | ``buffer`` | ``constant``) and, for
  buffers only, ``persistent``;
* ``pnnx.Unsupported`` for token and custom-object inputs (params ``kind``, ``target``,
  ``class_fqn``; ``meta["unsupported_reason"]``) so that their users still have an input;
* one operator per graph node, in node order: ``type`` is the target without ``torch.ops.``
  (``aten.conv2d.default``, ``_operator.mul``, ``higher_order.cond``), ``name`` the node name;
* one ``pnnx.Output`` per user (or loss) output, named ``pnnx_output_<k>``, with the returned
  value as its single input. A constant output (a returned Python number) has no input and
  params ``value``.

Constant inputs (Python scalars passed to ``forward``) are already inlined by torch into the
nodes that use them; they are listed in ``graph.meta["constant_inputs"]``.

Node inputs and params, walking the schema arguments in order (then any argument the schema
does not know, in node order; unnamed arguments of higher-order ops are ``arg<i>``):

* every graph value an argument refers to — a tensor, a SymInt/SymFloat/SymBool passed by name,
  a custom object — becomes an input operand; ``input_names`` holds the schema argument name, or
  ``<arg>.<i>`` for element ``i`` of a list (``tensors.0``, ``tensors.1`` of ``aten.cat``;
  ``size.0`` of a symbolic ``view`` size);
* every other argument is a param keyed by its schema name. A value that refers only to tensors
  (``self``, ``weight``, cat's ``tensors``) has no param. Anything else keeps the param, with
  each referred value written as the placeholder ``"%<operand name>"``: view sizes
  ``[s0, 3, -1]`` → ``size=["%sym_size_int_2", 3, -1]`` plus input ``size.0``; a SymFloat
  ``other`` → ``other="%truediv"`` plus input ``other``; ``indices=[None, t]`` →
  ``indices=[None, "%t"]`` plus input ``indices.1``. So an optional tensor passed as None is
  absent from the inputs and present as ``None`` in params;
* arguments the node omits are filled from the schema table (:mod:`engine.build.schemas`) and
  their names listed in ``meta["defaulted"]`` (``aten.conv2d`` with 2 args gets ``bias=None``,
  ``stride``, ``padding``, ``dilation``, ``groups``);
* enum-like values are readable strings (see :mod:`engine.build.values`): ``"float32"``,
  ``"channels_last"``, ``"strided"``, ``"cpu"``.

Node outputs: one operand per returned value, flattened in order (a ``Tensor[]`` return gives
one operand per element; ``meta["outputs_per_return"]`` gives the counts when a node returns a
list). Operands take the serialized value names. A ``None`` in a returned tuple gets a
placeholder operand ``<node>_none<i>`` with no dtype/shape and ``meta["none"] = True``, so
``outputs[i]`` always lines up with return ``i``. A constant returned where a value was expected
gets ``meta["const"]``.

Operand dtype and shape come from the graph's ``tensor_values``: pnnx short dtypes (``f32``,
``i64``, ``bf16``...); a symbolic dim is its expression text (``s77``, ``4*s53-8``; see
:mod:`engine.build.symbolic`), and ``meta["shape_hint"]`` then holds the traced example sizes.
SymInt/SymFloat/SymBool values are operands of shape ``[]`` and dtype ``i64``/``f32``/``bool``
with ``meta["expr"]`` (expression text) and ``meta["hint"]``.

In-place ops (schema argument ``Tensor(a!)`` returned as ``Tensor(a!)``, e.g. ``relu_``):
later references to the overwritten value are redirected to the op's output, so the IR is
functional and ``aten.relu_.default`` can be lowered like ``aten.relu.default``.
``meta["inplace"]`` maps the written argument to the value it overwrote;
``meta["inplace_on_view"]`` names the view operator when that value was a view (the base
tensor's other users are not redirected). Mutations of graph inputs (a buffer's ``add_`` in a
train-mode BatchNorm) and the signature's ``buffer_mutation``/``parameter_mutation``/
``user_input_mutation`` outputs are listed in ``graph.meta["mutations"]`` as
``{"kind", "target", "value", "node"}`` and noted on the operator as ``meta["mutation"]``;
those outputs are not ``pnnx.Output`` operators.

Every node operator has ``provenance = Provenance((node name,), (innermost module path,))``
(``""`` for the root module) and ``meta``: ``target`` (the serialized target string),
``source`` (:class:`~engine.reader.schema.SourceLocation` or None), ``module_stack`` (list of
:class:`~engine.reader.schema.ModuleFrame`, outermost first), ``defaulted``. Operators without a
schema in the table (custom ops) have ``meta["no_schema"] = True``. Higher-order ops (``cond``,
``map``, ``while_loop``...) keep their subgraph names as params, the subgraphs themselves in
``meta["subgraphs"]`` and a reason in ``meta["unsupported_reason"]``. The exceptions are the
wrappers that only change a mode around tensor-only code, ``wrap_with_set_grad_enabled``
(``torch.no_grad()``, ``@torch.no_grad()`` on a ``forward``) and ``wrap_with_autocast``
(``torch.autocast(...)``): their subgraph is inlined (its nodes become operators of the graph,
its outputs the values the wrapper returned), as pnnx's ``.pt2`` frontend does. The inlined
operators are marked ``meta["inlined_from"]`` = the wrapper's node name; an enabled autocast is
computed in float32 like everything else (a warning-free difference of precision only).

``graph.meta``: ``name``, ``dialect`` (``TRAINING``/``ATEN``), ``symbols`` (``{name: {"min",
"max", "hint"}}``), ``constant_inputs``, ``mutations``, ``ignored_outputs`` (token and gradient
outputs as ``{"kind", "name", "target"}``).
"""
from __future__ import annotations

import functools
import logging
from typing import Any

from ..collector import no_cyclic_gc
from ..errors import PT2FormatError
from ..ir import Attribute, Graph, IRError, Operand, Operator, Provenance
from ..reader.schema import CustomObjRef, GraphArgument, InputKind, OutputKind, SymRef, TensorRef
from ..reader.tensors import raw_real
from . import schemas
from .symbolic import dim
from .values import scalar, short_dtype

log = logging.getLogger(__name__)

_REFS = (TensorRef, SymRef, CustomObjRef)
#: argument values that are their own param form
_PLAIN = frozenset({int, float, bool, str, type(None)})
#: what a mode wrapper's subgraph may take and return (tensors and symbolic sizes: a
#: ``torch.no_grad()`` block of a model exported with a dynamic length reads that length)
_VALUE_REFS = (TensorRef, SymRef)
_ATTRIBUTE_KINDS = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer",
                    InputKind.TENSOR_CONSTANT: "constant"}
_USER_OUTPUTS = (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)
_MUTATION_OUTPUTS = (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION, OutputKind.USER_INPUT_MUTATION)
_HALF_DTYPES = ("f16", "bf16")
#: higher-order ops that only set a mode around tensor-only code: built inline
_INLINED = ("higher_order.wrap_with_set_grad_enabled", "higher_order.wrap_with_autocast")
#: schema argument types (list and optional forms too) that never hold a tensor: a file naming
#: a tensor there (a stride, a dim) is malformed
_NON_TENSOR_TYPES = frozenset({"int", "SymInt", "float", "bool", "str", "ScalarType", "Layout", "Device",
                               "MemoryFormat"})


def build_graph(ep: Any, *, float32_weights: bool = False) -> Graph:
    """The IR of ExportedProgram ``ep`` in the ATen vocabulary (see the module docstring).

    ``float32_weights`` makes f16/bf16 attributes load as float32. A graph that refers to a
    value before defining it raises :class:`~engine.errors.PT2FormatError` naming the node."""
    with no_cyclic_gc():  # a few objects per node, next to the decoded program: nothing to collect
        return _Builder(ep, float32_weights).build()


@functools.lru_cache(maxsize=None)
def _schema_plan(key: str) -> tuple:
    """``(schema, plan, names)`` of overload ``key`` (``(None, (), frozenset())`` without a
    schema): per schema argument ``(name, never holds a tensor, has a default, default)``, and
    the set of the argument names."""
    schema = schemas.get(key)
    if schema is None:
        return None, (), frozenset()
    plan = tuple((a.name, a.type.split("[")[0].rstrip("?") in _NON_TENSOR_TYPES, a.has_default, a.default)
                 for a in schema.arguments)
    return schema, plan, frozenset(a.name for a in schema.arguments)


def _refers_to_tensor(value: Any) -> bool:
    if isinstance(value, TensorRef):
        return True
    return isinstance(value, list) and any(isinstance(v, TensorRef) for v in value)


def _only_tensor_refs(value: Any) -> bool:
    if isinstance(value, (TensorRef, CustomObjRef)):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, TensorRef) for v in value)


def _stored(ep: Any, fqn: str, shape: list[int]):
    """The stored value of tensor ``fqn``; a file whose stored tensor disagrees with the shape
    its graph declares is refused (a :class:`PT2FormatError` naming the tensor)."""
    value = ep.tensor(fqn)
    if list(getattr(value, "shape", ())) != list(shape):
        raise PT2FormatError(fqn, f"stored with shape {list(value.shape)} but the graph declares {list(shape)}")
    return value


def _hint(size: Any) -> Any:
    return size if isinstance(size, int) else getattr(size, "hint", None)


class _Builder:
    def __init__(self, ep: Any, float32_weights: bool):
        self.ep = ep
        self.src = ep.graph
        self.float32 = float32_weights
        self.g = Graph()
        #: serialized value name → the operand that currently holds it (in-place redirects)
        self.values: dict[str, Operand] = {}
        #: graph-input value name → (input kind, FQN) for mutation notes
        self.input_targets: dict[str, tuple[str, str | None]] = {}
        self.mutations: list[dict] = []
        #: the wrapper node whose subgraph is being inlined (None at the top level)
        self.inline_prefix: str | None = None
        #: id of a TensorMeta of the program (alive while building) → :meth:`_operand_form`
        self._forms: dict[int, tuple] = {}
        #: id of a TensorMeta of the program or its payloads → :meth:`_weight_form`
        self._weight_forms: dict[int, tuple] = {}

    @property
    def exact(self) -> bool:
        """Operands take exactly their serialized names (an inlined subgraph's may be taken)."""
        return self.inline_prefix is None

    # ------------------------------------------------------------------ top level
    def build(self) -> Graph:
        g = self.g
        sig = self.ep.signature
        g.meta.update(name=self.ep.name, dialect=self.ep.dialect,
                      symbols={n: {"min": s.min, "max": s.max, "hint": s.hint} for n, s in sig.symbols.items()},
                      constant_inputs={}, mutations=self.mutations, ignored_outputs=[])
        for info in sig.inputs:
            self._graph_input(info)
        for node in self.ep.nodes:
            self._node(node)
        user_outputs = 0
        for info in sig.outputs:
            if info.kind in _USER_OUTPUTS:
                self._graph_output(f"pnnx_output_{user_outputs}", info)
                user_outputs += 1
            elif info.kind in _MUTATION_OUTPUTS:
                opd = self.values.get(info.name)
                producer = opd.producer if opd is not None else None
                if producer is not None and producer.type in ("pnnx.Input", "pnnx.Attribute"):
                    producer = None
                self._note_mutation(info.kind.value, info.target, opd.name if opd else info.name, producer)
            else:
                g.meta["ignored_outputs"].append({"kind": info.kind.value, "name": info.name, "target": info.target})
        return g

    # ------------------------------------------------------------------ operands
    def _define(self, name: str) -> Operand:
        """Create the operand of serialized value ``name`` with its dtype/shape."""
        src = self.src
        tm = src.tensor_values.get(name)
        try:
            if tm is not None:
                dtype, shape, hint, strides = self._operand_form(tm)
                opd = self.g.new_operand(name, dtype=dtype, shape=shape, exact=self.exact)
                if hint is not None:
                    opd.meta["shape_hint"] = list(hint)
                elif strides is not None:  # what as_strided would read differs
                    opd.meta["strides"] = list(strides)
            else:
                opd = self.g.new_operand(name, exact=self.exact)
                for table, dtype in ((src.sym_int_values, "i64"), (src.sym_float_values, "f32"),
                                     (src.sym_bool_values, "bool")):
                    if name in table:
                        value = table[name]
                        opd.dtype, opd.shape = dtype, []
                        opd.meta["expr"] = dim(value) if not isinstance(value, (bool, float)) else value
                        opd.meta["hint"] = value if isinstance(value, (bool, int, float)) else value.hint
                        break
        except IRError:
            raise PT2FormatError(f"value {name}", "defined more than once in the graph") from None
        self.values[name] = opd
        return opd

    def _operand_form(self, tm: Any) -> tuple:
        """``(dtype, shape, shape hint or None, strides or None)`` of the operands of tensor meta
        ``tm``: the hint when a dim is symbolic, the strides when a static view is not
        contiguous. Made once per meta object (the reader shares equal metas)."""
        form = self._forms.get(id(tm))
        if form is None:
            shape = tuple([dim(s) for s in tm.sizes])
            static = all(isinstance(d, int) for d in shape)
            hint = None if static else tuple([_hint(s) for s in tm.sizes])
            strides = tuple(tm.strides) if static and tm.is_static and not tm.is_contiguous else None
            form = self._forms[id(tm)] = (short_dtype(tm.dtype), shape, hint, strides)
        return form

    def _use(self, name: str, where: str) -> Operand:
        opd = self.values.get(name)
        if opd is None:
            raise PT2FormatError(where, f"uses {name!r}, which is not defined before it")
        return opd

    # ------------------------------------------------------------------ graph inputs
    def _graph_input(self, info: Any) -> None:
        kind, name = info.kind, info.name
        if kind is InputKind.CONSTANT_INPUT:
            self.g.meta["constant_inputs"][name] = info.value
            return
        self.input_targets[name] = (kind.value, info.target)
        out = self._define(name)
        if kind is InputKind.USER_INPUT:
            self.g.add_op("pnnx.Input", name, [], [out], provenance=Provenance((name,), ()))
        elif (attribute_kind := _ATTRIBUTE_KINDS.get(kind)) is not None:
            params: dict[str, Any] = {"target": info.target, "kind": attribute_kind}
            if kind is InputKind.BUFFER:
                params["persistent"] = bool(info.persistent) if info.persistent is not None else True
            module = (info.target or "").rpartition(".")[0]
            op = self.g.add_op("pnnx.Attribute", name, [], [out], params=params,
                               attrs={"data": self._attribute(info, out)},
                               provenance=Provenance((name,), (module,)))
            if out.dtype != op.attrs["data"].dtype:
                op.meta["stored_dtype"] = out.dtype
                out.dtype = op.attrs["data"].dtype
        else:  # token, custom object
            ref = info.arg.value if info.arg is not None else None
            op = self.g.add_op("pnnx.Unsupported", name, [], [out], provenance=Provenance((name,), ()),
                               params={"kind": kind.value, "target": info.target,
                                       "class_fqn": getattr(ref, "class_fqn", None)})
            op.meta["unsupported_reason"] = f"{kind.value} input {name!r} cannot be converted"

    def _attribute(self, info: Any, out: Operand) -> Attribute:
        meta = info.meta or self.src.tensor_values.get(info.name)
        if meta is not None:
            shape, dtype, raw = self._weight_form(meta)
        else:
            shape, dtype, raw = [int(_hint(s)) for s in out.shape or []], out.dtype, False
        ep, fqn = self.ep, info.target or info.name
        if raw or self.float32 and dtype in _HALF_DTYPES:  # numpy holds no bfloat16 or float8: their values
            stype = meta.dtype

            def load():
                from ..reader.tensors import to_float32

                return to_float32(_stored(ep, fqn, shape), stype)

            return Attribute(loader=load, shape=shape, dtype="bf16" if dtype == "bf16" and not self.float32 else "f32")
        return Attribute(loader=lambda: _stored(ep, fqn, shape), shape=shape, dtype=dtype or "unknown")

    def _weight_form(self, meta: Any) -> tuple:
        """``(shape, dtype, held as raw bits)`` of a stored tensor of meta ``meta``, made once
        per meta object."""
        form = self._weight_forms.get(id(meta))
        if form is None:
            form = self._weight_forms[id(meta)] = (tuple([int(_hint(s)) for s in meta.sizes]),
                                                   short_dtype(meta.dtype), raw_real(meta.dtype))
        return form

    # ------------------------------------------------------------------ graph outputs
    def _graph_output(self, op_name: str, info: Any) -> None:
        name = info.name
        if name and name in self.values:
            self.g.add_op("pnnx.Output", op_name, [self.values[name]], [], provenance=Provenance((name,), ()))
        else:  # a returned Python constant
            value = scalar(info.arg.value) if info.arg is not None else None
            self.g.add_op("pnnx.Output", op_name, [], [], params={"value": value})

    def _note_mutation(self, kind: str, target: str | None, value: str, op: Operator | None) -> None:
        entry = {"kind": kind, "target": target, "value": value, "node": op.name if op is not None else None}
        self.mutations.append(entry)
        if op is not None:
            op.meta["mutation"] = entry

    # ------------------------------------------------------------------ nodes
    def _node(self, node: Any) -> None:
        key = node.op
        if key in _INLINED and self._inline(node):
            return
        schema, plan, known = _schema_plan(key)
        call = _Call(self, f"node {node.name}")
        given = [(a.name or f"arg{i}", a.arg) for i, a in enumerate(node.inputs)]
        if schema is not None:
            by_name = dict(given)
            for name, tensorless, has_default, default in plan:
                arg = by_name.get(name)
                if arg is not None:
                    if tensorless and arg.value.__class__ not in _PLAIN and _refers_to_tensor(arg.value):
                        raise PT2FormatError(f"node {node.name}", f"{key}: argument {name!r} of type "
                                                                  f"{schema.argument(name).type} refers to a tensor")
                    call.add(name, arg.value)
                elif has_default:  # a copy: converters may edit params in place
                    call.params[name] = list(default) if isinstance(default, list) else default
                    call.defaulted.append(name)
            given = [(n, a) for n, a in given if n not in known]
        for name, arg in given:
            call.add(name, arg.value)
        outputs, per_return = self._outputs(node)
        op = self.g.add_op(key, node.name, call.inputs, outputs, params=call.params, input_names=call.names,
                           provenance=Provenance((node.name,), (node.metadata.module_path,)))
        if self.inline_prefix is not None:
            op.provenance = Provenance((op.name,), (node.metadata.module_path,))
            op.meta["inlined_from"] = self.inline_prefix
        meta = op.meta
        meta["target"] = node.target
        meta["source"] = node.metadata.source
        meta["module_stack"] = node.metadata.module_stack
        meta["defaulted"] = call.defaulted
        if per_return.count(1) != len(per_return):
            meta["outputs_per_return"] = per_return
        if call.subgraphs or key.startswith("higher_order."):
            meta["subgraphs"] = call.subgraphs
            names = ", ".join(g.name for g in call.subgraphs.values()) or "none"
            meta["unsupported_reason"] = (f"higher-order op {key.rpartition('.')[2]} (subgraphs {names}) "
                                          "is not supported yet")
        elif schema is None and not key.startswith("_operator."):
            meta["no_schema"] = True
        if schema is not None and schema.is_mutable:
            self._inplace(op, schema, per_return)

    def _inline(self, node: Any) -> bool:
        """Build the subgraph of a mode wrapper (:data:`_INLINED`) in place of the wrapper; False
        (build it as an unsupported higher-order op) when the wrapper is not the expected form."""
        args = [a.arg for a in node.inputs]
        at = next((i for i, a in enumerate(args) if isinstance(a.value, GraphArgument)), None)
        if at is None:
            return False
        sub = args[at].value.graph
        operands = [a.value for a in args[at + 1:]]
        if len(operands) != len(sub.inputs) or not all(isinstance(v, _VALUE_REFS) for v in operands):
            return False
        outer_src, outer_values, outer_prefix = self.src, self.values, self.inline_prefix
        inner = {}
        for arg, ref in zip(sub.inputs, operands):
            if not isinstance(arg.value, _VALUE_REFS):
                return False
            inner[arg.value.name] = self._use(ref.name, f"node {node.name}")
        self.src, self.values, self.inline_prefix = sub, inner, node.name
        try:
            for n in sub.nodes:
                self._node(n)
            results = [self._use(o.value.name, f"node {node.name}") if isinstance(o.value, _VALUE_REFS) else None
                       for o in sub.outputs]
        finally:
            self.src, self.values, self.inline_prefix = outer_src, outer_values, outer_prefix
        outs = [item for arg in node.outputs for item in (arg.value if isinstance(arg.value, list) else [arg.value])]
        if len(outs) != len(results) or any(r is None or not isinstance(o, _VALUE_REFS) for o, r in zip(outs, results)):
            raise PT2FormatError(f"node {node.name}", f"{node.op} returns {len(outs)} values for the "
                                                      f"{len(results)} values its subgraph returns")
        for o, r in zip(outs, results):
            self.values[o.name] = r
        return True

    def _outputs(self, node: Any) -> tuple[list[Operand], list[int]]:
        outputs: list[Operand] = []
        per_return: list[int] = []
        for arg in node.outputs:
            value = arg.value
            items = value if isinstance(value, list) else [value]
            for item in items:
                outputs.append(self._output_operand(node.name, item, len(outputs)))
            per_return.append(len(items) if isinstance(value, list) else 1)
        return outputs, per_return

    def _output_operand(self, node_name: str, item: Any, index: int) -> Operand:
        if isinstance(item, (TensorRef, SymRef)):
            return self._define(item.name)
        opd = self.g.new_operand(f"{node_name}_none{index}")
        if item is None:
            opd.meta["none"] = True
        else:
            opd.meta["const"] = scalar(item)
        return opd

    def _inplace(self, op: Operator, schema: schemas.OpSchema, per_return: list[int]) -> None:
        """Redirect later uses of values this op overwrites to its outputs; note mutations."""
        written: dict[str, str] = {}
        for sarg, ret in schema.written_arguments():
            idx = op.input_names.index(sarg.name) if sarg.name in op.input_names else None
            if idx is None:
                continue
            old = op.inputs[idx]
            written[sarg.name] = old.name
            if ret is not None and ret < len(per_return) and per_return[ret] == 1:
                self.values[old.name] = op.outputs[sum(per_return[:ret])]
            source = self.input_targets.get(old.name)
            if source is not None:
                self._note_mutation(f"{source[0]}_mutation", source[1], old.name, op)
            producer = old.producer
            if producer is not None and _is_view(producer):
                op.meta["inplace_on_view"] = producer.name
        op.meta["inplace"] = written


class _Call:
    """The inputs, input names and params of one node's operator, filled argument by argument."""

    def __init__(self, builder: _Builder, where: str):
        self.builder = builder
        self.where = where
        self.inputs: list[Operand] = []
        self.names: list[str] = []
        self.params: dict[str, Any] = {}
        self.defaulted: list[str] = []
        self.subgraphs: dict[str, GraphArgument] = {}

    def add(self, name: str, value: Any) -> None:
        cls = value.__class__
        if cls is TensorRef:  # the common cases, as _param makes them: an input and no param,
            self._input(value, name)
            return
        if cls in _PLAIN:  # or a param and no input
            self.params[name] = value
            return
        if isinstance(value, GraphArgument):
            self.subgraphs[name] = value
            self.params[name] = value.name
            return
        param = self._param(value, name)
        if not _only_tensor_refs(value):
            self.params[name] = param

    def _input(self, ref: Any, path: str) -> Operand:
        """The operand ``ref`` names, added as an input called ``path``."""
        opd = self.builder._use(ref.name, self.where)
        self.inputs.append(opd)
        self.names.append(path)
        return opd

    def _param(self, value: Any, path: str) -> Any:
        """The param form of a value; every graph value it refers to becomes an input."""
        cls = value.__class__
        if cls in _PLAIN:  # as scalar() leaves it
            return value
        if cls is list and all(v.__class__ in _PLAIN for v in value):
            return list(value)
        if isinstance(value, _REFS):
            return "%" + self._input(value, path).name
        if isinstance(value, (list, tuple)):
            return [self._param(v, f"{path}.{i}") for i, v in enumerate(value)]
        if isinstance(value, dict):
            return [[k, self._param(getattr(v, "value", v), f"{path}.{k}")] for k, v in value.items()]
        return scalar(value)


def _is_view(op: Operator) -> bool:
    schema = schemas.get(op.type)
    if schema is None or not schema.returns:
        return False
    alias = schema.returns[0].alias
    return alias is not None and not alias.endswith("!")
