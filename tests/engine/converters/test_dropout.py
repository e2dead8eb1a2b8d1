"""Dropout: gone at inference (eval-mode dropout in both dialects converts to nothing, the model
matches PyTorch); a model exported in training mode is refused at each dropout with the cure,
``model.eval()``, instead of "no converter registered"."""
import pytest
import torch
from torch import nn

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, Fn, check_module

DROPS = {
    "dropout": lambda x: nn.functional.dropout(x, 0.3, training=False) * 2,
    "dropout2d": lambda x: nn.functional.dropout2d(x, 0.3, training=False) + 1,
    "alpha": lambda x: nn.functional.alpha_dropout(x, 0.3, training=False) - 1,
    "feature_alpha": lambda x: nn.functional.feature_alpha_dropout(x, 0.3, training=False) * 3,
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(DROPS))
def test_eval_dropout_is_nothing(tmp_path, dialect, name):
    c = check_module(Fn(DROPS[name]), [torch.randn(1, 3, 4, 5)], tmp_path, dialect=dialect)
    assert [op.type for op in c.result.ncnn.ops] == ["Input", "BinaryOp"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_training_mode_dropout_is_refused_with_the_cure(tmp_path, dialect):
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.25), nn.ReLU(), nn.Dropout1d(0.5))  # not .eval()
    ep = torch.export.export(model.train(), (torch.randn(2, 8, 6).transpose(1, 2),))
    if dialect == "core":
        ep = ep.run_decompositions()
    pt2 = tmp_path / "m.pt2"
    torch.export.save(ep, str(pt2))
    result = convert(str(pt2), ConvertOptions())
    assert not result.ok
    drops = [d for d in result.errors if "dropout" in d.op or "bernoulli" in d.op]
    assert len(drops) == 2, [(d.op, d.reason) for d in result.errors]
    for d in drops:
        assert "training mode" in d.reason and "model.eval()" in d.reason, d.reason
    assert all("dropout" in d.op or "bernoulli" in d.op or "empty" in d.op for d in result.errors), result.errors
    assert "p=0.25" in drops[0].reason
