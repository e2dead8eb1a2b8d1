"""Tensor payloads: the dtype table, bounds-checked zero-copy views, and the per-model store.

* :data:`DTYPES` maps every :class:`~engine.reader.schema.ScalarType` to the numpy dtype used
  to view it. numpy has no bfloat16, float8 or complex32: those are viewed as their raw bits
  (``uint16``, ``uint8``, ``uint32``) and :func:`to_float32` converts them.
* :func:`check_geometry` validates sizes/strides/offset against a payload's element count
  *before* any view is made (no negative strides, no symbolic sizes, everything in bounds).
* :func:`strided_view` makes the read-only numpy view (``as_strided`` over ``frombuffer``),
  honouring the byte order; a 0-byte payload is a tensor of zeros.
* :class:`TensorEntry` describes one parameter / buffer / constant payload and
  :class:`TensorStore` serves them by FQN (``conv.weight``) or graph name (``p_conv_weight``).
  Nothing is read until a tensor is asked for; a payload's CRC is checked on first read.
"""
from __future__ import annotations

import functools
import logging
import math
from typing import Callable

from engine.errors import PT2FormatError
from engine.reader.schema import ScalarType, TensorMeta, is_contiguous

from ..records import field, record

log = logging.getLogger(__name__)

#: Largest number of elements a tensor may claim (2**48: far past any real model).
MAX_NUMEL = 1 << 48
#: numpy's dimension limit.
MAX_DIMS = 64
#: A 0-byte payload (a fake/empty tensor) is materialized as zeros up to this size; larger
#: ones are a zero-strided broadcast view so no allocation follows a size read from the file.
MAX_ZEROS_BYTES = 256 << 20


@record(frozen=True)
class DType:
    """How a ScalarType is viewed: numpy type code (no byte order), element size, and whether
    the view holds raw bits rather than the values (bfloat16, float8, complex32)."""

    code: str
    itemsize: int
    raw_bits: bool = False


DTYPES: dict[ScalarType, DType] = {
    ScalarType.BYTE: DType("u1", 1),
    ScalarType.CHAR: DType("i1", 1),
    ScalarType.SHORT: DType("i2", 2),
    ScalarType.INT: DType("i4", 4),
    ScalarType.LONG: DType("i8", 8),
    ScalarType.HALF: DType("f2", 2),
    ScalarType.FLOAT: DType("f4", 4),
    ScalarType.DOUBLE: DType("f8", 8),
    ScalarType.COMPLEXHALF: DType("u4", 4, True),
    ScalarType.COMPLEXFLOAT: DType("c8", 8),
    ScalarType.COMPLEXDOUBLE: DType("c16", 16),
    ScalarType.BOOL: DType("b1", 1),
    ScalarType.BFLOAT16: DType("u2", 2, True),
    ScalarType.UINT16: DType("u2", 2),
    ScalarType.FLOAT8E4M3FN: DType("u1", 1, True),
    ScalarType.FLOAT8E5M2: DType("u1", 1, True),
    ScalarType.FLOAT8E4M3FNUZ: DType("u1", 1, True),
    ScalarType.FLOAT8E5M2FNUZ: DType("u1", 1, True),
    ScalarType.FLOAT8E8M0FNU: DType("u1", 1, True),
    ScalarType.UINT32: DType("u4", 4),
    ScalarType.UINT64: DType("u8", 8),
}


def dtype_info(st: ScalarType) -> DType:
    try:
        return DTYPES[st]
    except KeyError:
        raise ValueError(f"unknown dtype {st!r}") from None


@functools.cache  # made once per (dtype, byte order): every stored tensor asks
def numpy_dtype(st: ScalarType, byteorder: str = "little"):
    """The numpy dtype that views ``st`` (raw bits for bfloat16/float8/complex32)."""
    import numpy as np

    d = dtype_info(st)
    if d.itemsize == 1:
        return np.dtype(d.code)
    return np.dtype(("<" if byteorder == "little" else ">") + d.code)


