"""The inputs a verification runs on (torch-free): :func:`choose_inputs`.

In order of preference: the user's ``.npy`` files (one per tensor user input, in call order);
the package's sample inputs when present and readable by the restricted unpickler; seeded
random tensors of the inputs' shapes and dtypes (symbolic dims take their traced example value
or the ``input_shapes`` given). Arrays keep the program's dtypes (bfloat16 inputs are given as
float32 values and cast back by the PyTorch runner through ``torch_dtypes``).
"""
from __future__ import annotations

import logging
import os
from typing import Any, Sequence

import numpy as np

from ..errors import PT2Error
from ..reader import schema as S
from ..reader.tensors import DTYPES, to_float32
from ..records import field, record
from .errors import VerifyError

log = logging.getLogger(__name__)

_RAW_BITS = {st for st, dt in DTYPES.items() if dt.raw_bits}


@record
class ModelInputs:
    """The tensor user inputs of a program, by graph name, in call order."""

    names: list[str]
    arrays: list[np.ndarray]
    torch_dtypes: list[str]  #: ``torch.<name>`` of each input (``float32``, ``int64``...)
    source: str  #: ``user`` | ``sample`` | ``random``
    notes: list[str] = field(default_factory=list)  #: why sample inputs were not used, etc.

    def as_dict(self) -> dict[str, np.ndarray]:
        return dict(zip(self.names, self.arrays))


def _tensor_user_inputs(ep) -> list:
    return [i for i in ep.signature.user_inputs if i.kind is S.InputKind.USER_INPUT and i.meta is not None]


def _as_numpy(value, meta: S.TensorMeta, where: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        if isinstance(value, (int, float, bool)):
            value = np.asarray(value)
        else:
            raise VerifyError(f"{where}: expected a tensor, got {type(value).__name__}")
    if meta.dtype in _RAW_BITS:
        return to_float32(value, meta.dtype)
    return np.array(value)  # own, writable copy


def _check_shape(arr: np.ndarray, meta: S.TensorMeta, where: str) -> None:
    if arr.ndim != len(meta.sizes):
        raise VerifyError(f"{where}: rank {arr.ndim} {list(arr.shape)}, the model input has rank "
                          f"{len(meta.sizes)} {meta.shape_str()}")
    for k, (got, want) in enumerate(zip(arr.shape, meta.sizes)):
        if isinstance(want, int) and got != want:
            raise VerifyError(f"{where}: dim {k} is {got}, the model input needs {want} (shape {meta.shape_str()})")


def _flatten_like(tree, obj, out: dict[str, Any], where: str) -> None:
    """Walk ``tree`` (the program's input PyTree) and ``obj`` together; leaves by graph name."""
    if tree.is_leaf:
        if tree.name is not None:
            out[tree.name] = obj
        return
    if tree.type in ("dict", "OrderedDict", "defaultdict"):
        if not isinstance(obj, dict):
            raise VerifyError(f"{where}: expected a dict, got {type(obj).__name__}")
        keys = list(tree.context or [])
        for key, child in zip(keys, tree.children):
            if key not in obj:
                raise VerifyError(f"{where}: missing key {key!r}")
            _flatten_like(child, obj[key], out, where)
        return
    if isinstance(obj, dict):
        obj = list(obj.values())
    if not isinstance(obj, (tuple, list)) or len(obj) != len(tree.children):
        raise VerifyError(f"{where}: structure does not match the program's inputs ({tree.type} of "
                          f"{len(tree.children)})")
    for child, item in zip(tree.children, obj):
        _flatten_like(child, item, out, where)


def _sample(ep) -> dict[str, Any] | None:
    pair = ep.sample_inputs()
    if pair is None:
        return None
    where = "sample inputs"
    tree = ep.signature.in_tree
    out: dict[str, Any] = {}
    if tree is not None:
        _flatten_like(tree, pair, out, where)
    else:  # old packages without an in_spec: positional arguments in order
        args = list(pair[0])
        for info, value in zip(ep.signature.user_inputs, args):
            out[info.name] = value
    return out


def _concrete_shape(meta: S.TensorMeta, given: Sequence[int] | None, where: str) -> list[int]:
    if given is not None:
        if len(given) != len(meta.sizes):
            raise VerifyError(f"{where}: input shape {list(given)} has rank {len(given)}, the model input has "
                              f"rank {len(meta.sizes)} {meta.shape_str()}")
        return [int(v) for v in given]
    shape = []
    for d in meta.sizes:
        if isinstance(d, int):
            shape.append(d)
        elif getattr(d, "hint", None) is not None:
            shape.append(int(d.hint))
        else:
            raise VerifyError(f"{where}: dim {d} has no example value; give --inputshape or --input FILE.npy")
    return shape


def _random(meta: S.TensorMeta, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    name = meta.dtype.torch_name
    if name == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if name.startswith(("int", "uint")):
        return rng.integers(0, 10, size=shape).astype(np.dtype(name))
    if name.startswith("complex"):
        raise VerifyError(f"complex input ({name}) is not supported by ncnn")
    arr = rng.standard_normal(size=shape).astype(np.float32)
    return arr.astype(np.float64) if name == "float64" else arr.astype(np.float16) if name == "float16" else arr


def choose_inputs(ep, *, files: Sequence[str | os.PathLike] = (), input_shapes: Sequence[Sequence[int]] | None = None,
                  seed: int = 0, use_sample: bool = True) -> ModelInputs:
    """The inputs to verify ``ep`` (an :class:`engine.ExportedProgram`) on."""
    infos = _tensor_user_inputs(ep)
    names = [i.name for i in infos]
    dtypes = [i.meta.dtype.torch_name for i in infos]
    notes: list[str] = []
    if files:
        if len(files) != len(infos):
            raise VerifyError(f"{len(files)} input file(s) given, the model has {len(infos)} tensor input(s) "
                              f"({', '.join(names)})")
        arrays = []
        for f, info in zip(files, infos):
            try:
                arr = np.load(f, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise VerifyError(f"{f}: cannot read as .npy: {e}") from None
            arr = _as_numpy(arr, info.meta, str(f))
            _check_shape(arr, info.meta, f"{f} (input {info.name})")
            arrays.append(arr)
        return ModelInputs(names, arrays, dtypes, "user", notes)
    if use_sample and input_shapes is None:
        try:
            sample = _sample(ep)
        except (PT2Error, ValueError) as e:
            sample = None
            notes.append(f"sample inputs not used: {e}")
        if sample is not None:
            try:
                arrays = [_as_numpy(sample[n], i.meta, f"sample input {n}") for n, i in zip(names, infos)]
                for arr, info in zip(arrays, infos):
                    _check_shape(arr, info.meta, f"sample input {info.name}")
                return ModelInputs(names, arrays, dtypes, "sample", notes)
            except (KeyError, VerifyError) as e:
                notes.append(f"sample inputs not used: {e}")
    rng = np.random.default_rng(seed)
    arrays = []
    for k, info in enumerate(infos):
        given = input_shapes[k] if input_shapes is not None and k < len(input_shapes) else None
        shape = _concrete_shape(info.meta, given, f"input {info.name}")
        arrays.append(_random(info.meta, shape, rng))
    for n in notes:
        log.info("%s", n)
    return ModelInputs(names, arrays, dtypes, "random", notes)
