"""Decoder from the ExportedProgram JSON (``models/<name>.json``) to :mod:`engine.reader.schema`.

Accepts schema versions 1 through 8.x (torch 2.1 → 2.14) and their documented differences:

* 1–2: ``schema_version`` is a bare int; ``dialect`` instead of ``verifiers``; 1 has the old
  dict-style graph signature, ``call_spec`` and ``tensor_values`` wrapped as ``{"meta": ...}``;
  optional tensors and ``as_none`` use ``[]``; integer storage offsets and hints.
* 5: buffers get ``persistent``; custom objects (``class_fqn``).
* 7: ``dialect`` → ``verifiers`` and ``torch_version``.
* 8: ``as_none`` becomes ``true``; SymFloat; nullable range limits; node ``name`` (8.17).

Unknown object keys are ignored. A newer *major* version is refused. A value of the wrong JSON
type raises :class:`~engine.errors.PT2FormatError` naming the member and the JSON path, e.g.
``m/models/model.json: graph.nodes[3].inputs[0].arg: expected an object, got an array`` (paths
inside ``graph_module`` are written without that prefix). References to values that are
neither graph inputs nor produced by an earlier node are refused naming the node.

Also decodes payload configs (``*_weights_config.json``/``*_constants_config.json``) into
:class:`~engine.reader.schema.PayloadMeta`.
"""
from __future__ import annotations

import logging
import math
import re

from engine.errors import PT2FormatError
from engine.reader import schema as S
from engine.reader.jsonload import json_type, load_json
from engine.reader.metadata import MetadataError, MetadataParser

log = logging.getLogger(__name__)

#: Newest schema this reader was written against; newer minors are accepted (compatible).
SUPPORTED_MAJOR = 8
KNOWN_MINOR = 20
#: Deepest nesting of subgraphs (``as_graph``) / ``as_string_to_argument`` accepted.
MAX_GRAPH_DEPTH = 32


