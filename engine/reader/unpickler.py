"""A restricted unpickler for ``torch.save`` zips, and the lazy tensors it produces.

``torch.save`` writes ``<prefix>/data.pkl`` plus one member per storage at
``<prefix>/data/<key>``. :class:`RestrictedUnpickler` resolves only the globals on the allow-list
(``collections.OrderedDict``; ``torch._utils._rebuild_tensor_v2`` / ``_rebuild_tensor_v3`` /
``_rebuild_parameter``; the legacy ``*Storage`` types and ``UntypedStorage``; dtype globals;
``torch.device``, ``torch.Size``, ``torch.serialization._get_layout``) to harmless local
stand-ins — nothing from torch is imported or executed. Any other global is refused with
``forbidden pickle global <module>.<name>``. Storages come back as :class:`StorageRef` (no
bytes read) and tensors as :class:`PickledTensor` (geometry only); :func:`load_torch_save`
opens the zip, unpickles ``data.pkl`` and validates every storage reference against the size of
its member.
"""
from __future__ import annotations

import collections
import io
import logging
import pickle

from engine.errors import PT2FormatError
from engine.reader.archive import ZipArchive
from engine.reader.schema import Device, Layout, ScalarType, TensorMeta
from engine.reader.tensors import DTYPES

log = logging.getLogger(__name__)

#: Largest ``data.pkl`` accepted (it holds only structure; storages are separate members).
MAX_PICKLE_BYTES = 64 << 20

ST = ScalarType
_STORAGE_TYPES = {
    "FloatStorage": ST.FLOAT, "DoubleStorage": ST.DOUBLE, "HalfStorage": ST.HALF,
    "BFloat16Storage": ST.BFLOAT16, "LongStorage": ST.LONG, "IntStorage": ST.INT,
    "ShortStorage": ST.SHORT, "CharStorage": ST.CHAR, "ByteStorage": ST.BYTE,
    "BoolStorage": ST.BOOL, "ComplexFloatStorage": ST.COMPLEXFLOAT,
    "ComplexDoubleStorage": ST.COMPLEXDOUBLE,
}
_DTYPE_NAMES = {
    "uint8": ST.BYTE, "int8": ST.CHAR, "int16": ST.SHORT, "short": ST.SHORT, "int32": ST.INT,
    "int": ST.INT, "int64": ST.LONG, "long": ST.LONG, "float16": ST.HALF, "half": ST.HALF,
    "float32": ST.FLOAT, "float": ST.FLOAT, "float64": ST.DOUBLE, "double": ST.DOUBLE,
    "complex32": ST.COMPLEXHALF, "chalf": ST.COMPLEXHALF, "complex64": ST.COMPLEXFLOAT,
    "cfloat": ST.COMPLEXFLOAT, "complex128": ST.COMPLEXDOUBLE, "cdouble": ST.COMPLEXDOUBLE,
    "bool": ST.BOOL, "bfloat16": ST.BFLOAT16, "uint16": ST.UINT16, "uint32": ST.UINT32,
    "uint64": ST.UINT64, "float8_e4m3fn": ST.FLOAT8E4M3FN, "float8_e5m2": ST.FLOAT8E5M2,
    "float8_e4m3fnuz": ST.FLOAT8E4M3FNUZ, "float8_e5m2fnuz": ST.FLOAT8E5M2FNUZ,
    "float8_e8m0fnu": ST.FLOAT8E8M0FNU,
}
_LAYOUTS = {"torch.strided": Layout.STRIDED, "torch.sparse_coo": Layout.SPARSE_COO,
            "torch.sparse_csr": Layout.SPARSE_CSR, "torch.sparse_csc": Layout.SPARSE_CSC,
            "torch.sparse_bsr": Layout.SPARSE_BSR, "torch.sparse_bsc": Layout.SPARSE_BSC,
            "torch._mkldnn": Layout._MKLDNN}


class ForbiddenGlobal(pickle.UnpicklingError):
    def __init__(self, module: str, name: str):
        super().__init__(f"forbidden pickle global {module}.{name}")
        self.global_name = f"{module}.{name}"


