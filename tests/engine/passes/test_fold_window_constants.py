"""``fold_window_constants``: values computed from run-time positions ``past + arange(n)`` (a
decode step's positions after its cache) become a table cut to the run-time window, and match
PyTorch in ncnn at every cache length; values that are not windows stay unfolded and are
reported, never converted wrong."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, check_module, export_pt2

PAST = torch.export.Dim("past", min=1, max=40)


class Positions(nn.Module):
    """A step of 3 new tokens after ``past``: sinusoidal features of their positions, spelt
    ``arange(past, past + n)`` or ``arange(n) + (past + 2)``, added to the input."""

    def __init__(self, spelling: str):
        super().__init__()
        self.spelling = spelling
        self.register_buffer("freq", torch.tensor([1.0, 0.3, 0.05, 0.01]))

    def forward(self, x, past):
        s, n = past.shape[1], x.shape[1]
        pos = torch.arange(s, s + n) if self.spelling == "start" else torch.arange(n) + (s + 2)
        angle = pos.float()[:, None] * self.freq[None, :]
        return x + torch.cat((angle.sin(), angle.cos()), -1), past * 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("spelling", ["start", "offset"])
@pytest.mark.parametrize("length", [1, 17, 40])
def test_positions_after_a_dynamic_cache(tmp_path, dialect, spelling, length):
    x = torch.randn(1, 3, 8)
    c = check_module(Positions(spelling), [x, torch.randn(1, 6, 8)], tmp_path, dialect=dialect,
                     dynamic_shapes=(None, {1: PAST}), run_inputs=[x, torch.randn(1, length, 8)],
                     forbid_types=["UnaryOp"])  # sin/cos folded into the table
    tables = [op.attrs["data"].shape for op in c.result.ncnn.ops if op.type == "MemoryData"]
    end = 40 + 3 + (2 if spelling == "offset" else 0)  # every position: the largest past + the new tokens
    assert [end, 8] in [list(t) for t in tables], tables


class Scaled(nn.Module):
    """``arange(n) * past``: not consecutive positions, so not a window."""

    def forward(self, x, past):
        return x + (torch.arange(x.shape[1]) * past.shape[1]).float()


def test_positions_that_are_not_a_window_are_reported(tmp_path):
    pt2 = export_pt2(Scaled(), [torch.randn(1, 3), torch.randn(1, 6)], tmp_path / "s.pt2",
                     dynamic_shapes=(None, {1: PAST}))
    result = convert(str(pt2), ConvertOptions(fp16=False))
    assert not result.ok
    assert any("run-time size" in d.reason or "no aten converter" in d.reason for d in result.errors)


class DecodeAttention(nn.Module):
    """One step's attention over its cache with transformers' mask: key ``j`` visible to query
    ``i`` when ``j <= past + i`` — all True for every cache length, so no mask in ncnn."""

    def forward(self, q, past_k):
        s, n = past_k.shape[2], q.shape[2]
        k = torch.cat((past_k, q[:, :2]), 2)
        positions = torch.arange(n) + s
        mask = torch.arange(s + n)[None, :] <= positions[:, None]
        return torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask[None, None], enable_gqa=True)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [1, 23])
def test_a_decode_steps_mask_over_its_cache_is_dropped(tmp_path, dialect, length):
    q = torch.randn(1, 4, 1, 8)
    c = check_module(DecodeAttention(), [q, torch.randn(1, 2, 6, 8)], tmp_path, dialect=dialect,
                     dynamic_shapes=(None, {2: PAST}), run_inputs=[q, torch.randn(1, 2, length, 8)],
                     expect_types=["SDPA"])
    sdpa = next(op for op in c.result.ncnn.ops if op.type == "SDPA")
    assert len(sdpa.inputs) == 3, "no mask input"