class _Bad(Exception):
    """Internal: a decoding problem; ``path`` collects JSON path components innermost first."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


def _at(e: _Bad, comp: str) -> _Bad:
    e.path.append(comp)
    return e


def _path_str(parts: list[str]) -> str:
    s = "".join(reversed(parts))
    return s[1:] if s.startswith(".") else s


# ------------------------------------------------------------------------------ primitives
def _expect(v, kind: str):
    return _Bad(f"expected {kind}, got {json_type(v)}")


def _typed(t: type, kind: str):
    """A converter that returns a JSON value of exactly type ``t`` or raises naming ``kind``."""
    def conv(v):
        if type(v) is not t:
            raise _expect(v, kind)
        return v
    return conv


_obj = _typed(dict, "an object")
_list = _typed(list, "an array")
_str = _typed(str, "a string")
_int = _typed(int, "an integer")
_bool = _typed(bool, "a boolean")


_FLOAT_WORDS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan,
                "inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _float(v) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    if t is str and v in _FLOAT_WORDS:
        return _FLOAT_WORDS[v]
    raise _expect(v, "a number")


def _opt_int(v) -> int | None:
    return None if v is None else _int(v)


def _get(d: dict, key: str):
    try:
        return d[key]
    except KeyError:
        raise _Bad(f"missing key '{key}'") from None


def _field(d: dict, key: str, conv):
    """``conv(d[key])`` with the key added to the error path."""
    try:
        return conv(d[key])
    except KeyError:
        raise _Bad(f"missing key '{key}'") from None
    except _Bad as e:
        raise _at(e, "." + key)


def _opt_field(d: dict, key: str, conv, default=None):
    v = d.get(key)
    if v is None:
        return default
    try:
        return conv(v)
    except _Bad as e:
        raise _at(e, "." + key)


def _items(v, conv) -> list:
    out = []
    for i, x in enumerate(_list(v)):
        try:
            out.append(conv(x))
        except _Bad as e:
            raise _at(e, f"[{i}]")
    return out


def _mapping(v, conv) -> dict:
    out = {}
    for k, x in _obj(v).items():
        try:
            out[k] = conv(x)
        except _Bad as e:
            raise _at(e, f".{k}")
    return out


def _union(v) -> tuple[str, object]:
    if type(v) is not dict:
        raise _expect(v, "an object")
    if len(v) != 1:
        raise _Bad(f"expected a one-key union object, got {len(v)} keys {sorted(v)[:5]}")
    for item in v.items():
        return item
    raise AssertionError  # unreachable


def _enum(enum_cls, what: str):
    members = {int(m): m for m in enum_cls}

    def conv(v):
        if type(v) is not int:
            raise _expect(v, f"an integer {what} code")
        try:
            return members[v]
        except KeyError:
            raise _Bad(f"unknown {what} code {v}") from None
    return conv


_scalar_type = _enum(S.ScalarType, "dtype")
_layout = _enum(S.Layout, "layout")
_memory_format = _enum(S.MemoryFormat, "memory format")


# ------------------------------------------------------------------------------ decoder
class ProgramDecoder:
    """Decodes one program document. Use :func:`decode_program`."""

    def __init__(self, member: str, version: S.SchemaVersion):
        self.member = member
        self.version = version
        self.lenient_tags = (version.major, version.minor) > (SUPPORTED_MAJOR, KNOWN_MINOR)
        self.md = MetadataParser()
        self._names: list[str] = []  # value names seen by the argument decoders
        self._refs: dict[str, S.TensorRef] = {}
        #: ``as_tensor`` arguments by name: one object per value (nothing changes an Argument)
        self._tensor_args: dict[str, S.Argument] = {}
        self._devices: dict[tuple, S.Device] = {}
        self._metas: dict[tuple, S.TensorMeta] = {}  # fast-path metas by their decoded fields
        self._depth = 0
        self._top_defined: set[str] = set()
        self._warned: set[str] = set()
        self._arg = {
            "as_none": self._as_none, "as_tensor": self._as_tensor, "as_tensors": self._as_tensors,
            "as_int": self._as_int, "as_ints": self._as_ints, "as_float": self._as_float,
            "as_floats": self._as_floats, "as_string": self._as_string, "as_strings": self._as_strings,
            "as_bool": self._as_bool, "as_bools": self._as_bools,
            "as_sym_int": self._as_sym_int, "as_sym_ints": self._as_sym_ints,
            "as_sym_bool": self._as_sym_bool, "as_sym_bools": self._as_sym_bools,
            "as_sym_float": self._as_sym_float, "as_sym_floats": self._as_sym_floats,
            "as_scalar_type": _scalar_type, "as_memory_format": _memory_format,
            "as_layout": _layout, "as_device": self._device,
            "as_optional_tensor": self._optional_tensor, "as_optional_tensors": self._optional_tensors,
            "as_graph": self._as_graph, "as_custom_obj": self._as_custom_obj,
            "as_operator": self._as_operator, "as_complex": self._as_complex,
            "as_int_lists": self._as_int_lists, "as_float_lists": self._as_float_lists,
            "as_nested_tensors": self._as_nested_tensors,
            "as_string_to_argument": self._as_string_to_argument,
        }

    # ---------------------------------------------------------------- arguments
    def argument(self, v) -> S.Argument:
        if type(v) is not dict:
            raise _expect(v, "an object")
        if len(v) == 1:
            t = v.get("as_tensor")  # fast path: most arguments are one tensor
            if type(t) is dict and len(t) == 1:
                name = t.get("name")
                if type(name) is str:
                    self._names.append(name)
                    arg = self._tensor_args.get(name)
                    if arg is None:
                        arg = self._tensor_args[name] = S.Argument("as_tensor", self._ref(name))
                    return arg
            for tag, val in v.items():
                conv = self._arg.get(tag)
                if conv is None:
                    return self._unknown_tag(tag, val)
                try:
                    return S.Argument(tag, conv(val))
                except _Bad as e:
                    raise _at(e, "." + tag)
        _union(v)  # raises the one-key error
        raise AssertionError

    def _unknown_tag(self, tag: str, val) -> S.Argument:
        if not self.lenient_tags:
            raise _Bad(f"unknown argument tag '{tag}'")
        if tag not in self._warned:
            self._warned.add(tag)
            log.warning("%s: unknown argument tag %r kept undecoded (schema %s is newer than %d.%d)",
                        self.member, tag, self.version, SUPPORTED_MAJOR, KNOWN_MINOR)
        return S.Argument(tag, val)

    @staticmethod
    def _as_none(v):
        if v is None or v is True or v is False or v == [] or v == {}:
            return None
        raise _expect(v, "true or []")

    def _tensor_ref(self, v) -> S.TensorRef:
        """``{"name": ...}`` (or a bare name string, schema 1–2 optional tensors)."""
        if type(v) is dict:
            name = v.get("name")
            if type(name) is not str:
                raise _Bad("missing key 'name'") if name is None else _at(_expect(name, "a string"), ".name")
        elif type(v) is str:
            name = v
        else:
            raise _expect(v, "an object")
        self._names.append(name)
        return self._ref(name)

    def _ref(self, name: str) -> S.TensorRef:
        """The one TensorRef of value ``name``."""
        ref = self._refs.get(name)
        if ref is None:
            ref = self._refs[name] = S.TensorRef(name)
        return ref

    _as_tensor = _tensor_ref

    def _as_tensors(self, v):
        return _items(v, self._tensor_ref)

    @staticmethod
    def _as_int(v):
        return _int(v)

    @staticmethod
    def _as_ints(v):
        if type(v) is not list:
            raise _expect(v, "an array")
        for x in v:
            if type(x) is not int:
                return _items(v, _int)
        return v

    @staticmethod
    def _as_float(v):
        return _float(v)

    @staticmethod
    def _as_floats(v):
        return _items(v, _float)

    @staticmethod
    def _as_string(v):
        return _str(v)

    @staticmethod
    def _as_strings(v):
        return _items(v, _str)

    @staticmethod
    def _as_bool(v):
        return _bool(v)

    @staticmethod
    def _as_bools(v):
        return _items(v, _bool)

    def _sym_arg(self, kind: str, const_key: str, const_conv):
        def conv(v):
            tag, val = _union(v)
            if tag == "as_name":
                try:
                    name = _str(val)
                except _Bad as e:
                    raise _at(e, ".as_name")
                self._names.append(name)
                return S.SymRef(name, kind)
            if tag == const_key:
                try:
                    return const_conv(val)
                except _Bad as e:
                    raise _at(e, "." + tag)
            raise _Bad(f"unknown tag '{tag}' (expected as_name or {const_key})")
        return conv

    def _as_sym_int(self, v):
        return self._sym_arg("int", "as_int", _int)(v)

    def _as_sym_ints(self, v):
        return _items(v, self._sym_arg("int", "as_int", _int))

    def _as_sym_bool(self, v):
        return self._sym_arg("bool", "as_bool", _bool)(v)

    def _as_sym_bools(self, v):
        return _items(v, self._sym_arg("bool", "as_bool", _bool))

    def _as_sym_float(self, v):
        return self._sym_arg("float", "as_float", _float)(v)

    def _as_sym_floats(self, v):
        return _items(v, self._sym_arg("float", "as_float", _float))

    def _device(self, v) -> S.Device:
        d = _obj(v)
        key = (d.get("type"), d.get("index"))
        dev = self._devices.get(key) if type(key[0]) is str and (key[1] is None or type(key[1]) is int) else None
        if dev is None:
            dev = S.Device(_field(d, "type", _str), _opt_field(d, "index", _int))
            self._devices[(dev.type, dev.index)] = dev
        return dev

    def _optional_tensor(self, v):
        tag, val = _union(v)
        try:
            if tag == "as_tensor":
                return self._tensor_ref(val)
            if tag == "as_none":
                return self._as_none(val)
        except _Bad as e:
            raise _at(e, "." + tag)
        raise _Bad(f"unknown tag '{tag}' (expected as_tensor or as_none)")

    def _optional_tensors(self, v):
        return _items(v, self._optional_tensor)

    def _as_graph(self, v) -> S.GraphArgument:
        d = _obj(v)
        name = _field(d, "name", _str)
        saved = self._names
        self._names = []
        try:
            g = _field(d, "graph", self.graph)
        finally:
            self._names = saved
        return S.GraphArgument(name, g)

    def _as_custom_obj(self, v) -> S.CustomObjRef:
        d = _obj(v)
        if "name" not in d and "blob" in d:  # schema 1
            name = _field(d, "blob", _str)
        else:
            name = _field(d, "name", _str)
        self._names.append(name)
        return S.CustomObjRef(name, _opt_field(d, "class_fqn", _str, ""))

    @staticmethod
    def _as_operator(v):
        return S.OperatorRef(_str(v))

    @staticmethod
    def _as_complex(v):
        d = _obj(v)
        return complex(_field(d, "real", _float), _field(d, "imag", _float))

    @staticmethod
    def _as_int_lists(v):
        return _items(v, ProgramDecoder._as_ints)

    @staticmethod
    def _as_float_lists(v):
        return _items(v, ProgramDecoder._as_floats)

    def _as_nested_tensors(self, v):
        return _items(v, self._as_tensors)

    def _as_string_to_argument(self, v):
        self._enter()
        try:
            return _mapping(v, self.argument)
        finally:
            self._depth -= 1

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_GRAPH_DEPTH:
            self._depth -= 1
            raise _Bad(f"nested more than {MAX_GRAPH_DEPTH} levels deep")

    # ---------------------------------------------------------------- tensor meta
    def sym_int(self, v) -> S.SymInt:
        if type(v) is int:  # schema 1-2 storage_offset
            return v
        if type(v) is dict and len(v) == 1:
            x = v.get("as_int")
            if type(x) is int:
                return x
        tag, val = _union(v)
        try:
            if tag == "as_expr":
                return self.sym_expr(val)
            if tag == "as_int":
                return _int(val)
        except _Bad as e:
            raise _at(e, "." + tag)
        raise _Bad(f"unknown tag '{tag}' (expected as_expr or as_int)")

    def sym_value(self, value_key: str, conv):
        """SymBool / SymFloat: ``{as_expr: SymExpr}`` or ``{as_bool|as_float: value}``."""
        def dec(v):
            tag, val = _union(v)
            try:
                if tag == "as_expr":
                    return S.SymExpr(val) if type(val) is str else self.sym_expr(val)  # schema 1: str
                if tag == value_key:
                    return conv(val)
            except _Bad as e:
                raise _at(e, "." + tag)
            raise _Bad(f"unknown tag '{tag}' (expected as_expr or {value_key})")
        return dec

    def sym_expr(self, v) -> S.SymExpr:
        d = _obj(v)
        expr = _field(d, "expr_str", _str)
        hint = d.get("hint")
        if hint is None or type(hint) is int:
            return S.SymExpr(expr, hint)
        try:
            tag, val = _union(hint)
            if tag == "as_int":
                h = _int(val)
            elif tag == "as_float":
                h = _float(val)
            elif tag == "as_bool":
                h = _bool(val)
            else:
                raise _Bad(f"unknown hint tag '{tag}'")
        except _Bad as e:
            raise _at(e, ".hint")
        return S.SymExpr(expr, h)

    def _sym_ints(self, v) -> tuple:
        if type(v) is not list:
            raise _expect(v, "an array")
        out = []
        for i, x in enumerate(v):
            if type(x) is dict and len(x) == 1:
                n = x.get("as_int")
                if type(n) is int:
                    out.append(n)
                    continue
            try:
                out.append(self.sym_int(x))
            except _Bad as e:
                raise _at(e, f"[{i}]")
        return tuple(out)

    def tensor_meta(self, v) -> S.TensorMeta:
        """TensorMeta; a fast path takes the common all-static CPU strided case, and gives
        equal metas one shared object (most repeat: every activation of one shape). Nothing
        changes a TensorMeta after decoding."""
        if type(v) is dict:
            try:
                dt = v["dtype"]
                sizes = _static_ints(v["sizes"])
                strides = _static_ints(v["strides"])
                off = v["storage_offset"]
                off = off["as_int"] if type(off) is dict and len(off) == 1 else None
                rg = v["requires_grad"]
                device = _device_key(v["device"])
                layout = v["layout"]
            except (KeyError, TypeError):
                pass
            else:
                if (type(dt) is int and dt in _SCALAR_TYPES and sizes is not None and strides is not None
                        and len(sizes) == len(strides) and type(off) is int and type(rg) is bool
                        and device in self._devices and layout == 7 and type(layout) is int):
                    key = (dt, sizes, strides, off, rg, device)
                    meta = self._metas.get(key)
                    if meta is None:
                        meta = self._metas[key] = S.TensorMeta(_SCALAR_TYPES[dt], sizes, strides, off, rg,
                                                               self._devices[device], S.Layout.STRIDED)
                    return meta
        return self._tensor_meta(v)

    def _tensor_meta(self, v) -> S.TensorMeta:
        d = _obj(v)
        if "dtype" not in d and type(d.get("meta")) is dict:  # schema 1: TensorValue{meta}
            try:
                return self.tensor_meta(d["meta"])
            except _Bad as e:
                raise _at(e, ".meta")
        dtype = _field(d, "dtype", _scalar_type)
        sizes = _field(d, "sizes", self._sym_ints)
        strides = _field(d, "strides", self._sym_ints)
        if len(strides) != len(sizes):
            raise _Bad(f"{len(sizes)} sizes but {len(strides)} strides")
        offset = _opt_field(d, "storage_offset", self.sym_int, 0)
        rg = _opt_field(d, "requires_grad", _bool, False)
        dev = d.get("device")
        device = _CPU if dev is None else _opt_field(d, "device", self._device)
        lay = d.get("layout")
        layout = S.Layout.STRIDED if lay == 7 else _opt_field(d, "layout", _layout, S.Layout.STRIDED)
        return S.TensorMeta(dtype, sizes, strides, offset, rg, device, layout)

    # ---------------------------------------------------------------- graph
    def graph(self, v) -> S.Graph:
        self._enter()
        try:
            return self._graph(_obj(v))
        finally:
            self._depth -= 1

    def _graph(self, d: dict) -> S.Graph:
        names = self._names = []
        inputs = _field(d, "inputs", lambda x: _items(x, self.argument))
        defined = set()
        for n in names:
            if n in defined:
                raise _Bad(f"graph input '{n}' is defined twice")
            defined.add(n)
        raw_nodes = _get(d, "nodes")
        nodes = []
        try:
            used_names: set[str] = set()
            for i, nd in enumerate(_list(raw_nodes)):
                try:
                    nodes.append(self._node(nd, defined, used_names))
                except _Bad as e:
                    raise _at(e, f"[{i}]")
        except _Bad as e:
            raise _at(e, ".nodes")
        names = self._names = []
        outputs = _field(d, "outputs", lambda x: _items(x, self.argument))
        for n in names:
            if n not in defined:
                raise _at(_Bad(f"graph output refers to undefined value '{n}'"), ".outputs")
        self._top_defined = defined  # the outermost graph finishes last
        tv = _opt_field(d, "tensor_values", lambda x: _mapping(x, self.tensor_meta), {})
        siv = _opt_field(d, "sym_int_values", lambda x: _mapping(x, self.sym_int), {})
        sbv = _opt_field(d, "sym_bool_values", lambda x: _mapping(x, self.sym_value("as_bool", _bool)), {})
        sfv = _opt_field(d, "sym_float_values", lambda x: _mapping(x, self.sym_value("as_float", _float)), {})
        single = _opt_field(d, "is_single_tensor_return", _bool, False)
        cov = _opt_field(d, "custom_obj_values", lambda x: _mapping(x, self._custom_obj_value), {})
        return S.Graph(inputs, outputs, nodes, tv, siv, sbv, sfv, single, cov)

    def _custom_obj_value(self, v) -> S.CustomObjRef:
        d = _obj(v)
        return S.CustomObjRef(_opt_field(d, "name", _str, ""), _opt_field(d, "class_fqn", _str, ""))

    def _node(self, v, defined: set, used_names: set) -> S.Node:
        d = _obj(v)
        target = d.get("target")
        if type(target) is not str:
            target = _field(d, "target", _str)
        names = self._names = []
        raw_inputs = _get(d, "inputs")
        inputs = []
        try:
            for j, na in enumerate(_list(raw_inputs)):
                try:
                    inputs.append(self._named_argument(na))
                except _Bad as e:
                    raise _at(e, f"[{j}]")
        except _Bad as e:
            raise _at(e, ".inputs")
        for n in names:
            if n not in defined:
                raise _Bad(f"node {_node_label(d, target)} input refers to undefined value '{n}' "
                           "(neither a graph input nor produced by an earlier node)")
        names = self._names = []
        raw_outputs = _get(d, "outputs")
        outputs = []
        argument = self.argument
        try:
            for j, a in enumerate(_list(raw_outputs)):
                try:
                    outputs.append(argument(a))
                except _Bad as e:
                    raise _at(e, f"[{j}]")
        except _Bad as e:
            raise _at(e, ".outputs")
        for n in names:
            if n in defined:
                raise _Bad(f"node {_node_label(d, target)} redefines value '{n}'")
            defined.add(n)
        raw_md = d.get("metadata")
        if not raw_md:
            md = S.NodeMetadata()
        else:
            try:
                md = self.md.parse(_obj(raw_md))
            except _Bad as e:
                raise _at(e, ".metadata")
            except MetadataError as e:
                raise _at(_Bad(e.reason), f".metadata.{e.key}")
        hop = d.get("is_hop_single_tensor_return")
        if hop is not None and type(hop) is not bool:
            hop = _opt_field(d, "is_hop_single_tensor_return", _bool)
        name = d.get("name")
        if name is not None and type(name) is not str:
            name = _opt_field(d, "name", _str)
        if name is None:  # before schema 8.17: fx names the node after its first output
            name = names[0] if names and names[0] not in used_names else _fallback_name(target, used_names)
        elif name in used_names:
            raise _at(_Bad(f"duplicate node name '{name}'"), ".name")
        used_names.add(name)
        return S.Node(name, target, inputs, outputs, md, hop)

    def _named_argument(self, d) -> S.NamedArgument:
        if type(d) is not dict:
            raise _expect(d, "an object")
        name = d.get("name")
        if type(name) is not str:
            name = _field(d, "name", _str)
        try:
            arg = self.argument(d["arg"])
        except KeyError:
            raise _Bad("missing key 'arg'") from None
        except _Bad as e:
            raise _at(e, ".arg")
        kind = d.get("kind")
        if kind is not None and type(kind) is not int:
            raise _at(_expect(kind, "an integer"), ".kind")
        return S.NamedArgument(name, arg, kind)

    # ---------------------------------------------------------------- signature
    def signature(self, v, graph: S.Graph) -> S.GraphSignature:
        d = _obj(v)
        if "input_specs" not in d and ("user_inputs" in d or "inputs_to_parameters" in d):
            return self._legacy_signature(d, graph)
        ins = _field(d, "input_specs", lambda x: _items(x, self._input_spec))
        outs = _field(d, "output_specs", lambda x: _items(x, self._output_spec))
        return S.GraphSignature(ins, outs)

    def _input_spec(self, v) -> S.InputSpec:
        tag, val = _union(v)
        try:
            d = _obj(val)
            K = S.InputKind
            if tag == "user_input":
                arg = _field(d, "arg", self.argument)
                return S.InputSpec(K.USER_INPUT, _arg_name(arg), arg)
            if tag == "parameter":
                arg = self._tensor_arg(d)
                return S.InputSpec(K.PARAMETER, arg.value.name, arg, _field(d, "parameter_name", _str))
            if tag == "buffer":
                arg = self._tensor_arg(d)
                persistent = _opt_field(d, "persistent", _bool, True)
                return S.InputSpec(K.BUFFER, arg.value.name, arg, _field(d, "buffer_name", _str), persistent)
            if tag == "tensor_constant":
                arg = self._tensor_arg(d)
                return S.InputSpec(K.TENSOR_CONSTANT, arg.value.name, arg, _field(d, "tensor_constant_name", _str))
            if tag == "custom_obj":
                obj = _field(d, "arg", self._as_custom_obj)
                return S.InputSpec(K.CUSTOM_OBJ, obj.name, S.Argument("as_custom_obj", obj),
                                   _field(d, "custom_obj_name", _str))
            if tag == "token":
                arg = self._tensor_arg(d)
                return S.InputSpec(K.TOKEN, arg.value.name, arg)
            if tag == "constant_input":
                name = _field(d, "name", _str)
                ctag, cval = _field(d, "value", _union)
                arg = _field(d, "value", self.argument)
                if ctag not in ("as_none", "as_int", "as_float", "as_string", "as_bool"):
                    raise _at(_Bad(f"unknown constant tag '{ctag}'"), ".value")
                return S.InputSpec(K.CONSTANT_INPUT, name, arg, value=arg.value)
        except _Bad as e:
            raise _at(e, "." + tag)
        raise _Bad(f"unknown input spec kind '{tag}'")

    def _tensor_arg(self, d: dict) -> S.Argument:
        return S.Argument("as_tensor", _field(d, "arg", self._tensor_ref))

    _OUTPUT_TARGET = {
        "loss_output": None, "buffer_mutation": "buffer_name", "gradient_to_parameter": "parameter_name",
        "gradient_to_user_input": "user_input_name", "user_input_mutation": "user_input_name",
        "parameter_mutation": "parameter_name", "token": None,
    }

    def _output_spec(self, v) -> S.OutputSpec:
        tag, val = _union(v)
        try:
            d = _obj(val)
            if tag == "user_output":
                arg = _field(d, "arg", self.argument)
                return S.OutputSpec(S.OutputKind.USER_OUTPUT, _arg_name(arg), arg)
            if tag in self._OUTPUT_TARGET:
                arg = self._tensor_arg(d)
                key = self._OUTPUT_TARGET[tag]
                target = _field(d, key, _str) if key else None
                return S.OutputSpec(S.OutputKind(tag), arg.value.name, arg, target)
        except _Bad as e:
            raise _at(e, "." + tag)
        raise _Bad(f"unknown output spec kind '{tag}'")

    def _legacy_signature(self, d: dict, graph: S.Graph) -> S.GraphSignature:
        """Schema 1: dicts of graph names → FQNs; ordered by the graph's inputs/outputs."""
        params = _opt_field(d, "inputs_to_parameters", lambda x: _mapping(x, _str), {})
        buffers = _opt_field(d, "inputs_to_buffers", lambda x: _mapping(x, _str), {})
        user_outputs = _opt_field(d, "user_outputs", lambda x: _items(x, _str), [])
        mutations = _opt_field(d, "buffers_to_mutate", lambda x: _mapping(x, _str), {})
        bw = _opt_field(d, "backward_signature", _obj, {})
        grads_p = _opt_field(bw, "gradients_to_parameters", lambda x: _mapping(x, _str), {})
        grads_u = _opt_field(bw, "gradients_to_user_inputs", lambda x: _mapping(x, _str), {})
        loss = _opt_field(bw, "loss_output", _str)
        K, O = S.InputKind, S.OutputKind
        ins = []
        for arg in graph.inputs:
            name = _arg_name(arg)
            if name in params:
                ins.append(S.InputSpec(K.PARAMETER, name, arg, params[name]))
            elif name in buffers:
                ins.append(S.InputSpec(K.BUFFER, name, arg, buffers[name], True))
            else:
                ins.append(S.InputSpec(K.USER_INPUT, name, arg))
        outs = []
        n_user_start = len(graph.outputs) - len(user_outputs)
        for i, arg in enumerate(graph.outputs):
            name = _arg_name(arg)
            if i < n_user_start and name in mutations:
                outs.append(S.OutputSpec(O.BUFFER_MUTATION, name, arg, mutations[name]))
            elif name == loss:
                outs.append(S.OutputSpec(O.LOSS_OUTPUT, name, arg))
            elif name in grads_p:
                outs.append(S.OutputSpec(O.GRADIENT_TO_PARAMETER, name, arg, grads_p[name]))
            elif name in grads_u:
                outs.append(S.OutputSpec(O.GRADIENT_TO_USER_INPUT, name, arg, grads_u[name]))
            else:
                outs.append(S.OutputSpec(O.USER_OUTPUT, name, arg))
        return S.GraphSignature(ins, outs)

    # ---------------------------------------------------------------- program
    def module_call_graph(self, v, call_spec: dict | None) -> list[S.ModuleCallEntry]:
        entries = _items(v, self._module_call_entry) if v is not None else []
        if call_spec is not None:  # schema 1: the root calling convention lived in call_spec
            root = next((e for e in entries if e.fqn == ""), None)
            if root is None or root.signature is None:
                sig = S.ModuleCallSignature([], [], _field(call_spec, "in_spec", _str),
                                            _field(call_spec, "out_spec", _str))
                if root is None:
                    entries.insert(0, S.ModuleCallEntry("", sig))
                else:
                    root.signature = sig
        return entries

    def _module_call_entry(self, v) -> S.ModuleCallEntry:
        d = _obj(v)
        fqn = _field(d, "fqn", _str)
        sig = _opt_field(d, "signature", self._module_call_signature)
        return S.ModuleCallEntry(fqn, sig)

    def _module_call_signature(self, v) -> S.ModuleCallSignature:
        d = _obj(v)
        self._names = []
        return S.ModuleCallSignature(
            _field(d, "inputs", lambda x: _items(x, self.argument)),
            _field(d, "outputs", lambda x: _items(x, self.argument)),
            _field(d, "in_spec", _str),
            _field(d, "out_spec", _str),
            _opt_field(d, "forward_arg_names", lambda x: _items(x, _str)),
        )

    def program(self, doc: dict) -> S.Program:
        # graph_module's fields are reported without a "graph_module." prefix: "graph.nodes[3]"
        gm = _field(doc, "graph_module", _obj)
        graph = _field(gm, "graph", self.graph)
        sig = _field(gm, "signature", lambda x: self.signature(x, graph))
        call_spec = _opt_field(gm, "call_spec", _obj)
        mcg = _opt_field(gm, "module_call_graph", lambda x: self.module_call_graph(x, call_spec), None)
        if mcg is None:
            mcg = self.module_call_graph(None, call_spec)
        gm_meta = _opt_field(gm, "metadata", lambda x: _mapping(x, _str), {})
        nt = _opt_field(gm, "treespec_namedtuple_fields", lambda x: _mapping(x, _namedtuple_def), {})
        rc = _opt_field(doc, "range_constraints", lambda x: _mapping(x, _range_constraint), {})
        opset = _opt_field(doc, "opset_version", lambda x: _mapping(x, _int), {})
        verifiers = _opt_field(doc, "verifiers", lambda x: _items(x, _str), None)
        if verifiers is None:
            dialect = _opt_field(doc, "dialect", _str)
            verifiers = [dialect] if dialect else []
        torch_version = _opt_field(doc, "torch_version", _str)
        guards = _opt_field(doc, "guards_code", lambda x: _items(x, _str), [])
        self._check_signature(sig, graph)
        return S.Program(graph, sig, mcg, rc, self.version, opset, verifiers, torch_version,
                         gm_meta, nt, guards)

    def _check_signature(self, sig: S.GraphSignature, graph: S.Graph) -> None:
        if len(sig.input_specs) != len(graph.inputs):
            raise _at(_at(_Bad(f"{len(sig.input_specs)} input specs for {len(graph.inputs)} graph inputs"),
                          ".input_specs"), ".signature")
        produced = self._top_defined
        inputs = {n for a in graph.inputs for n in a.value_names()}
        for i, spec in enumerate(sig.input_specs):
            if spec.kind is not S.InputKind.CONSTANT_INPUT and spec.name and spec.name not in inputs:
                raise _at(_at(_at(_Bad(f"names '{spec.name}', which is not a graph input"), f"[{i}]"),
                              ".input_specs"), ".signature")
        for i, spec in enumerate(sig.output_specs):
            for n in spec.arg.value_names():
                if n not in produced and n not in inputs:
                    raise _at(_at(_at(_Bad(f"names undefined value '{n}'"), f"[{i}]"),
                                  ".output_specs"), ".signature")


