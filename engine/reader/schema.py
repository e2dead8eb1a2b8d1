"""Typed Python objects for the ExportedProgram JSON (``torch/_export/serde/schema.py``).

This module holds *data only*: the decoder that fills these objects from JSON lives in
``engine.reader.decode``. Every schema version from 1 to 8.20 decodes into these same
classes; fields a version lacks take the documented default.

Conventions
-----------
* An ``Argument`` keeps the JSON union tag (``"as_tensor"``, ``"as_ints"``, ...) and a decoded
  Python value, so nothing is lost and the GUI can show the original form.
* Tensor references are :class:`TensorRef`; symbolic scalars referenced by name are
  :class:`SymRef`; symbolic sizes inside a :class:`TensorMeta` are :class:`SymExpr`.
* ``"Infinity"``, ``"-Infinity"`` and ``"NaN"`` floats are decoded to Python floats.
"""
from __future__ import annotations

import enum
import functools
from typing import Any, Union

from ..records import field, record
from .symexpr import pretty


class ScalarType(enum.IntEnum):
    """Serialized dtype codes (the serde schema's own numbering, not c10's)."""

    UNKNOWN = 0
    BYTE = 1  # uint8
    CHAR = 2  # int8
    SHORT = 3  # int16
    INT = 4  # int32
    LONG = 5  # int64
    HALF = 6  # float16
    FLOAT = 7  # float32
    DOUBLE = 8  # float64
    COMPLEXHALF = 9
    COMPLEXFLOAT = 10
    COMPLEXDOUBLE = 11
    BOOL = 12
    BFLOAT16 = 13
    UINT16 = 28
    FLOAT8E4M3FN = 29
    FLOAT8E5M2 = 30
    FLOAT8E4M3FNUZ = 31
    FLOAT8E5M2FNUZ = 32
    FLOAT8E8M0FNU = 33
    UINT32 = 34
    UINT64 = 35

    @property
    def torch_name(self) -> str:
        """The ``torch.<name>`` spelling, e.g. ``float32``."""
        return _TORCH_NAMES[self]


_TORCH_NAMES = {
    ScalarType.UNKNOWN: "unknown",
    ScalarType.BYTE: "uint8",
    ScalarType.CHAR: "int8",
    ScalarType.SHORT: "int16",
    ScalarType.INT: "int32",
    ScalarType.LONG: "int64",
    ScalarType.HALF: "float16",
    ScalarType.FLOAT: "float32",
    ScalarType.DOUBLE: "float64",
    ScalarType.COMPLEXHALF: "complex32",
    ScalarType.COMPLEXFLOAT: "complex64",
    ScalarType.COMPLEXDOUBLE: "complex128",
    ScalarType.BOOL: "bool",
    ScalarType.BFLOAT16: "bfloat16",
    ScalarType.UINT16: "uint16",
    ScalarType.FLOAT8E4M3FN: "float8_e4m3fn",
    ScalarType.FLOAT8E5M2: "float8_e5m2",
    ScalarType.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    ScalarType.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    ScalarType.FLOAT8E8M0FNU: "float8_e8m0fnu",
    ScalarType.UINT32: "uint32",
    ScalarType.UINT64: "uint64",
}


class MemoryFormat(enum.IntEnum):
    UNKNOWN = 0
    CONTIGUOUS = 1
    CHANNELS_LAST = 2
    CHANNELS_LAST_3D = 3
    PRESERVE = 4


class Layout(enum.IntEnum):
    UNKNOWN = 0
    SPARSE_COO = 1
    SPARSE_CSR = 2
    SPARSE_CSC = 3
    SPARSE_BSR = 4
    SPARSE_BSC = 5
    _MKLDNN = 6
    STRIDED = 7


# --------------------------------------------------------------------------- references
@record(frozen=True)
class TensorRef:
    """A tensor value named in the graph (``{"as_tensor": {"name": ...}}``)."""

    name: str


