"""Values computed in bfloat16 fold like PyTorch computes them: in float32, each op's result
rounded to bfloat16 (Falcon's ALiBi slopes times positions, made at run-time length with no
mask given). numpy has no bfloat16, so a folded bfloat16 value is held as float32 values."""
import numpy as np
import pytest
import torch

from engine.convert import ConvertOptions, convert
from engine.passes.fold_constants import bf16_values
from tests.harness import DIALECTS, Fn, check_module, export_pt2


def test_rounding_is_torchs():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(200_000) * 10.0 ** rng.uniform(-44, 38, 200_000)).astype(np.float32)
    specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3.4e38, -3.4e38, 1e-45, 1.00390625, 1.01171875],
                        np.float32)  # overflow to inf, a denormal, both ties (to even: down, up)
    x = np.concatenate([x, specials])
    want = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    assert np.array_equal(bf16_values(x), want, equal_nan=True)


def alibi(x):
    """Per-head slopes (not bfloat16 numbers) times positions, rounded to bfloat16 twice."""
    n = x.shape[1]
    slopes = torch.pow(torch.tensor(0.3), torch.arange(1, 5, dtype=torch.int32))
    bias = (slopes[:, None].to(torch.bfloat16) * torch.arange(n)[None, :]).to(torch.float32)
    return (x @ x.transpose(1, 2)).unsqueeze(1) * 0.01 + bias[None, :, None, :]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bf16_shape_values_fold_at_a_dynamic_length(tmp_path, dialect):
    length = torch.export.Dim("length", min=2, max=40)
    x = torch.randn(1, 9, 8)
    checked = check_module(Fn(alibi), [x], tmp_path, dialect=dialect, dynamic_shapes=(({1: length},),),
                           run_inputs=[torch.randn(1, 30, 8)], tol=1e-5)
    # the bias is large beside the scores: the float32 product (no rounding) is off by far more
    n = 30
    exact = (torch.pow(torch.tensor(0.3), torch.arange(1, 5)).float()[:, None] * torch.arange(n)[None, :]).numpy()
    rounded = alibi(torch.zeros(1, n, 8))[0, :, 0, :].numpy()
    assert np.abs(exact - rounded).max() > 1e-3 * np.abs(rounded).max()
    assert checked.errors[0] <= 1e-5


def test_bf16_cast_of_constants_folds(tmp_path):
    def fn(x):
        return x + (torch.arange(8) * 0.2125).to(torch.bfloat16).to(torch.float32)

    pt2 = export_pt2(Fn(fn), [torch.randn(1, 8)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions(lint=True))
    assert result.ok, result.errors
    text = next(r for r in result.records if r.name == "fold_constants").snapshot
    assert "aten.to.dtype" not in text and "aten._to_copy" not in text
    check_module(Fn(fn), [torch.randn(1, 8)], tmp_path, tol=1e-6)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_linspace_folds_within_an_ulp(tmp_path, dialect):
    def fn(x):
        return x * torch.linspace(-3.3, 7.1, 101)

    checked = check_module(Fn(fn), [torch.randn(1, 101)], tmp_path, dialect=dialect, tol=1e-6)
    types = {op.type for op in checked.result.ncnn.ops}
    assert "MemoryData" in types, types  # folded: a constant in the model
