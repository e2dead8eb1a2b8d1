"""embedding end to end (both dialects): token ids fed as int32 to ncnn's Embed; constant
indices (position ids) folded into a constant; ViT-style class token + position embedding."""
import numpy as np
import pytest
import torch
from torch import nn

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, TOL, check_module, export_pt2, ncnn, rel_error


def _run_int_ids(tmp_path, module, ids, dialect, fp16=False):
    """Convert; run ncnn with ``ids`` (batch 1) fed as an int32 Mat; compare with PyTorch."""
    module = module.eval()
    pt2 = export_pt2(module, [ids], tmp_path / f"m_{dialect}.pt2", dialect=dialect)
    result = convert(str(pt2), ConvertOptions(fp16=fp16, lint=True))
    assert result.ok, [str(d) for d in result.errors]
    param, bin_ = tmp_path / "m.param", tmp_path / "m.bin"
    result.write(param, bin_)
    net = ncnn.Net()
    net.opt.use_packing_layout = False
    net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = net.opt.use_fp16_packed = False
    net.opt.use_bf16_storage = False
    assert net.load_param(str(param)) == 0 and net.load_model(str(bin_)) == 0
    ex = net.create_extractor()
    ex.input("in0", ncnn.Mat(np.ascontiguousarray(ids[0].numpy().astype(np.int32))).clone())
    ret, out = ex.extract("out0")
    assert ret == 0
    with torch.no_grad():
        want = module(ids)[0].numpy()
    got = np.array(out).reshape(want.shape)
    assert rel_error(got, want) <= TOL[fp16]
    return result


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_embedding_ids(tmp_path, dialect, fp16):
    r = _run_int_ids(tmp_path, nn.Embedding(50, 16), torch.tensor([[3, 0, 49, 7, 7, 12]]), dialect, fp16)
    assert [op.type for op in r.ncnn.ops] == ["Input", "Embed"]


class TokenAndPosition(nn.Module):
    """BERT-style input embedding: token + learned position (ids from arange) + LayerNorm."""

    def __init__(self, vocab=30, length=8, dim=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(length, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        return self.norm(self.tok(ids) + self.pos(pos))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_token_and_position(tmp_path, dialect):
    r = _run_int_ids(tmp_path, TokenAndPosition(), torch.tensor([[1, 5, 29, 0, 3, 3, 8, 2]]), dialect)
    types = [op.type for op in r.ncnn.ops]
    assert types.count("Embed") == 1 and "LayerNorm" in types


@pytest.mark.parametrize("dialect", DIALECTS)
def test_embedding_2d_ids(tmp_path, dialect):
    r = _run_int_ids(tmp_path, nn.Embedding(20, 6), torch.tensor([[[1, 2, 3], [4, 5, 19]]]), dialect)
    assert "Embed" in [op.type for op in r.ncnn.ops]


class PatchTokens(nn.Module):
    """ViT input: patches, a class token (1, 1, D) expanded and concatenated, position embedding."""

    def __init__(self, dim=16, patch=4, image=16):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim))

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos


@pytest.mark.parametrize("dialect", DIALECTS)
def test_class_token_and_position_embedding(tmp_path, dialect):
    check_module(PatchTokens(), [torch.randn(1, 3, 16, 16)], tmp_path, dialect=dialect,
                 expect_types=["Convolution", "Concat"])
