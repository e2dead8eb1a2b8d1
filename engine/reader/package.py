"""The public reader objects: :func:`load`, :class:`Package` and :class:`ExportedProgram`.

``load(path)`` memory-maps the file, recognizes its layout, decodes every model's program JSON
and payload configs, classifies the signature and validates every payload's geometry against
the size of its member — without reading any weight. Tensors are read (and CRC-checked) only
when asked for. Every failure, including an unexpected one inside the reader, surfaces as
:class:`~engine.errors.PT2FormatError`; other exceptions never escape the API.
"""
from __future__ import annotations

import collections
import functools
import logging
import os
from collections.abc import Mapping

from engine.collector import no_cyclic_gc
from engine.errors import PT2Error, PT2FormatError
from engine.reader import schema as S
from engine.reader.archive import MemberInfo, ZipArchive
from engine.reader.decode import decode_payload_config, decode_program
from engine.reader.jsonload import MAX_JSON_BYTES
from engine.reader.layout import ModelMembers, PackageLayout, detect_layout
from engine.reader.modules import ModuleNode, build_module_tree
from engine.reader.signature import Signature, classify
from engine.reader.tensors import DTYPES, TensorEntry, TensorStore, check_geometry, logical_nbytes, strided_view
from engine.reader.unpickler import PickledTensor, TorchSave, load_torch_save

log = logging.getLogger(__name__)

_KIND_OF_INPUT = {S.InputKind.PARAMETER: "parameter", S.InputKind.BUFFER: "buffer",
                  S.InputKind.TENSOR_CONSTANT: "constant", S.InputKind.CUSTOM_OBJ: "custom_obj"}
_SUBCLASS = "pickled tensor-subclass payload; not decoded because it needs arbitrary Python classes"
_UNREADABLE = {  # by payload file prefix (weight_N / tensor_N / custom_obj_N / opaque_obj_N)
    "weight": _SUBCLASS,
    "tensor": _SUBCLASS,
    "custom_obj": "TorchScript object (torch._C._pickle_save); never executed by this reader",
    "opaque_obj": "opaque Python object (pickle); never executed by this reader",
}