@record(frozen=True)
class SymRef:
    """A symbolic scalar value named in the graph (``as_sym_int``/``as_sym_bool``/``as_sym_float``
    with ``as_name``). ``kind`` is ``"int"``, ``"bool"`` or ``"float"``."""

    name: str
    kind: str = "int"


@record(frozen=True)
class SymExpr:
    """A symbolic size (``{"as_expr": {"expr_str": ..., "hint": ...}}``).

    ``expr`` is sympy-style text such as ``Symbol('s17', positive=True, integer=True)``;
    ``symbol`` is the bare name when the expression is a single symbol (``s17``), else None;
    ``hint`` is the example value torch traced with (may be None)."""

    expr: str
    hint: int | float | bool | None = None

    @property
    def symbol(self) -> str | None:
        import re

        m = re.fullmatch(r"\s*Symbol\('([A-Za-z_][A-Za-z_0-9]*)'[^)]*\)\s*", self.expr)
        if m:
            return m.group(1)
        if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", self.expr.strip()):
            return self.expr.strip()
        return None

    def __str__(self) -> str:  # readable form used by inspect and the GUI: ``s17``, ``32*s17``
        return self.symbol or pretty(self.expr)


#: A size, stride or offset: a concrete int or a symbolic expression.
SymInt = Union[int, SymExpr]


@record(frozen=True)
class Device:
    """A tensor's device (``cpu``, ``cuda:0``...)."""

    type: str
    index: int | None = None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


@record(frozen=True)
class CustomObjRef:
    """``as_custom_obj``: a script object (e.g. a torchbind class) by name and class."""

    name: str
    class_fqn: str


@record(frozen=True)
class OperatorRef:
    """``as_operator``: an operator passed as an argument (e.g. to a higher-order op)."""

    name: str


@record
class GraphArgument:
    """``as_graph``: a subgraph argument of a higher-order op (cond, map, while_loop...)."""

    name: str
    graph: "Graph"


@record
class Argument:
    """One serialized argument or output: the JSON union tag plus its decoded value.

    Value by tag: ``as_none`` → None; ``as_tensor`` → TensorRef; ``as_tensors`` → list[TensorRef];
    ``as_optional_tensor`` → TensorRef | None; ``as_optional_tensors`` → list[TensorRef | None];
    ``as_int``/``as_float``/``as_string``/``as_bool`` → Python scalar (and ``...s`` → list);
    ``as_sym_int``/``as_sym_bool``/``as_sym_float`` → SymRef or a Python scalar;
    ``as_sym_ints``/... → list of SymRef | scalar; ``as_scalar_type`` → ScalarType;
    ``as_memory_format`` → MemoryFormat; ``as_layout`` → Layout; ``as_device`` → Device;
    ``as_graph`` → GraphArgument; ``as_custom_obj`` → CustomObjRef; ``as_operator`` → OperatorRef;
    ``as_complex`` → complex; ``as_int_lists``/``as_float_lists`` → list[list];
    ``as_nested_tensors`` → nested lists of TensorRef; ``as_string_to_argument`` → dict[str, Argument].
    """

    tag: str
    value: Any = None

    def tensor_names(self) -> list[str]:
        """Names of every tensor this argument refers to, in order."""
        return _names_in(self.value, (TensorRef,))

    def value_names(self) -> list[str]:
        """Names of every graph value (tensor or symbolic scalar) this argument refers to."""
        return _names_in(self.value, (TensorRef, SymRef))


def _names_in(value: Any, kinds: tuple) -> list[str]:
    """Names of the references of ``kinds`` inside a decoded argument value, in order."""
    if isinstance(value, kinds):
        return [value.name]
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, kinds):
            out.append(v.name)
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            stack.extend(reversed([x.value if isinstance(x, Argument) else x for x in v.values()]))
    return out


@record
class NamedArgument:
    """A node input: the ATen schema argument name, its value, and how it was passed
    (``kind`` 1 positional, 2 keyword, None when the schema version did not record it)."""

    name: str
    arg: Argument
    kind: int | None = None


