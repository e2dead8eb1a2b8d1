"""Unit tests of engine.reader.unpickler: the allow-list, storages, hostile pickles."""
from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pytest

import engine
from engine.errors import PT2FormatError
from engine.reader.schema import Device, Layout, ScalarType as ST
from engine.reader.tensors import strided_view
from engine.reader.unpickler import ALLOWED_GLOBALS, PickledTensor, load_torch_save, restricted_loads
from tests.engine.reader.unit_models import members, model_member, rewrite, tiny_pt2

torch = pytest.importorskip("torch")


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


class Hostile:
    """Unpickling this runs ``touch <marker>`` — if anything ever executes it."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_torch_save_dict_of_tensors_every_dtype():
    base = torch.arange(12, dtype=torch.float32)
    obj = {
        "f32": base.reshape(3, 4), "t": base.reshape(3, 4).t(), "slice": base[4:8],
        "p": torch.nn.Parameter(torch.ones(2, 2)), "h": torch.randn(3).half(), "bf": torch.randn(3).bfloat16(),
        "i64": torch.arange(3), "b": torch.tensor([True, False]), "u16": torch.tensor([7], dtype=torch.uint16),
        "u32": torch.tensor([1 << 31], dtype=torch.uint32), "f8": torch.randn(3).to(torch.float8_e5m2),
        "c64": torch.randn(2, dtype=torch.complex64), "scalar": torch.tensor(3.5),
        "meta": {"device": torch.device("cpu"), "size": torch.Size([1, 2]), "dt": torch.float16,
                 "layout": torch.strided, "od": __import__("collections").OrderedDict(a=1)},
    }
    ts = load_torch_save(_saved(obj), "x.pt")
    got = ts.obj
    assert got["meta"] == {"device": Device("cpu"), "size": (1, 2), "dt": ST.HALF, "layout": Layout.STRIDED,
                           "od": {"a": 1}}
    assert got["p"].is_param and not got["f32"].is_param
    assert got["f32"].storage.key == got["t"].storage.key == got["slice"].storage.key
    for k, t in obj.items():
        if k == "meta":
            continue
        pt = got[k]
        assert isinstance(pt, PickledTensor) and pt.size == tuple(t.shape) and pt.stride == t.stride()
        arr = strided_view(ts.storage_view(pt.storage), pt.dtype, pt.size, pt.stride, pt.storage_offset)
        want = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        assert np.ascontiguousarray(arr).tobytes() == want, k
    assert got["slice"].storage_offset == 4


def test_hostile_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    for data in (pickle.dumps(Hostile(marker), protocol=p) for p in (0, 2, 5)):
        with pytest.raises(PT2FormatError, match="forbidden pickle global (posix|os|nt).system"):
            restricted_loads(data, "m")
    with pytest.raises(PT2FormatError, match="forbidden pickle global (posix|os|nt).system") as e:
        load_torch_save(_saved({"w": torch.ones(1), "evil": Hostile(marker)}), "outer:weights.pt")
    assert e.value.member == "outer:weights.pt:archive/data.pkl"
    assert not marker.exists()


def test_hostile_payloads_inside_packages(tmp_path):
    """A hostile legacy state dict refuses the package; hostile sample inputs refuse only
    sample_inputs(). Nothing runs either way."""
    marker = tmp_path / "pwned"
    path, ep = tiny_pt2()
    from torch._export.serde.serialize import serialize

    art = serialize(ep)
    legacy = {"serialized_exported_program.json": art.exported_program,
              "serialized_state_dict.pt": _saved({"0.weight": Hostile(marker)}),
              "serialized_constants.pt": art.constants, "serialized_example_inputs.pt": art.example_inputs,
              "version": b"8.20"}
    from tests.engine.reader.unit_models import write_zip

    bad = write_zip(tmp_path / "legacy.pt2", legacy)
    with pytest.raises(engine.PT2FormatError, match="forbidden pickle global") as e:
        engine.load(bad)
    assert "serialized_state_dict.pt" in e.value.member
    root = model_member(path).split("/")[0]
    bad = rewrite(path, tmp_path / "si.pt2", {f"{root}/data/sample_inputs/model.pt":
                                              _saved(((Hostile(marker),), {}))})
    with engine.load(bad) as pkg:
        with pytest.raises(engine.PT2FormatError, match="forbidden pickle global"):
            pkg.model.sample_inputs()
    assert not marker.exists()


@pytest.mark.parametrize("module, name", [("builtins", "eval"), ("builtins", "getattr"), ("torch", "load"),
                                          ("torch._utils", "_rebuild_tensor"), ("torch.nn", "Module"),
                                          ("numpy.core.multiarray", "_reconstruct"), ("subprocess", "Popen"),
                                          ("torch._tensor", "_rebuild_from_type_v2")])
def test_everything_off_the_list_is_refused_by_name(module, name):
    data = b"\x80\x02c" + f"{module}\n{name}\n".encode() + b")R."
    with pytest.raises(PT2FormatError, match=f"forbidden pickle global {module}.{name}"):
        restricted_loads(data, "m")
    assert (module, name) not in ALLOWED_GLOBALS


class SubTensor(torch.Tensor):
    pass


def test_tensor_subclass_in_a_torch_save_is_refused():
    data = _saved({"w": torch.ones(2).as_subclass(SubTensor)})
    with pytest.raises(PT2FormatError, match="forbidden pickle global"):
        load_torch_save(data, "w.pt")


@pytest.mark.parametrize("data, needle", [
    (b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01", "corrupt pickle"),
    (b"\x80\x02X\x03\x00\x00\x00abcq\x00Q.", "persistent id"),
    (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(X\x01\x00\x00\x00xK\x00))\x89tR.", "not a storage"),
])
def test_malformed_pickles(data, needle):
    with pytest.raises(PT2FormatError, match=needle):
        restricted_loads(data, "m")


def test_storage_shorter_than_declared(tmp_path):
    data = _saved({"w": torch.arange(100, dtype=torch.float32)})
    from engine.reader.archive import ZipArchive

    z = ZipArchive.from_buffer(data, "w.pt")
    contents = {m.name: bytes(z.view(m.name)) for m in z.members}
    key = next(n for n in contents if "/data/" in n and not n.endswith(".pkl"))
    contents[key] = contents[key][:40]
    from tests.engine.reader.unit_models import write_zip

    short = write_zip(tmp_path / "short.pt", contents).read_bytes()
    with pytest.raises(PT2FormatError, match="shorter than the 400"):
        load_torch_save(short, "w.pt")


def test_torchscript_and_legacy_formats_are_named():
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), buf)
    with pytest.raises(PT2FormatError, match="TorchScript"):
        load_torch_save(buf.getvalue(), "x.pt")
    buf = io.BytesIO()
    torch.save({"a": 1}, buf, _use_new_zipfile_serialization=False)
    with pytest.raises(PT2FormatError, match="legacy"):
        load_torch_save(buf.getvalue(), "x.pt")


def test_sample_inputs_are_numpy():
    path, _ = tiny_pt2()
    with engine.load(path) as pkg:
        args, kwargs = pkg.model.sample_inputs()
    assert kwargs == {} and len(args) == 1 and args[0].shape == (1, 4) and args[0].dtype == np.float32
    assert members(path)  # the file is still readable after close