# ------------------------------------------------------------------------------ geometry
def check_geometry(storage_numel: int | None, sizes, strides, offset) -> int:
    """Validate a strided view over a storage of ``storage_numel`` elements (None = the
    payload is empty and zeros will be made). Returns the number of storage elements the view
    needs. Raises ValueError with the reason."""
    if len(sizes) != len(strides):
        raise ValueError(f"{len(sizes)} sizes but {len(strides)} strides")
    if len(sizes) > MAX_DIMS:
        raise ValueError(f"{len(sizes)} dimensions (more than {MAX_DIMS})")
    if type(offset) is not int:
        raise ValueError("symbolic storage offset in payload metadata")
    if offset < 0:
        raise ValueError(f"negative storage offset {offset}")
    numel = 1
    span = 0
    for n, s in zip(sizes, strides):
        if type(n) is not int or type(s) is not int:
            raise ValueError("symbolic size or stride in payload metadata")
        if n < 0:
            raise ValueError(f"negative size in {list(sizes)}")
        if s < 0:
            raise ValueError(f"negative stride in {list(strides)} (not supported)")
        numel *= n
        span += (n - 1) * s
    if numel > MAX_NUMEL:
        raise ValueError(f"absurd size {list(sizes)} ({numel} elements)")
    need = 0 if numel == 0 else offset + 1 + span
    if storage_numel is not None and need > storage_numel:
        raise ValueError(f"sizes {list(sizes)}, strides {list(strides)} and offset {offset} need "
                         f"{need} elements but the payload holds {storage_numel}")
    return need


