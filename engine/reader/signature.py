"""The signature classifier: what every graph input and output is, joined to its payload.

:func:`classify` combines a program's graph signature, its graph (value metadata), its stored
tensors and its root calling convention into a :class:`Signature`:

* :attr:`Signature.inputs` — one :class:`InputInfo` per graph input, in graph order: user
  input, parameter, buffer (``persistent`` or not), tensor constant, custom object, token or
  constant input, with its FQN (``target``), metadata and payload :class:`TensorEntry`;
* :attr:`Signature.outputs` — one :class:`OutputInfo` per graph output: user output, buffer /
  parameter / user-input mutation, loss, gradient or token;
* :attr:`Signature.in_tree` / :attr:`Signature.out_tree` — the decoded pytree specs with leaves
  named after the user inputs / outputs they stand for;
* :attr:`Signature.symbols` — each dynamic-dimension symbol with its range and example hint.

Note: a non-persistent buffer is a BUFFER input (listed in :attr:`Signature.buffers`) whose
payload is stored with the constants.
"""
from __future__ import annotations

import logging
from typing import Any

from engine.errors import PT2FormatError
from engine.reader import schema as S
from engine.reader.pytree import PyTree, parse_treespec
from engine.reader.tensors import TensorEntry, TensorStore

from ..records import record

log = logging.getLogger(__name__)

InputKind = S.InputKind
OutputKind = S.OutputKind


@record
class InputInfo:
    """One graph input. ``name`` is the graph name (``p_conv_weight``, ``x``); ``target`` the
    FQN for parameters / buffers / constants / custom objects; ``persistent`` for buffers;
    ``meta`` the tensor metadata (None for non-tensors); ``value`` the Python value of a
    constant input; ``payload`` the stored tensor (or custom object) entry, if any."""

    kind: S.InputKind
    name: str
    target: str | None = None
    persistent: bool | None = None
    meta: S.TensorMeta | None = None
    value: Any = None
    payload: TensorEntry | None = None
    arg: S.Argument | None = None


@record
class OutputInfo:
    """One graph output: ``name`` the graph value, ``target`` the mutated / differentiated FQN
    or user-input name where the kind has one, ``meta`` the tensor metadata."""

    kind: S.OutputKind
    name: str
    target: str | None = None
    meta: S.TensorMeta | None = None
    arg: S.Argument | None = None


@record
class SymbolInfo:
    """A dynamic-dimension symbol: inclusive range (None = unbounded) and traced example."""

    name: str
    min: int | None = None
    max: int | None = None
    hint: int | float | bool | None = None

    def __str__(self) -> str:
        lo = "-inf" if self.min is None else str(self.min)
        hi = "inf" if self.max is None else str(self.max)
        h = "" if self.hint is None else f", hint {self.hint}"
        return f"{self.name} in [{lo}, {hi}]{h}"


@record
class Signature:
    """The classified signature: user inputs and outputs, their pytrees and the symbolic sizes."""

    inputs: list[InputInfo]
    outputs: list[OutputInfo]
    in_tree: PyTree | None
    out_tree: PyTree | None
    symbols: dict[str, SymbolInfo]

    def _inputs(self, *kinds) -> list[InputInfo]:
        return [i for i in self.inputs if i.kind in kinds]

    @property
    def user_inputs(self) -> list[InputInfo]:
        """Tensor / symbolic user inputs and constant inputs, in call (flattened) order."""
        return self._inputs(InputKind.USER_INPUT, InputKind.CONSTANT_INPUT)

    @property
    def parameters(self) -> list[InputInfo]:
        return self._inputs(InputKind.PARAMETER)

    @property
    def buffers(self) -> list[InputInfo]:
        """Every buffer input, persistent or not (see ``persistent``)."""
        return self._inputs(InputKind.BUFFER)

    @property
    def constants(self) -> list[InputInfo]:
        """Lifted tensor constants."""
        return self._inputs(InputKind.TENSOR_CONSTANT)

    @property
    def custom_objs(self) -> list[InputInfo]:
        return self._inputs(InputKind.CUSTOM_OBJ)

    @property
    def tokens(self) -> list[InputInfo]:
        return self._inputs(InputKind.TOKEN)

    @property
    def user_outputs(self) -> list[OutputInfo]:
        return [o for o in self.outputs if o.kind is OutputKind.USER_OUTPUT]

    @property
    def mutations(self) -> list[OutputInfo]:
        """Buffer, parameter and user-input mutations."""
        kinds = (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION, OutputKind.USER_INPUT_MUTATION)
        return [o for o in self.outputs if o.kind in kinds]

    def input(self, name: str) -> InputInfo | None:
        return next((i for i in self.inputs if i.name == name), None)