class StorageType:
    """Stand-in for a ``torch.*Storage`` class: its dtype (None for UntypedStorage = bytes)."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype: ScalarType | None):
        self.name = name
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"StorageType({self.name})"


class StorageRef:
    """A storage named by a pickle's persistent id: ``key`` is its member ``data/<key>``;
    ``numel`` counts elements of ``dtype`` (bytes when untyped)."""

    __slots__ = ("dtype", "key", "location", "numel")

    def __init__(self, dtype: ScalarType | None, key: str, location: str, numel: int):
        self.dtype = dtype
        self.key = key
        self.location = location
        self.numel = numel

    @property
    def nbytes(self) -> int:
        return self.numel * (DTYPES[self.dtype].itemsize if self.dtype is not None else 1)

    def __repr__(self) -> str:
        return f"StorageRef({self.key!r}, {self.dtype}, numel={self.numel})"


class PickledTensor:
    """A tensor found in a pickle: its storage and geometry (elements). No data is read."""

    __slots__ = ("storage", "dtype", "storage_offset", "size", "stride", "requires_grad", "is_param")

    def __init__(self, storage: StorageRef, dtype: ScalarType, storage_offset: int, size: tuple,
                 stride: tuple, requires_grad: bool, is_param: bool = False):
        self.storage = storage
        self.dtype = dtype
        self.storage_offset = storage_offset
        self.size = size
        self.stride = stride
        self.requires_grad = requires_grad
        self.is_param = is_param

    def meta(self) -> TensorMeta:
        return TensorMeta(self.dtype, self.size, self.stride, self.storage_offset, self.requires_grad)

    def __repr__(self) -> str:
        return f"PickledTensor({self.dtype.torch_name}, {list(self.size)}, storage={self.storage.key!r})"


def _int_tuple(v, what: str) -> tuple:
    if not isinstance(v, (tuple, list)) or not all(type(x) is int for x in v):
        raise pickle.UnpicklingError(f"tensor {what} is not a tuple of ints: {v!r}")
    return tuple(v)


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, hooks=None,
                    metadata=None, *, dtype=None) -> PickledTensor:
    if not isinstance(storage, StorageRef):
        raise pickle.UnpicklingError(f"tensor storage is {type(storage).__name__}, not a storage")
    if type(storage_offset) is not int:
        raise pickle.UnpicklingError("tensor storage offset is not an int")
    dt = dtype if dtype is not None else storage.dtype
    if not isinstance(dt, ScalarType):
        raise pickle.UnpicklingError("tensor without a dtype")
    return PickledTensor(storage, dt, storage_offset, _int_tuple(size, "size"),
                         _int_tuple(stride, "stride"), bool(requires_grad))


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, hooks=None, metadata=None):
    return _rebuild_tensor(storage, storage_offset, size, stride, requires_grad, hooks, metadata)


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, hooks, dtype, metadata=None):
    if not isinstance(dtype, ScalarType):
        raise pickle.UnpicklingError(f"dtype argument is {type(dtype).__name__}")
    return _rebuild_tensor(storage, storage_offset, size, stride, requires_grad, hooks, metadata, dtype=dtype)


def _rebuild_parameter(data, requires_grad=True, hooks=None):
    if not isinstance(data, PickledTensor):
        raise pickle.UnpicklingError("parameter data is not a tensor")
    data.is_param = True
    data.requires_grad = bool(requires_grad)
    return data


def _device(type_or_str, index=None) -> Device:
    if not isinstance(type_or_str, str) or (index is not None and type(index) is not int):
        raise pickle.UnpicklingError("bad torch.device arguments")
    if index is None and ":" in type_or_str:
        t, _, i = type_or_str.partition(":")
        if i.isdigit():
            return Device(t, int(i))
    return Device(type_or_str, index)


def _size(seq=()) -> tuple:
    return _int_tuple(seq, "Size")


def _get_layout(name) -> Layout:
    try:
        return _LAYOUTS[name]
    except (KeyError, TypeError):
        raise pickle.UnpicklingError(f"unknown layout {name!r}") from None


def _allowed() -> dict[tuple[str, str], object]:
    table: dict[tuple[str, str], object] = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        ("torch", "device"): _device,
        ("torch", "Size"): _size,
        ("torch.serialization", "_get_layout"): _get_layout,
        ("torch", "UntypedStorage"): StorageType("UntypedStorage", None),
        ("torch.storage", "UntypedStorage"): StorageType("UntypedStorage", None),
    }
    for name, st in _STORAGE_TYPES.items():
        table[("torch", name)] = StorageType(name, st)
    for name, st in _DTYPE_NAMES.items():
        table[("torch", name)] = st
    return table


ALLOWED_GLOBALS = _allowed()


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles with :data:`ALLOWED_GLOBALS` only; storages become :class:`StorageRef`."""

    def find_class(self, module: str, name: str):
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except (KeyError, TypeError):
            raise ForbiddenGlobal(str(module), str(name)) from None

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id {str(pid)[:80]}")
        _, stype, key, location, numel = pid
        if not isinstance(stype, StorageType):
            raise pickle.UnpicklingError("persistent id without a storage type")
        if not isinstance(key, str) or not isinstance(location, str) or type(numel) is not int or numel < 0:
            raise pickle.UnpicklingError("malformed storage persistent id")
        return StorageRef(stype.dtype, key, location, numel)


