"""PyTorch runs the program straight from this reader's decoded graph (no ``torch.export.load``)
and captures exactly what torch.export.load's module computes; a program outside plain ATen
(a higher-order op) goes through torch.export.load."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.reader.package import load  # noqa: E402
from engine.verify.inputs import choose_inputs  # noqa: E402
from engine.verify.torch_direct import Unsupported, run_direct  # noqa: E402
from engine.verify.torch_run import load_program, run_program, run_torch  # noqa: E402
from tests.engine.verify.models import BatchInside, ChannelsLastMLP, QKVAttention, export  # noqa: E402


def _same_values(path):
    ep = load(path).model
    inputs = choose_inputs(ep)
    direct = run_direct(ep, inputs)
    ref = run_program(load_program(path), inputs)
    assert direct.outputs == ref.outputs
    assert set(direct.values) == set(ref.values) and len(ref.values) > 5
    for name, want in ref.values.items():
        got = direct.values[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)


def test_direct_run_captures_what_torch_export_load_computes(cnn_pt2):
    _same_values(cnn_pt2)  # both dialects: batch norm as one op or decomposed, multi-output nodes


@pytest.mark.parametrize("make,shape", [(QKVAttention, (1, 10, 32)), (ChannelsLastMLP, (1, 16, 8, 8)),
                                        (lambda: BatchInside(1), (2, 5, 8))], ids=["qkv", "convnext", "batch"])
def test_direct_run_of_other_programs(tmp_path, make, shape):
    torch.manual_seed(0)
    _same_values(export(make().eval(), [torch.randn(*shape)], tmp_path / "m.pt2"))


def test_a_higher_order_op_goes_through_torch_export_load(tmp_path):
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))

    x = torch.randn(3, 4)
    path = tmp_path / "cond.pt2"
    torch.export.save(torch.export.export(M(), (x,)), str(path))
    ep = load(path).model
    with pytest.raises(Unsupported, match="cond"):
        run_direct(ep, choose_inputs(ep))
    tv = run_torch(path, ep, choose_inputs(ep))
    assert tv.runner == "torch.export.load"
    want = M()(torch.from_numpy(choose_inputs(ep).arrays[0])).numpy()
    np.testing.assert_array_equal(tv.values[tv.outputs[0]], want)


class Casts(torch.nn.Module):
    """``.to(dtype)`` — in the training dialect each cast comes with an
    ``_assert_tensor_metadata`` node, an op of no output (Hugging Face models cast everywhere)."""

    def forward(self, x):
        return (x.to(torch.float32) * 2).to(torch.float16).to(torch.float32) + 1


def test_direct_run_of_a_program_with_metadata_asserts(tmp_path):
    """Such a node has nothing to bind; it made the direct run refuse the whole program, and the
    fallback, torch.export.load, cannot load a Hugging Face model's package (its output class is
    not registered with pytree in a fresh process): verify failed on GPT-2, LLaMA, T5..."""
    path = export(Casts().eval(), [torch.randn(2, 3)], tmp_path / "casts.pt2")
    ep = load(path).model
    assert any(n.target.endswith("aten._assert_tensor_metadata.default") for n in ep.nodes)
    inputs = choose_inputs(ep)
    tv = run_torch(path, ep, inputs)
    assert tv.runner == "direct"
    want = Casts()(torch.from_numpy(inputs.arrays[0])).numpy()
    np.testing.assert_array_equal(tv.values[tv.outputs[0]], want)
    _same_values(path)