_PAYLOAD_KINDS = {InputKind.PARAMETER: ("parameter",), InputKind.BUFFER: ("buffer",),
                  InputKind.TENSOR_CONSTANT: ("constant",), InputKind.CUSTOM_OBJ: ("custom_obj",)}


def classify(program: S.Program, store: TensorStore, member: str) -> Signature:
    """Build the :class:`Signature` of ``program``; ``member`` names the program in errors."""
    g = program.graph
    inputs: list[InputInfo] = []
    for spec in program.signature.input_specs:
        payload = None
        if spec.kind in _PAYLOAD_KINDS:
            payload = store.get(spec.target) if spec.target in store else None
            if payload is None:
                raise PT2FormatError(member, f"{spec.kind.value} '{spec.target}' (graph input "
                                             f"'{spec.name}') has no stored payload")
        meta = g.tensor_values.get(spec.name)
        if meta is None and payload is not None:
            meta = payload.meta
        inputs.append(InputInfo(spec.kind, spec.name, spec.target, spec.persistent, meta,
                                spec.value, payload, spec.arg))
    outputs = [OutputInfo(o.kind, o.name, o.target, g.tensor_values.get(o.name), o.arg)
               for o in program.signature.output_specs]
    in_tree, out_tree = _trees(program, member)
    sig = Signature(inputs, outputs, in_tree, out_tree, symbols(program))
    _bind_leaves(sig)
    return sig


def _trees(program: S.Program, member: str) -> tuple[PyTree | None, PyTree | None]:
    root = next((e for e in program.module_call_graph if e.fqn == ""), None)
    if root is None or root.signature is None:
        return None, None
    nt = program.treespec_namedtuple_fields
    where = f"{member}: module_call_graph[root]"
    return (parse_treespec(root.signature.in_spec, f"{where}.in_spec", nt),
            parse_treespec(root.signature.out_spec, f"{where}.out_spec", nt))


def _bind_leaves(sig: Signature) -> None:
    for tree, items in ((sig.in_tree, sig.user_inputs), (sig.out_tree, sig.user_outputs)):
        if tree is None:
            continue
        leaves = tree.leaves()
        if len(leaves) != len(items):
            log.debug("pytree has %d leaves for %d values; leaves left unnamed", len(leaves), len(items))
            continue
        for leaf, item in zip(leaves, items):
            leaf.name = item.name or (repr(item.value) if getattr(item, "value", None) is not None else None)


def symbols(program: S.Program) -> dict[str, SymbolInfo]:
    """Every symbol of the range constraints or of a symbolic size, with range and hint."""
    out: dict[str, SymbolInfo] = {}
    for name, rc in program.range_constraints.items():
        out[name] = SymbolInfo(name, rc.min_val, rc.max_val)

    def note(v) -> None:
        if isinstance(v, S.SymExpr):
            sym = v.symbol
            if sym is not None:
                info = out.get(sym)
                if info is None:
                    info = out[sym] = SymbolInfo(sym)
                if info.hint is None:
                    info.hint = v.hint

    for meta in program.graph.tensor_values.values():
        if not meta.is_static:
            for s in meta.sizes:
                note(s)
    for v in program.graph.sym_int_values.values():
        note(v)
    return out
