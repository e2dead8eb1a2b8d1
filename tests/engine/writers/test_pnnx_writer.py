"""The pnnx writer: .pnnx.param lines exactly as pnnx writes them, .pnnx.bin as pnnx's stored
zip; read back by our pnnx reader, by Python's zipfile, and — for a model the pnnx CLI
converted itself — rewritten byte for byte."""
from __future__ import annotations

import logging
import subprocess
import zipfile

import numpy as np
import pytest

from engine.errors import WriteError
from engine.ir import Attribute, Graph, Provenance
from engine.writers import read_pnnx, write_pnnx

from tests.engine.writers.test_ncnn_writer_format import pnnx_cli


def _graph() -> Graph:
    g = Graph()
    x = g.new_operand("0", dtype="f32", shape=[1, 3, 8, "s77"])
    g.add_op("pnnx.Input", "pnnx_input_0", [], [x])
    w = np.arange(4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3)
    y = g.new_operand("1", dtype="f32", shape=[1, 4, 8, None])
    g.add_op("nn.Conv2d", "conv", [x], [y], provenance=Provenance(("conv2d",), ("conv",)),
             params={"in_channels": 3, "out_channels": 4, "kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1),
                     "dilation": (1, 1), "groups": 1, "bias": True, "padding_mode": "zeros"},
             attrs={"weight": Attribute(w), "bias": Attribute(np.array([1, 2, 3, 4], np.float32))}, input_names=["input"])
    z = g.new_operand("2", dtype="f32", shape=[1, 4, 8, None])
    g.add_op("pnnx.Expression", "pnnx_expr_0", [y], [z], params={"expr": "add(mul(@0,0.5),1)"})
    c = g.new_operand("3", dtype="f32")
    g.add_op("torch.cat", "torch.cat_0", [y, z], [c], params={"dim": 1, "eps": 1e-5, "scale": None, "ids": [1, -2]},
             input_names=["tensors", "tensors"])
    g.add_op("pnnx.Output", "pnnx_output_0", [c], [])
    return g


EXPECTED = """7767517
5 4
pnnx.Input               pnnx_input_0             0 1 0 #0=(1,3,8,?)f32
nn.Conv2d                conv                     1 1 0 1 bias=True dilation=(1,1) groups=1 in_channels=3 \
kernel_size=(3,3) out_channels=4 padding=(1,1) padding_mode=zeros stride=(1,1) @bias=(4)f32 @weight=(4,3,3,3)f32 \
$input=0 #0=(1,3,8,?)f32 #1=(1,4,8,?)f32
pnnx.Expression          pnnx_expr_0              1 1 1 2 expr=add(mul(@0,0.5),1) #1=(1,4,8,?)f32 #2=(1,4,8,?)f32
torch.cat                torch.cat_0              2 1 1 2 3 dim=1 eps=1.000000e-5 ids=(1,-2) scale=None \
$tensors=1 $tensors=2 #1=(1,4,8,?)f32 #2=(1,4,8,?)f32
pnnx.Output              pnnx_output_0            1 0 3
"""


def test_param_text_and_zip(tmp_path):
    g = _graph()
    write_pnnx(g, tmp_path / "m.pnnx.param", tmp_path / "m.pnnx.bin")
    assert (tmp_path / "m.pnnx.param").read_text() == EXPECTED  # no !from/!mod provenance
    with zipfile.ZipFile(tmp_path / "m.pnnx.bin") as z:
        assert z.namelist() == ["conv.bias", "conv.weight"]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
        assert z.testzip() is None
        assert np.array_equal(np.frombuffer(z.read("conv.weight"), "<f4"), np.arange(108, dtype=np.float32))
    raw = (tmp_path / "m.pnnx.bin").read_bytes()
    assert raw[:4] == b"PK\x03\x04" and raw[4:6] == b"\0\0"  # version 0, as pnnx
    assert b"PK\x06\x06" in raw and b"PK\x06\x07" in raw  # zip64 end record and locator


