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
from tests.engine.verify.models import BatchInside, ChannelsLastMLP, ModeRegions, QKVAttention, export  # noqa: E402


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


def test_mode_wrappers_run_directly_with_their_values(tmp_path):
    """``torch.no_grad()`` / ``torch.autocast`` regions (higher-order wrappers holding a
    subgraph) run in place, their values captured under their own names like the IR builder's
    inlined operators. They sent the run to torch.export.load, which cannot load a Hugging Face
    package (M2M100, Speech2Text: verify failed) and does not capture the values inside them."""
    torch.manual_seed(0)
    model = ModeRegions().eval()
    x = torch.randn(1, 5, 8)
    path = export(model, [x], tmp_path / "regions.pt2")
    ep = load(path).model
    wrappers = [n for n in ep.nodes if "wrap_with" in n.target]
    assert {n.target.rsplit(".", 1)[-1] for n in wrappers} == {"wrap_with_set_grad_enabled", "wrap_with_autocast"}
    inputs = choose_inputs(ep)
    tv = run_torch(path, ep, inputs)
    assert tv.runner == "direct"
    with torch.no_grad():
        want = model(torch.from_numpy(inputs.arrays[0])).numpy()
    np.testing.assert_allclose(tv.values[tv.outputs[0]], want, rtol=1e-6, atol=1e-6)
    inner = [n for w in wrappers for a in w.inputs if hasattr(a.arg.value, "graph") for n in a.arg.value.graph.nodes]
    kinds = {n.target.rsplit(".", 2)[-2] for n in inner}
    assert {"relu", "sigmoid", "linear"} <= kinds, kinds
    for n in inner:
        name = n.outputs[0].value.name
        assert tv.values[name].shape == (1, 5, 8), name
    relu = next(n for n in inner if ".relu." in n.target).outputs[0].value.name
    with torch.no_grad():
        np.testing.assert_allclose(tv.values[relu], torch.relu(model.a(torch.from_numpy(inputs.arrays[0]))).numpy(),
                                   rtol=1e-6, atol=1e-6)


class Bf16Buffers(torch.nn.Module):
    """bfloat16 (and float8) stored tensors: RecurrentGemma's embedding normalizer is a bf16
    buffer. numpy has no such dtypes, and the direct run refused them: verify fell back to
    torch.export.load, which cannot load a Hugging Face package (verify exited 2)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("normalizer", torch.tensor(32 ** 0.5, dtype=torch.bfloat16))
        self.fc = torch.nn.Linear(3, 4).to(torch.bfloat16)
        self.register_buffer("f8", torch.tensor([0.5, -1.25, 3.0]).to(torch.float8_e4m3fn))

    def forward(self, x):
        y = self.fc((x * self.normalizer.float()).to(torch.bfloat16)).float()
        return y + self.f8.float().sum()


def test_bf16_and_float8_stored_tensors_run_directly(tmp_path):
    torch.manual_seed(0)
    model = Bf16Buffers().eval()
    path = export(model, [torch.randn(2, 3)], tmp_path / "bf16.pt2")
    ep = load(path).model
    inputs = choose_inputs(ep)
    tv = run_torch(path, ep, inputs)
    assert tv.runner == "direct"
    want = model(torch.from_numpy(inputs.arrays[0])).detach().numpy()
    np.testing.assert_array_equal(tv.values[tv.outputs[0]], want)