# --------------------------------------------------------------------------- tensors
def is_contiguous(sizes, strides) -> bool:
    """Whether elements of ``sizes`` laid out with ``strides`` sit in row-major order with no
    gaps (the strides of size-1 dims do not matter, as in PyTorch)."""
    expected = 1
    for size, stride in zip(reversed(tuple(sizes)), reversed(tuple(strides))):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


@record
class TensorMeta:
    """Dtype, shape, strides and offset (in elements) of a tensor value or payload."""

    dtype: ScalarType
    sizes: tuple[SymInt, ...]
    strides: tuple[SymInt, ...]
    storage_offset: SymInt = 0
    requires_grad: bool = False
    device: Device = field(default_factory=lambda: Device("cpu"))
    layout: Layout = Layout.STRIDED

    @functools.cached_property
    def is_static(self) -> bool:
        """No size, stride or offset is symbolic (found once: nothing changes a TensorMeta)."""
        if not isinstance(self.storage_offset, int):
            return False
        for s in self.sizes:
            if not isinstance(s, int):
                return False
        for s in self.strides:
            if not isinstance(s, int):
                return False
        return True

    @property
    def is_contiguous(self) -> bool:
        """Row-major without gaps (:func:`is_contiguous`); False when a size or stride is symbolic."""
        return self.is_static and is_contiguous(self.sizes, self.strides)

    def shape_str(self) -> str:
        return "[" + ", ".join(str(s) for s in self.sizes) + "]"


# --------------------------------------------------------------------------- nodes
@record(frozen=True)
class ModuleFrame:
    """One entry of ``nn_module_stack``: key, module path (``layer1.0.conv1``) and class."""

    key: str
    path: str
    type: str


@record(frozen=True)
class SourceLocation:
    """Where in the user's Python source a node was traced from."""

    file: str
    line: int
    function: str = ""
    code: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@record
class NodeMetadata:
    """Parsed node metadata. ``raw`` keeps every original string (including unknown keys)."""

    raw: dict[str, str] = field(default_factory=dict)
    stack_trace: str | None = None
    module_stack: list[ModuleFrame] = field(default_factory=list)
    source_fn_stack: list[tuple[str, str]] = field(default_factory=list)
    torch_fn: tuple[str, str] | None = None
    #: The user-code frame the node came from (the first frame of ``stack_trace``), if any.
    source: SourceLocation | None = None

    @property
    def module_path(self) -> str:
        """Innermost module path (``""`` for the root module or when unknown)."""
        return self.module_stack[-1].path if self.module_stack else ""

    @property
    def module_type(self) -> str:
        return self.module_stack[-1].type if self.module_stack else ""


@record
class Node:
    """One operator call. ``target`` is the serialized target string, e.g.
    ``torch.ops.aten.conv2d.default`` or ``_operator.mul``; :attr:`op` drops ``torch.ops.``."""

    name: str
    target: str
    inputs: list[NamedArgument]
    outputs: list[Argument]
    metadata: NodeMetadata = field(default_factory=NodeMetadata)
    is_hop_single_tensor_return: bool | None = None

    @property
    def op(self) -> str:
        return self.target[len("torch.ops."):] if self.target.startswith("torch.ops.") else self.target

    def input(self, name: str) -> Argument | None:
        """The argument passed for schema parameter ``name`` (None when omitted = default)."""
        for a in self.inputs:
            if a.name == name:
                return a.arg
        return None

    def output_names(self) -> list[str]:
        out: list[str] = []
        for a in self.outputs:
            out.extend(a.value_names())
        return out

    def input_names(self) -> list[str]:
        out: list[str] = []
        for a in self.inputs:
            out.extend(a.arg.value_names())
        return out