_CPU = S.Device("cpu")
_SCALAR_TYPES = {int(m): m for m in S.ScalarType}


def _static_ints(v) -> tuple | None:
    """``[{"as_int": n}, ...]`` → tuple of ints; None when anything else is in it (the
    validating slow path then decodes it)."""
    if type(v) is not list:
        return None
    out = []
    try:
        for x in v:
            n = x["as_int"]
            if type(n) is not int:
                return None
            out.append(n)
    except (KeyError, TypeError, IndexError):
        return None
    return tuple(out)


def _device_key(d) -> tuple | None:
    if type(d) is dict and len(d) == 2:
        t, i = d.get("type"), d.get("index")
        if type(t) is str and (i is None or type(i) is int):
            return (t, i)
    return None
#: torch < 2.5 wrote unbounded range limits as sys.maxsize - 1 (or ±inf).
_UNBOUNDED = (1 << 63) - 2


def _range_limit(v) -> int | None:
    if v is None:
        return None
    if type(v) is int:
        return None if abs(v) >= _UNBOUNDED else v
    if type(v) in (float, str):
        f = _float(v)
        if math.isinf(f):
            return None
        if f.is_integer():
            return int(f)
    raise _expect(v, "an integer or null")


def _range_constraint(v) -> S.RangeConstraint:
    d = _obj(v)
    return S.RangeConstraint(_field(d, "min_val", _range_limit), _field(d, "max_val", _range_limit))