def _guard(label_of):
    """Wrap an API entry point so only PT2Error subclasses escape it."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except PT2Error:
                raise
            except RecursionError:
                raise PT2FormatError(label_of(*args, **kwargs), "structure nested too deeply") from None
            except MemoryError:
                raise PT2FormatError(label_of(*args, **kwargs), "out of memory while reading") from None
            except Exception as e:
                log.exception("unexpected error in %s", fn.__qualname__)
                raise PT2FormatError(label_of(*args, **kwargs),
                                     f"internal reader error ({type(e).__name__}: {e})") from e
        return wrapper
    return deco


@_guard(lambda path, *a, **k: os.fspath(path) if isinstance(path, (str, os.PathLike)) else repr(path))
def load(path: str | os.PathLike) -> "Package":
    """Open a ``.pt2`` package. Reads the directory, the program JSON and payload configs only.

    Raises :class:`~engine.errors.PT2FormatError` (``str(e) == f"{e.member}: {e.reason}"``) for
    any file this reader cannot accept."""
    archive = ZipArchive.open(path)
    try:
        with no_cyclic_gc():  # decoding allocates many small acyclic objects
            return Package(os.fspath(path), archive)
    except BaseException:
        archive.close()
        raise


class _ExtraFiles(Mapping):
    """``extra/<name>`` members, read on first access."""

    def __init__(self, archive: ZipArchive, members: dict[str, str]):
        self._archive = archive
        self._members = members
        self._cache: dict[str, bytes] = {}

    def __getitem__(self, key: str) -> bytes:
        if key not in self._cache:
            self._cache[key] = self._archive.read(self._members[key], limit=MAX_JSON_BYTES)
        return self._cache[key]

    def __iter__(self):
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)


class Package:
    """An opened ``.pt2`` file.

    ``path``; ``layout`` (``"pt2"``, ``"pt2-2.8"`` or ``"legacy"``); ``archive_version`` (text:
    ``"0"`` for pt2 archives, the ``version`` member for legacy files, ``""`` when absent);
    ``byteorder``; ``model_names``; ``models`` (name → :class:`ExportedProgram`); ``model`` (the
    main one: ``"model"`` if present, else the first); ``extra_files`` (name → bytes, read
    lazily); ``members`` (:class:`MemberInfo` of every zip member). Close it (or use ``with``)
    to release the memory map; arrays already handed out stay valid."""

    def __init__(self, path: str, archive: ZipArchive):
        self.path = path
        self._archive = archive
        self._layout: PackageLayout = detect_layout(archive)
        self.layout: str = self._layout.kind
        self.archive_version: str = self._layout.archive_version
        self.byteorder: str = self._layout.byteorder
        self.models: dict[str, ExportedProgram] = {}
        for name, mm in self._layout.models.items():
            self.models[name] = ExportedProgram._open(self, mm)
        self.model_names: list[str] = list(self.models)
        self.extra_files: Mapping[str, bytes] = _ExtraFiles(archive, self._layout.extra_files)

    @property
    def model(self) -> "ExportedProgram":
        return self.models["model"] if "model" in self.models else next(iter(self.models.values()))

    @property
    def members(self) -> list[MemberInfo]:
        return list(self._archive.members)

    @property
    def archive(self) -> ZipArchive:
        return self._archive

    def close(self) -> None:
        for ep in self.models.values():
            ep.tensors.clear_cache()
        self._archive.close()

    def dispose(self) -> None:
        """Close, and let go of the models: each model refers back to its package, so without
        this they wait for a full cyclic collection. The package and its models are not to be
        used afterwards."""
        self.close()
        self.models = {}

    def __enter__(self) -> "Package":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Package {self.path!r} layout={self.layout} models={self.model_names}>"


class ExportedProgram:
    """One model of a package: its decoded program, signature and stored tensors.

    Attributes: ``name``; ``member`` (its JSON member); ``program`` (:class:`schema.Program`);
    ``graph``; ``nodes``; ``schema_version``; ``torch_version`` (None when the file predates
    the field, torch ≤ 2.4); ``dialect`` (``"TRAINING"``, ``"ATEN"``, ...);
    ``range_constraints``; ``signature`` (:class:`~engine.reader.signature.Signature`);
    ``tensors`` (:class:`~engine.reader.tensors.TensorStore`)."""

    def __init__(self, package: Package, name: str, member: str, program: S.Program,
                 store: TensorStore, signature: Signature, members: ModelMembers):
        self.package = package
        self.name = name
        self.member = member
        self.program = program
        self.tensors = store
        self.signature = signature
        self._members = members
        self._module_tree: ModuleNode | None = None
        self._nodes_by_name: dict[str, S.Node] | None = None

    @classmethod
    def _open(cls, package: Package, mm: ModelMembers) -> "ExportedProgram":
        archive = package._archive
        program = decode_program(archive.read(mm.program, limit=MAX_JSON_BYTES), mm.program)
        entries = _PayloadIndex(archive, mm, program, package.byteorder).entries()
        store = TensorStore(entries, f"model '{mm.name}'")
        signature = classify(program, store, mm.program)
        return cls(package, mm.name, mm.program, program, store, signature, mm)

    # ---------------------------------------------------------------- program views
    @property
    def graph(self) -> S.Graph:
        return self.program.graph

    @property
    def nodes(self) -> list[S.Node]:
        return self.program.graph.nodes

    @property
    def schema_version(self) -> S.SchemaVersion:
        return self.program.schema_version

    @property
    def torch_version(self) -> str | None:
        return self.program.torch_version

    @property
    def dialect(self) -> str:
        return self.program.dialect

    @property
    def range_constraints(self) -> dict[str, S.RangeConstraint]:
        return self.program.range_constraints

    @property
    def layout(self) -> str:
        return self.package.layout

    def node(self, name: str) -> S.Node | None:
        """The node named ``name`` (None if there is none)."""
        if self._nodes_by_name is None:
            self._nodes_by_name = {n.name: n for n in self.nodes}
        return self._nodes_by_name.get(name)

    def value_meta(self, name: str) -> S.TensorMeta | None:
        """Metadata of a tensor value of the graph (input, node output), if recorded."""
        return self.program.graph.tensor_values.get(name)

    def op_histogram(self) -> dict[str, int]:
        """Operator (target without ``torch.ops.``) → number of nodes, most frequent first."""
        return dict(collections.Counter(n.op for n in self.nodes).most_common())

    def module_tree(self) -> ModuleNode:
        """The module hierarchy (from ``nn_module_stack`` and ``module_call_graph``)."""
        if self._module_tree is None:
            self._module_tree = _module_tree(self)
        return self._module_tree

    # ---------------------------------------------------------------- tensors
    def tensor(self, name: str):
        """A stored tensor by FQN or graph name, as a read-only numpy array. bfloat16, float8
        and complex32 come back as raw bits; see :func:`engine.reader.tensors.to_float32`."""
        return _tensor(self, name)

    def tensor_dtype(self, name: str) -> S.ScalarType:
        return self.tensors.dtype(name)

    def sample_inputs(self):
        """``(args, kwargs)`` with numpy arrays for tensors, or None when the package has none.
        Raises PT2FormatError when they cannot be read (e.g. a forbidden pickle global)."""
        return _sample_inputs(self)

    def __repr__(self) -> str:
        return (f"<ExportedProgram {self.name!r} schema {self.schema_version} {self.dialect} "
                f"{len(self.nodes)} nodes>")


@_guard(lambda ep: ep.member)
def _module_tree(ep: ExportedProgram) -> ModuleNode:
    return build_module_tree(ep.program)


@_guard(lambda ep, name: str(name))
def _tensor(ep: ExportedProgram, name: str):
    return ep.tensors.tensor(name)


@_guard(lambda ep: ep._members.sample_inputs or ep.package.path)
def _sample_inputs(ep: ExportedProgram):
    member = ep._members.sample_inputs
    archive = ep.package._archive
    if member is None or archive.info(member).size == 0:
        return None
    ts = load_torch_save(archive.view(member), member)
    obj = ts.obj
    if not (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], (tuple, list))
            and isinstance(obj[1], dict)):
        raise PT2FormatError(member, "sample inputs are not an (args, kwargs) pair")
    return _materialize(obj[0], ts, 0), _materialize(obj[1], ts, 0)


def _materialize(obj, ts: TorchSave, depth: int):
    if depth > 64:
        raise PT2FormatError(ts.label, "sample inputs nested too deeply")
    if isinstance(obj, PickledTensor):
        try:
            return strided_view(ts.storage_view(obj.storage), obj.dtype, obj.size, obj.stride,
                                obj.storage_offset, byteorder=ts.byteorder)
        except ValueError as e:
            raise PT2FormatError(f"{ts.label}:{ts.storage_member(obj.storage)}", str(e)) from None
    if isinstance(obj, dict):
        return {k: _materialize(v, ts, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_materialize(v, ts, depth + 1) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_materialize(v, ts, depth + 1) for v in obj)
    return obj


# ------------------------------------------------------------------------------ payloads
class _PayloadIndex:
    """Builds the TensorEntry list of one model from its payload configs or torch.save dicts,
    validating each payload's geometry against its member's size (no data is read)."""

    def __init__(self, archive: ZipArchive, mm: ModelMembers, program: S.Program, byteorder: str):
        self.archive = archive
        self.mm = mm
        self.program = program
        self.byteorder = byteorder
        self.specs = {s.target: s for s in program.signature.input_specs if s.target}

    def entries(self) -> list[TensorEntry]:
        out: list[TensorEntry] = []
        mm = self.mm
        for cfg, pkl, folder, group in ((mm.weights_config, mm.weights_pickle, mm.weights_dir, "weights"),
                                        (mm.constants_config, mm.constants_pickle, mm.constants_dir, "constants")):
            if cfg is not None:
                out.extend(self._from_config(cfg, folder, group))
            elif pkl is not None:
                out.extend(self._from_pickle(pkl, group))
        return out

    def _kind(self, fqn: str, group: str, is_param: bool, path_name: str = "") -> tuple[str, bool | None, str | None]:
        spec = self.specs.get(fqn)
        if spec is not None and (kind := _KIND_OF_INPUT.get(spec.kind)) is not None:
            return kind, spec.persistent, spec.name
        if path_name.startswith(("custom_obj", "opaque_obj")):
            return "custom_obj", None, None
        if group == "weights":
            return ("parameter" if is_param else "buffer"), (None if is_param else True), None
        return "constant", None, None

    # pt2 layout: JSON configs + one raw payload per storage group
    def _from_config(self, cfg: str, folder: str, group: str) -> list[TensorEntry]:
        config = decode_payload_config(self.archive.read(cfg, limit=MAX_JSON_BYTES), cfg)
        out = []
        checked: dict[tuple[int, int], int] = {}  # (id of a meta of config, payload size) → its nbytes
        for fqn, pm in config.items():
            member = folder + pm.path_name
            info = self.archive.get(member)
            if info is None:
                raise PT2FormatError(cfg, f"'{fqn}': payload member {member} is missing")
            kind, persistent, gname = self._kind(fqn, group, pm.is_param, pm.path_name)
            meta = pm.tensor_meta
            if pm.use_pickle:
                prefix = pm.path_name.rstrip("0123456789").rstrip("_")
                reason = _UNREADABLE.get(prefix, f"pickled payload of unknown kind '{pm.path_name}'")
                if meta is None and gname:
                    meta = self.program.graph.tensor_values.get(gname)
                out.append(TensorEntry(fqn, gname, kind, meta, member, logical_nbytes(meta), False,
                                       reason, persistent, None, self.byteorder))
                continue
            if meta is None:
                raise PT2FormatError(cfg, f"'{fqn}': raw payload without tensor_meta")
            nbytes = checked.get((id(meta), info.size))
            if nbytes is None:  # the decoder shares equal metas: most payloads repeat one checked
                _check_payload(member, fqn, meta, info.size)
                nbytes = checked[id(meta), info.size] = logical_nbytes(meta)
            out.append(TensorEntry(fqn, gname, kind, meta, member, nbytes, True, None,
                                   persistent, functools.partial(self.archive.view, member), self.byteorder))
        return out

    # 2.8 and legacy layouts: a torch.save dict per group
    def _from_pickle(self, member: str, group: str) -> list[TensorEntry]:
        info = self.archive.info(member)
        if info.size == 0:
            return []
        try:
            ts = load_torch_save(self.archive.view(member), member)
        except PT2FormatError as e:
            if group == "constants" and "forbidden pickle global" in e.reason and self._has_custom_objs():
                return self._undecoded_constants(member, e.reason)
            raise
        if not isinstance(ts.obj, dict):
            raise PT2FormatError(member, f"expected a dict of tensors, got {type(ts.obj).__name__}")
        out = []
        for fqn, t in ts.obj.items():
            if not isinstance(fqn, str):
                raise PT2FormatError(member, f"non-string key {fqn!r}")
            kind, persistent, gname = self._kind(fqn, group, getattr(t, "is_param", False))
            if not isinstance(t, PickledTensor):
                out.append(TensorEntry(fqn, gname, kind, None, member, 0, False,
                                       f"not a tensor ({type(t).__name__})", persistent))
                continue
            meta = t.meta()
            storage_member = f"{member}:{ts.storage_member(t.storage)}"
            out.append(TensorEntry(fqn, gname, kind, meta, storage_member, logical_nbytes(meta), True,
                                   None, persistent, functools.partial(ts.storage_view, t.storage),
                                   ts.byteorder))
        return out

    def _has_custom_objs(self) -> bool:
        return any(s.kind is S.InputKind.CUSTOM_OBJ for s in self.program.signature.input_specs)

    def _undecoded_constants(self, member: str, reason: str) -> list[TensorEntry]:
        """The constants pickle holds script objects: report its entries as unreadable."""
        out = []
        for spec in self.program.signature.input_specs:
            if spec.kind in (S.InputKind.TENSOR_CONSTANT, S.InputKind.CUSTOM_OBJ) or \
                    (spec.kind is S.InputKind.BUFFER and spec.persistent is False):
                meta = self.program.graph.tensor_values.get(spec.name)
                out.append(TensorEntry(spec.target, spec.name, _KIND_OF_INPUT[spec.kind], meta, member,
                                       logical_nbytes(meta), False, f"constants pickle not decoded: {reason}",
                                       spec.persistent))
        return out


def _check_payload(member: str, fqn: str, meta: S.TensorMeta, size: int) -> None:
    """The payload ``member`` of ``size`` bytes can hold ``meta``'s view (checked at open)."""
    d = DTYPES.get(meta.dtype)
    if d is None:
        raise PT2FormatError(member, f"tensor '{fqn}': unsupported dtype {meta.dtype!r}")
    if size % d.itemsize:
        raise PT2FormatError(member, f"tensor '{fqn}': payload of {size} bytes is not a multiple of the "
                                     f"{d.itemsize}-byte {meta.dtype.torch_name} element")
    try:
        check_geometry(size // d.itemsize if size else None, meta.sizes, meta.strides, meta.storage_offset)
    except ValueError as e:
        raise PT2FormatError(member, f"tensor '{fqn}': {e}") from None
