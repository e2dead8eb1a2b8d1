"""A plug-in's own ncnn layer types: the README's example converts, exports and verifies end to
end (its custom layer registered in the real ncnn Python runtime); a custom layer's params and
weights are written where the runtime reads them; an undeclared type is refused while
converting, never at export."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from engine.cli.main import main  # noqa: E402
from engine.convert import ConvertOptions, convert  # noqa: E402
from engine.verify import VerifyError, VerifyOptions, verify  # noqa: E402
from engine.verify import custom_layers  # noqa: E402
from engine.verify.custom_layers import CustomRun  # noqa: E402
from engine.verify.ncnn_run import NcnnModel  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def readme_plugin() -> str:
    """The README's plug-in example, verbatim."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    (block,) = [b for b in blocks if b.startswith("# my_rules.py")]
    return block


class Bessel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.special.bessel_j0(self.conv(x))


def _export(module, tmp_path, *shape) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(module.eval(), (torch.randn(*shape),)), str(path))
    return path


def test_readme_plugin_example_converts_exports_and_verifies(tmp_path, capsys):
    rules = tmp_path / "my_rules.py"
    rules.write_text(readme_plugin())
    pt2 = _export(Bessel(), tmp_path, 1, 3, 8, 8)
    assert main(["convert", str(pt2), "--converters", str(rules), "--fp16", "0", "-o", str(tmp_path)]) == 0
    param, bin_ = tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin"
    line = next(ln for ln in param.read_text().splitlines() if ln.startswith("BesselJ0"))
    assert line.split()[1:4] == ["special_bessel_j0", "1", "1"]
    # the exported model loads and runs in the ncnn runtime with the custom layer registered
    result = convert(str(pt2), ConvertOptions(fp16=False, converters=[rules]))
    op = next(o for o in result.ncnn.ops if o.type == "BesselJ0")
    spec = op.meta["plugin_layer"]
    model = NcnnModel(param, bin_, [CustomRun(op.name, spec, {}, [])])
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (got,) = model.run({"in0": x[0]}, ["out0"]).values()
    model.close()
    with torch.no_grad():
        want = torch.export.load(str(pt2)).module()(torch.from_numpy(x)).numpy()[0]
    # a plug-in's op has no layout rule: its input keeps every dim, (1, 4, 6, 6)
    assert got.size == want.size
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5)
    ref = verify(pt2, VerifyOptions(fp16=False, converters=[rules]))
    # verify: every layer compared, the custom one with its own error, exit 0
    # (a Reshape keeps every dim of the plug-in op's input: it has no layout rule)
    assert ref.ok and [x.type for x in ref.layers if x.type != "Reshape"] == ["Input", "Convolution", "BesselJ0"]
    j0 = ref.layer("special_bessel_j0")
    assert j0.status == "ok" and j0.own.max_rel < 1e-5 and j0.error.max_rel < 1e-5
    capsys.readouterr()
    assert main(["verify", str(pt2), "--converters", str(rules)]) == 0
    assert "no divergent layer" in capsys.readouterr().out


PLUGIN_WITH_WEIGHTS = '''
    import numpy as np
    from engine.convert import ncnn_custom_layer, ncnn_rule

    from engine.ir import Attribute

    @ncnn_rule("F.tanh")
    def gained_tanh(ctx, op):  # tanh(gain * x) * channel gain, with gains of 1
        c = op.outputs[0].shape[1]
        return ctx.emit("ChannelTanh", [op.inputs[0]], params={0: 1.0, 1: c},
                        attrs={"gain": Attribute(np.ones(c, np.float32))})

    @ncnn_custom_layer("ChannelTanh")
    def channel_tanh(x, params, weights):
        assert params[1] == x.shape[0] == weights[0].size
        return np.tanh(x * params[0]) * weights[0].reshape(-1, 1, 1)
'''


class TanhSandwich(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 5, 3)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def test_custom_layer_params_and_weights_are_written_where_the_runtime_reads_them(tmp_path):
    """Its params on the layer line, its weights raw in the .bin between the convolutions' —
    the second convolution still loads its own weights (the verification would fail if the
    custom layer read too few or too many)."""
    plugin = tmp_path / "p.py"
    plugin.write_text(textwrap.dedent(PLUGIN_WITH_WEIGHTS))
    pt2 = _export(TanhSandwich(), tmp_path, 1, 3, 10, 10)
    result = convert(str(pt2), ConvertOptions(fp16=True, converters=[plugin]))
    assert result.ok, result.errors
    result.write(tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin")
    line = next(ln for ln in (tmp_path / "m.ncnn.param").read_text().splitlines() if ln.startswith("ChannelTanh"))
    assert line.split()[-2:] == ["0=1.0", "1=4"]
    for fp16 in (True, False):
        r = verify(pt2, VerifyOptions(fp16=fp16, converters=[plugin]))
        assert r.ok and r.first_divergent is None, [(x.layer, x.status, x.note) for x in r.layers]
        assert [x.type for x in r.layers] == ["Input", "Convolution", "ChannelTanh", "Convolution"]
        assert all(x.error is not None and x.own is not None for x in r.layers)
    # verifying again and again takes no new registration slot of the ncnn binding
    taken = custom_layers._registered
    for _ in range(3):
        assert verify(pt2, VerifyOptions(fp16=False, converters=[plugin])).ok
    assert custom_layers._registered == taken


def test_an_undeclared_layer_type_is_refused_while_converting(tmp_path, capsys):
    rules = tmp_path / "my_rules.py"
    rules.write_text(readme_plugin().split("@ncnn_custom_layer")[0])  # the example without its declaration
    pt2 = _export(Bessel(), tmp_path, 1, 3, 8, 8)
    result = convert(str(pt2), ConvertOptions(converters=[rules]))
    assert not result.ok and len(result.errors) == 1
    d = result.errors[0]
    assert d.node == "special_bessel_j0" and "unknown ncnn layer type 'BesselJ0'" in d.reason
    assert "@ncnn_custom_layer('BesselJ0')" in d.reason
    assert main(["convert", str(pt2), "--converters", str(rules), "-o", str(tmp_path)]) == 1
    assert not list(tmp_path.glob("*.ncnn.*"))


def test_a_custom_layer_of_two_inputs_cannot_be_verified_and_says_why(tmp_path):
    plugin = tmp_path / "p.py"
    plugin.write_text(textwrap.dedent('''
        from engine.convert import aten_converter, ncnn_custom_layer, ncnn_rule

        @aten_converter("aten.maximum.default")
        def maximum(ctx, op):
            return ctx.emit("pnnx.MyMax", list(op.inputs))

        @ncnn_rule("pnnx.MyMax")
        def my_max_layer(ctx, op):
            return ctx.emit("MyMax", list(op.inputs))

        @ncnn_custom_layer("MyMax")
        def my_max(a, b):
            return a if a.max() > b.max() else b
    '''))

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.maximum(x.sin(), x.cos())

    pt2 = _export(M(), tmp_path, 1, 3, 4, 4)
    result = convert(str(pt2), ConvertOptions(converters=[plugin]))
    assert result.ok and any(o.type == "MyMax" for o in result.ncnn.ops)
    with pytest.raises(VerifyError, match=r"MyMax\) has 2 input\(s\) and 1 output\(s\): ncnn's Python runtime"):
        verify(pt2, VerifyOptions(converters=[plugin]))