def _namedtuple_def(v) -> list[str]:
    d = _obj(v)
    return _field(d, "field_names", lambda x: _items(x, _str))


def _arg_name(arg: S.Argument) -> str:
    v = arg.value
    if isinstance(v, (S.TensorRef, S.SymRef, S.CustomObjRef)):
        return v.name
    return ""


def _node_label(d: dict, target: str) -> str:
    name = d.get("name")
    short = target[len("torch.ops."):] if target.startswith("torch.ops.") else target
    return f"'{name}' ({short})" if isinstance(name, str) else f"({short})"


def _fallback_name(target: str, used: set) -> str:
    """The name torch.fx gives a call without a name: ``aten.add.Tensor`` → ``add_tensor``,
    ``_operator.mul`` → ``mul``, made unique with ``_1``, ``_2``, ..."""
    t = target[len("torch.ops."):] if target.startswith("torch.ops.") else target
    parts = t.split(".")
    op = ".".join(parts[1:]) if len(parts) > 1 else t
    op = re.sub(_CAMEL, "_", op).lower()
    base = re.sub(_ILLEGAL, "_", op) or "node"
    if base[0].isdigit():
        base = "_" + base
    name, i = base, 0
    while name in used:
        i += 1
        name = f"{base}_{i}"
    return name