def restricted_loads(data: bytes, member: str):
    """Unpickle ``data`` with the allow-list; any problem is a PT2FormatError naming ``member``."""
    try:
        return RestrictedUnpickler(io.BytesIO(data)).load()
    except ForbiddenGlobal as e:
        raise PT2FormatError(member, str(e)) from None
    except RecursionError:
        raise PT2FormatError(member, "pickle nested too deeply") from None
    except MemoryError:
        raise PT2FormatError(member, "pickle too large to decode") from None
    except Exception as e:  # pickle raises many types on corrupt input
        raise PT2FormatError(member, f"corrupt pickle: {type(e).__name__}: {e}") from None


class TorchSave:
    """An opened ``torch.save`` zip: the unpickled object plus access to its storages."""

    def __init__(self, archive: ZipArchive, prefix: str, obj, label: str, byteorder: str):
        self.archive = archive
        self.prefix = prefix
        self.obj = obj
        self.label = label
        self.byteorder = byteorder

    def storage_member(self, ref: StorageRef) -> str:
        return f"{self.prefix}data/{ref.key}"

    def storage_view(self, ref: StorageRef) -> memoryview:
        """The storage's bytes (zero-copy when stored), CRC-checked on first use."""
        return self.archive.view(self.storage_member(ref))[:ref.nbytes]

    def tensors(self):
        """Every PickledTensor reachable through dicts, lists and tuples of the object."""
        out: list[PickledTensor] = []
        stack = [self.obj]
        seen = set()
        while stack:
            o = stack.pop()
            if isinstance(o, PickledTensor):
                out.append(o)
            elif isinstance(o, dict) and id(o) not in seen:
                seen.add(id(o))
                stack.extend(o.values())
            elif isinstance(o, (list, tuple)) and id(o) not in seen:
                seen.add(id(o))
                stack.extend(o)
        return out

    def validate(self) -> None:
        """Every tensor's storage exists and is large enough for its geometry."""
        from engine.reader.tensors import check_geometry

        for t in self.tensors():
            name = self.storage_member(t.storage)
            info = self.archive.get(name)
            if info is None:
                raise PT2FormatError(f"{self.label}:{name}", "storage member missing")
            if t.storage.dtype is not None and t.storage.dtype != t.dtype:
                raise PT2FormatError(f"{self.label}:{name}", "storage viewed with a different dtype")
            if info.size < t.storage.nbytes:
                raise PT2FormatError(f"{self.label}:{name}", f"storage is {info.size} bytes, shorter than "
                                                             f"the {t.storage.nbytes} its pickle declares")
            item = DTYPES[t.dtype].itemsize
            try:
                check_geometry(t.storage.nbytes // item, t.size, t.stride, t.storage_offset)
            except ValueError as e:
                raise PT2FormatError(f"{self.label}:{name}", str(e)) from None


def load_torch_save(buffer, label: str) -> TorchSave:
    """Open the ``torch.save`` zip in ``buffer`` (bytes or a memoryview of a stored member)
    and unpickle its ``data.pkl`` with the allow-list. ``label`` names it in errors."""
    head = bytes(buffer[:2]) if len(buffer) else b""
    if head[:1] == b"\x80":
        raise PT2FormatError(label, "legacy (pre-1.6, non-zip) torch.save format is not supported")
    archive = ZipArchive.from_buffer(buffer, label)
    names = [m.name for m in archive.members if not m.is_dir]
    if not names:
        raise PT2FormatError(label, "empty torch.save archive")
    prefix = names[0].split("/", 1)[0] + "/" if "/" in names[0] else ""
    if f"{prefix}constants.pkl" in archive:
        raise PT2FormatError(label, "is a TorchScript archive, not a torch.save payload")
    pkl = f"{prefix}data.pkl"
    if pkl not in archive:
        raise PT2FormatError(label, f"torch.save archive without {pkl}")
    byteorder = "little"
    bo = archive.get(f"{prefix}byteorder")
    if bo is not None:
        byteorder = archive.read(bo.name, limit=16).decode("ascii", "replace").strip()
        if byteorder not in ("little", "big"):
            raise PT2FormatError(f"{label}:{bo.name}", f"unknown byte order {byteorder!r}")
    data = archive.read(pkl, limit=MAX_PICKLE_BYTES)
    obj = restricted_loads(data, f"{label}:{pkl}")
    ts = TorchSave(archive, prefix, obj, label, byteorder)
    ts.validate()
    return ts