def test_read_back(tmp_path):
    g = _graph()
    write_pnnx(g, tmp_path / "m.pnnx.param", tmp_path / "m.pnnx.bin")
    r = read_pnnx(tmp_path / "m.pnnx.param", tmp_path / "m.pnnx.bin")
    assert [(op.type, op.name, [i.name for i in op.inputs], [o.name for o in op.outputs]) for op in r.ops] == \
        [(op.type, op.name, [i.name for i in op.inputs], [o.name for o in op.outputs]) for op in g.ops]
    conv = r.find_op("conv")
    assert conv.params["kernel_size"] == [3, 3] and conv.params["bias"] is True
    assert conv.params["padding_mode"] == "zeros" and conv.input_names == ["input"]
    assert np.array_equal(conv.attrs["weight"].data, g.find_op("conv").attrs["weight"].data)
    assert r.find_op("torch.cat_0").params == {"dim": 1, "eps": pytest.approx(1e-5), "ids": [1, -2], "scale": None}
    assert r.operands["1"].shape == [1, 4, 8, None]
    write_pnnx(r, tmp_path / "again.pnnx.param", tmp_path / "again.pnnx.bin")
    assert (tmp_path / "again.pnnx.param").read_bytes() == (tmp_path / "m.pnnx.param").read_bytes()
    assert (tmp_path / "again.pnnx.bin").read_bytes() == (tmp_path / "m.pnnx.bin").read_bytes()


def test_our_text_parser_reads_pnnx_param(tmp_path):
    g = _graph()
    g.remove_op(g.find_op("pnnx_output_0"))
    g.remove_op(g.find_op("torch.cat_0"))
    g.remove_op(g.find_op("pnnx_expr_0"))  # (our value syntax has no pnnx expression strings)
    write_pnnx(g, tmp_path / "m.pnnx.param", tmp_path / "m.pnnx.bin")
    parsed = Graph.from_text((tmp_path / "m.pnnx.param").read_text())
    conv = parsed.find_op("conv")
    assert conv.params["kernel_size"] == [3, 3] and conv.params["padding_mode"] == "zeros"
    assert conv.attrs["weight"].shape == (4, 3, 3, 3)


def test_values_pnnx_cannot_hold(tmp_path, caplog):
    g = Graph()
    x = g.new_operand("0")
    g.add_op("pnnx.Input", "in", [], [x])
    y = g.new_operand("1")
    op = g.add_op("torch.einsum", "einsum", [x], [y], params={"equation": "ij, jk -> ik"})
    with caplog.at_level(logging.WARNING):
        write_pnnx(g, tmp_path / "a.param", tmp_path / "a.bin")
    assert "equation=ij,jk->ik" in (tmp_path / "a.param").read_text() and "whitespace" in caplog.text
    op.params["equation"] = "a=b"
    with pytest.raises(WriteError, match="operator 'einsum': string 'a=b' contains '='"):
        write_pnnx(g, tmp_path / "b.param", tmp_path / "b.bin")
    assert not (tmp_path / "b.param").exists() and not (tmp_path / "b.bin").exists()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
def test_pnnx_cli_output_is_rewritten_byte_for_byte(tmp_path):
    torch = pytest.importorskip("torch")
    pnnx = pnnx_cli()

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, groups=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8 * 4 * 4, 10)
            self.ln = torch.nn.LayerNorm(10, eps=1e-5)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
            x = self.ln(self.fc(torch.flatten(x, 1)))
            return torch.softmax(x * 0.5 + 1, 1), torch.cat([x, x * 2], 1)

    torch.jit.trace(M().eval(), torch.rand(1, 3, 8, 8)).save(str(tmp_path / "m.pt"))
    r = subprocess.run([pnnx, "m.pt", "inputshape=[1,3,8,8]"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    g = read_pnnx(tmp_path / "m.pnnx.param", tmp_path / "m.pnnx.bin")
    assert any(op.type == "pnnx.Expression" for op in g.ops)
    write_pnnx(g, tmp_path / "r.pnnx.param", tmp_path / "r.pnnx.bin")
    assert (tmp_path / "r.pnnx.param").read_text() == (tmp_path / "m.pnnx.param").read_text()
    assert (tmp_path / "r.pnnx.bin").read_bytes() == (tmp_path / "m.pnnx.bin").read_bytes()