#: patterns of :func:`_fallback_name` (compiled on first use: only files before schema 8.17 need them)
_CAMEL = r"(?<=[a-z0-9])(?=[A-Z])"
_ILLEGAL = r"[^0-9a-zA-Z_]+"


# ------------------------------------------------------------------------------ entry points
def parse_schema_version(doc: dict, member: str) -> S.SchemaVersion:
    sv = doc.get("schema_version")
    if type(sv) is int:
        ver = S.SchemaVersion(sv, 0)
    elif type(sv) is dict:
        try:
            ver = S.SchemaVersion(_field(sv, "major", _int), _opt_field(sv, "minor", _int, 0))
        except _Bad as e:
            raise PT2FormatError(member, f"{_path_str(_at(e, 'schema_version').path)}: {e.reason}") from None
    elif sv is None:
        raise PT2FormatError(member, "missing schema_version: not an ExportedProgram document")
    else:
        raise PT2FormatError(member, f"schema_version: expected an object, got {json_type(sv)}")
    if ver.major > SUPPORTED_MAJOR:
        raise PT2FormatError(member, f"schema version {ver} is newer than this reader supports "
                                     f"(1 to {SUPPORTED_MAJOR}.x); update pt2ncnn")
    if ver.major < 0 or ver.minor < 0:
        raise PT2FormatError(member, f"invalid schema version {ver}")
    return ver