@record
class Graph:
    """One graph of the program: its nodes, inputs, outputs and the metadata of every value."""

    inputs: list[Argument]
    outputs: list[Argument]
    nodes: list[Node]
    tensor_values: dict[str, TensorMeta] = field(default_factory=dict)
    sym_int_values: dict[str, SymInt] = field(default_factory=dict)
    sym_bool_values: dict[str, Any] = field(default_factory=dict)
    sym_float_values: dict[str, Any] = field(default_factory=dict)
    is_single_tensor_return: bool = False
    custom_obj_values: dict[str, CustomObjRef] = field(default_factory=dict)


# --------------------------------------------------------------------------- signature
class InputKind(enum.Enum):
    USER_INPUT = "user_input"
    PARAMETER = "parameter"
    BUFFER = "buffer"
    TENSOR_CONSTANT = "tensor_constant"
    CUSTOM_OBJ = "custom_obj"
    TOKEN = "token"
    CONSTANT_INPUT = "constant_input"


class OutputKind(enum.Enum):
    USER_OUTPUT = "user_output"
    LOSS_OUTPUT = "loss_output"
    BUFFER_MUTATION = "buffer_mutation"
    GRADIENT_TO_PARAMETER = "gradient_to_parameter"
    GRADIENT_TO_USER_INPUT = "gradient_to_user_input"
    USER_INPUT_MUTATION = "user_input_mutation"
    PARAMETER_MUTATION = "parameter_mutation"
    TOKEN = "token"


@record
class InputSpec:
    """One graph input. ``name`` is the graph-level name (``p_conv_weight``); ``target`` the
    state-dict / constant FQN (``conv.weight``) or None; ``persistent`` only for buffers;
    ``value`` holds the Python constant of a CONSTANT_INPUT."""

    kind: InputKind
    name: str
    arg: Argument
    target: str | None = None
    persistent: bool | None = None
    value: Any = None


@record
class OutputSpec:
    """What one output of the program's signature is (user output, buffer mutation...)."""

    kind: OutputKind
    name: str
    arg: Argument
    target: str | None = None


@record
class GraphSignature:
    """The program's input and output specs, in graph order."""

    input_specs: list[InputSpec]
    output_specs: list[OutputSpec]


# --------------------------------------------------------------------------- payloads
@record
class PayloadMeta:
    """One entry of a payload config (``data/weights/<model>_weights_config.json`` or the
    constants config): which file under ``data/weights/`` or ``data/constants/`` holds the
    payload, whether it is a parameter, whether it is pickled (tensor subclass, TorchScript or
    opaque object) and the tensor's metadata (None for custom objects)."""

    path_name: str
    is_param: bool = False
    use_pickle: bool = False
    tensor_meta: TensorMeta | None = None


# --------------------------------------------------------------------------- program
@record
class ModuleCallSignature:
    """A submodule call's inputs, outputs and pytree specs (``module_call_graph``)."""

    inputs: list[Argument]
    outputs: list[Argument]
    in_spec: str
    out_spec: str
    forward_arg_names: list[str] | None = None


@record
class ModuleCallEntry:
    """One entry of the module call graph: a submodule's path and its call signature."""

    fqn: str
    signature: ModuleCallSignature | None = None


@record(frozen=True)
class SchemaVersion:
    """The serde schema version a program was written with."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@record
class RangeConstraint:
    """Value range of a symbol; None means unbounded on that side."""

    min_val: int | None
    max_val: int | None


@record
class Program:
    """The decoded ``models/<name>.json`` document (an ExportedProgram without payloads)."""

    graph: Graph
    signature: GraphSignature
    module_call_graph: list[ModuleCallEntry]
    range_constraints: dict[str, RangeConstraint]
    schema_version: SchemaVersion
    opset_version: dict[str, int] = field(default_factory=dict)
    verifiers: list[str] = field(default_factory=list)
    torch_version: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    treespec_namedtuple_fields: dict[str, list[str]] = field(default_factory=dict)
    guards_code: list[str] = field(default_factory=list)

    @property
    def dialect(self) -> str:
        """``TRAINING`` (``export()``), ``ATEN`` (``run_decompositions()``) or as recorded."""
        return self.verifiers[0] if self.verifiers else "ATEN"