def view_geometry(nbytes: int, st: ScalarType, sizes, strides, offset: int) -> tuple[int, bool]:
    """``(need, contiguous)`` of a view of a non-empty payload of ``nbytes`` bytes as ``st``
    (see :func:`check_geometry`); raises ValueError with the reason when it does not fit."""
    item = dtype_info(st).itemsize
    if nbytes % item:
        raise ValueError(f"payload of {nbytes} bytes is not a multiple of the {item}-byte {st.torch_name} element")
    return check_geometry(nbytes // item, sizes, strides, offset), is_contiguous(sizes, strides)


def strided_view(buf, st: ScalarType, sizes, strides, offset: int, *, byteorder: str = "little",
                 geometry: tuple[int, bool] | None = None):
    """A read-only numpy view of ``buf`` (the whole storage, from byte 0) as ``st`` with the
    given geometry, in elements. Validates first; raises ValueError with the reason.
    ``geometry``: what :func:`view_geometry` gave for this payload size and geometry (a caller
    that views many payloads of one geometry checks it once)."""
    import numpy as np

    dt = numpy_dtype(st, byteorder)
    item = dt.itemsize
    nbytes = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
    sizes, strides = tuple(sizes), tuple(strides)
    if nbytes == 0:
        need = check_geometry(None, sizes, strides, offset)
        return _zeros(dt, sizes, strides, offset, need)
    need, contiguous = geometry or view_geometry(nbytes, st, sizes, strides, offset)
    numel = nbytes // item
    if need and contiguous:  # the common case, without as_strided's detour
        arr = np.frombuffer(buf, dtype=dt, count=need - offset, offset=offset * item).reshape(sizes)
        arr.flags.writeable = False
        return arr
    from numpy.lib.stride_tricks import as_strided

    base = np.frombuffer(buf, dtype=dt, count=numel)
    start = base[offset:] if need else base[:0]
    arr = as_strided(start, shape=sizes, strides=tuple(s * item for s in strides), writeable=False)
    return arr


def _zeros(dt, sizes, strides, offset, need):
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    if need * dt.itemsize > MAX_ZEROS_BYTES:
        return np.broadcast_to(np.zeros((), dtype=dt), sizes)
    base = np.zeros(max(need, 1), dtype=dt)
    base.flags.writeable = False
    return as_strided(base[offset:] if need else base[:0], shape=sizes,
                      strides=tuple(s * dt.itemsize for s in strides), writeable=False)


# ------------------------------------------------------------------------------ conversion
def raw_real(st: ScalarType) -> bool:
    """Whether ``st`` is a real float numpy holds only as its bits (bfloat16, every float8)."""
    return DTYPES[st].raw_bits and st is not ScalarType.COMPLEXHALF


def bf16_values(arr):
    """``arr`` rounded to bfloat16 (to nearest, ties to even, as PyTorch casts), held as float32:
    numpy has no bfloat16, and the engine holds bfloat16 weights as float32 values too. PyTorch
    computes a bfloat16 op in float32 and rounds its result, so a folded bfloat16 op is this
    rounding of the float32 result."""
    import numpy as np

    a = np.array(arr, dtype=np.float32, order="C")
    flat = a.reshape(-1)  # an array, never a numpy scalar: its uint32 sums wrap without a warning
    bits = flat.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return np.where(np.isnan(flat), flat, rounded.view(np.float32)).reshape(a.shape)


def to_float32(arr, st: ScalarType):
    """Values of a view made for ``st`` as float32 (complex64 for complex dtypes).

    Decodes the raw-bit views: bfloat16 (upper half of a float32), every float8 format
    (e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, e8m0fnu) and complex32 (two float16)."""
    import numpy as np

    if st is ScalarType.BFLOAT16:
        return (np.asarray(arr).astype(np.uint32) << 16).view(np.float32)
    if st in _FLOAT8:
        return _float8_table(st)[np.asarray(arr, dtype=np.uint8)]
    if st is ScalarType.COMPLEXHALF:
        bits = np.ascontiguousarray(arr)
        half = (">" if bits.dtype.byteorder == ">" else "<") + "f2"
        pair = bits.view(half).reshape(np.shape(arr) + (2,)).astype(np.float32)
        return (pair[..., 0] + 1j * pair[..., 1]).astype(np.complex64)
    if st in (ScalarType.COMPLEXFLOAT, ScalarType.COMPLEXDOUBLE):
        return np.asarray(arr).astype(np.complex64)
    return np.asarray(arr).astype(np.float32)


_FLOAT8 = {
    # ScalarType: (exponent bits, mantissa bits, bias, kind)
    ScalarType.FLOAT8E4M3FN: (4, 3, 7, "fn"),
    ScalarType.FLOAT8E5M2: (5, 2, 15, "ieee"),
    ScalarType.FLOAT8E4M3FNUZ: (4, 3, 8, "fnuz"),
    ScalarType.FLOAT8E5M2FNUZ: (5, 2, 16, "fnuz"),
    ScalarType.FLOAT8E8M0FNU: (8, 0, 127, "e8m0"),
}
_F8_TABLES: dict[ScalarType, object] = {}


def _float8_table(st: ScalarType):
    """256 float32 values, one per bit pattern of the float8 format ``st``."""
    import numpy as np

    table = _F8_TABLES.get(st)
    if table is not None:
        return table
    ebits, mbits, bias, kind = _FLOAT8[st]
    vals = []
    for b in range(256):
        if kind == "e8m0":
            vals.append(math.nan if b == 255 else math.ldexp(1.0, b - bias))
            continue
        sign = -1.0 if b & 0x80 else 1.0
        e = (b >> mbits) & ((1 << ebits) - 1)
        m = b & ((1 << mbits) - 1)
        emax = (1 << ebits) - 1
        if kind == "fnuz" and b == 0x80:
            vals.append(math.nan)
        elif kind == "fn" and e == emax and m == (1 << mbits) - 1:
            vals.append(math.nan)
        elif kind == "ieee" and e == emax:
            vals.append(sign * math.inf if m == 0 else math.nan)
        elif e == 0:
            vals.append(sign * math.ldexp(m / (1 << mbits), 1 - bias))
        else:
            vals.append(sign * math.ldexp(1.0 + m / (1 << mbits), e - bias))
    table = np.array(vals, dtype=np.float32)
    table.flags.writeable = False
    _F8_TABLES[st] = table
    return table


# ------------------------------------------------------------------------------ entries
@record
class TensorEntry:
    """One stored tensor (or custom object) of a model.

    ``fqn`` is the state-dict / constant name (``conv.weight``); ``graph_name`` the graph input
    that carries it (``p_conv_weight``) or None when the graph does not use it; ``kind`` is
    ``"parameter"``, ``"buffer"``, ``"constant"`` or ``"custom_obj"``; ``meta`` its dtype and
    geometry (None for custom objects); ``member`` the zip member holding the bytes (for
    torch.save payloads ``outer-member:inner-member``); ``nbytes`` the logical size
    (elements × element size); ``readable`` False for payloads this reader will not decode
    (tensor subclasses, TorchScript and opaque objects), with ``reason`` saying why;
    ``persistent`` is set for buffers."""

    fqn: str
    graph_name: str | None
    kind: str
    meta: TensorMeta | None
    member: str | None
    nbytes: int
    readable: bool = True
    reason: str | None = None
    persistent: bool | None = None
    #: Returns the storage bytes (a memoryview, CRC-checked on first use). Internal.
    load: Callable[[], object] | None = field(default=None, repr=False, compare=False)
    #: Byte order of the payload (``"little"`` or ``"big"``).
    byteorder: str = "little"

    @property
    def dtype(self) -> ScalarType | None:
        return self.meta.dtype if self.meta is not None else None

    @property
    def shape(self) -> tuple:
        return tuple(self.meta.sizes) if self.meta is not None else ()


def logical_nbytes(meta: TensorMeta | None) -> int:
    """Elements × element size (0 when unknown or symbolic)."""
    if meta is None:
        return 0
    n = DTYPES[meta.dtype].itemsize if meta.dtype in DTYPES else 1
    for s in meta.sizes:
        if type(s) is not int:
            return 0
        n *= s
    return n


class TensorStore:
    """The stored tensors of one model, looked up by FQN or by graph input name.

    Views are created on demand (:meth:`tensor`) and cached; they are read-only and, for raw
    stored payloads, zero-copy views of the memory-mapped file, so tied weights and slices of
    one storage share memory."""

    def __init__(self, entries: list[TensorEntry], label: str):
        self.label = label
        self._entries = entries
        self._by_name: dict[str, TensorEntry] = {}
        for e in entries:
            self._by_name.setdefault(e.fqn, e)
        for e in entries:
            if e.graph_name:
                self._by_name.setdefault(e.graph_name, e)
        self._arrays: dict[str, object] = {}
        #: (id of a meta, payload bytes) → its view_geometry: the decoder shares equal metas,
        #: so most payloads repeat a geometry checked already (the entries keep the metas alive)
        self._geometry: dict[tuple[int, int], tuple[int, bool]] = {}

    def entries(self) -> list[TensorEntry]:
        """Every parameter, buffer and tensor constant, in payload-config order."""
        return [e for e in self._entries if e.kind != "custom_obj"]

    def objects(self) -> list[TensorEntry]:
        """Custom-object payloads (TorchScript / opaque objects), never decoded."""
        return [e for e in self._entries if e.kind == "custom_obj"]

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> TensorEntry:
        try:
            return self._by_name[name]
        except KeyError:
            raise PT2FormatError(name, f"no stored tensor of that name in {self.label}") from None

    def dtype(self, name: str) -> ScalarType:
        e = self.get(name)
        if e.meta is None:
            raise PT2FormatError(name, "not a tensor")
        return e.meta.dtype

    def tensor(self, name: str):
        """The tensor as a read-only numpy array (raw bits for bfloat16/float8/complex32)."""
        e = self.get(name)
        arr = self._arrays.get(e.fqn)
        if arr is not None:
            return arr
        if not e.readable:
            raise PT2FormatError(e.member or e.fqn, f"tensor '{e.fqn}' is present but unreadable: {e.reason}")
        if e.meta is None or e.load is None:
            raise PT2FormatError(e.member or e.fqn, f"'{e.fqn}' has no tensor payload")
        buf = e.load()
        m = e.meta
        try:
            nbytes = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
            geometry = self._geometry.get((id(m), nbytes))
            if geometry is None and nbytes:
                geometry = self._geometry[id(m), nbytes] = view_geometry(nbytes, m.dtype, m.sizes, m.strides,
                                                                           m.storage_offset)
            arr = strided_view(buf, m.dtype, m.sizes, m.strides, m.storage_offset, byteorder=e.byteorder,
                               geometry=geometry)
        except ValueError as err:
            raise PT2FormatError(e.member or e.fqn, f"tensor '{e.fqn}': {err}") from None
        self._arrays[e.fqn] = arr
        return arr

    def clear_cache(self) -> None:
        self._arrays.clear()