def decode_program(data: bytes | str, member: str) -> S.Program:
    """Decode a program JSON document (bytes or text) into a :class:`~schema.Program`."""
    doc = load_json(data, member)
    if type(doc) is not dict:
        raise PT2FormatError(member, f"expected a JSON object at the top level, got {json_type(doc)}")
    version = parse_schema_version(doc, member)
    dec = ProgramDecoder(member, version)
    try:
        return dec.program(doc)
    except _Bad as e:
        path = _path_str(e.path)
        raise PT2FormatError(member, f"{path}: {e.reason}" if path else e.reason) from None
    except RecursionError:
        raise PT2FormatError(member, "JSON nested too deeply") from None
    finally:
        dec.__dict__.clear()  # its table of bound methods is a cycle: freed now, not at a collection


def decode_payload_config(data: bytes | str, member: str) -> dict[str, S.PayloadMeta]:
    """Decode ``{"config": {fqn: {path_name, is_param, use_pickle, tensor_meta}}}``."""
    doc = load_json(data, member)
    dec = ProgramDecoder(member, S.SchemaVersion(SUPPORTED_MAJOR, KNOWN_MINOR))

    def entry(v) -> S.PayloadMeta:
        d = _obj(v)
        path = d.get("path_name")
        if type(path) is not str:
            path = _field(d, "path_name", _str)
        if not path or "/" in path or "\\" in path or path in (".", ".."):
            raise _at(_Bad(f"invalid payload path {path!r}"), ".path_name")
        is_param, use_pickle = d.get("is_param", False), d.get("use_pickle", False)
        if type(is_param) is not bool or type(use_pickle) is not bool:
            is_param = _opt_field(d, "is_param", _bool, False)
            use_pickle = _opt_field(d, "use_pickle", _bool, False)
        meta = d.get("tensor_meta")
        if meta is not None:
            try:
                meta = dec.tensor_meta(meta)
            except _Bad as e:
                raise _at(e, ".tensor_meta")
        return S.PayloadMeta(path, is_param, use_pickle, meta)

    try:
        d = _obj(doc)
        return _field(d, "config", lambda x: _mapping(x, entry))
    except _Bad as e:
        path = _path_str(e.path)
        raise PT2FormatError(member, f"{path}: {e.reason}" if path else e.reason) from None
    finally:
        dec.__dict__.clear()
