"""The attention passes remove only what they rewrote: dead code elsewhere in the model (an
unused parameter, a result nobody reads) is left to ``eliminate_dead_code``, so each pass's
diff shows what that pass did."""
import pytest
import torch
from torch import nn

from engine.convert import convert
from tests.harness import DIALECTS, export_pt2


class AttentionWithDeadCode(nn.Module):
    def __init__(self):
        super().__init__()
        self.unused = nn.Linear(4, 4)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)  # need_weights: averaged weights unread

    def forward(self, x):
        x.sin()  # nobody reads it
        return self.attn(x, x, x)[0]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dead_code_outside_attention_is_removed_by_dead_code_elimination_only(tmp_path, dialect):
    path = export_pt2(AttentionWithDeadCode(), [torch.randn(1, 5, 16)], tmp_path / "m.pt2", dialect=dialect)
    result = convert(str(path))
    removed_by = {op.name: rec.name for rec in result.records[1:] for op in rec.diff.removed}
    built = {op.name for op in result.aten.ops}
    dead = [n for n in ("sin", "p_unused_weight", "p_unused_bias") if n in built]  # core ATen drops the sin
    assert "p_unused_weight" in dead
    for name in dead:
        assert removed_by.get(name) == "eliminate_dead_code", (name, removed_by.get(name))
    # the unread averaged weights: dead before the attention is recomposed (dead code goes once
    # before lowering too), or taken with it
    assert removed_by.get("mean", "recompose_attention") in ("recompose_attention", "eliminate_dead_code")
    assert [op.type for op in result.ncnn.ops].count("MultiHeadAttention") == 1
