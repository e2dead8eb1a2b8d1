"""hardshrink / softshrink → ncnn Shrink, both dialects (core ATen's where chains are
recomposed), and the hand-written where forms."""
import pytest
import torch
from torch import nn

from tests.harness import DIALECTS, Fn, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


def _x(*shape):
    # values on both sides of every threshold, none exactly on one
    return torch.linspace(-2.05, 2.05, int(torch.tensor(shape).prod())).reshape(shape)[torch.randperm(1)]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("module", [nn.Hardshrink(), nn.Hardshrink(1.2), nn.Softshrink(), nn.Softshrink(0.75),
                                    nn.Hardshrink(-0.3)],
                         ids=["hard", "hard1.2", "soft", "soft0.75", "hard_negative"])
@pytest.mark.parametrize("shape", [(1, 6, 7), (1, 3, 4, 5), (1, 40)], ids=["3d", "4d", "2d"])
def test_shrink(tmp_path, dialect, module, shape):
    c = check_module(module, [_x(*shape)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Shrink"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fn", [lambda x: torch.where(x.abs() > 0.4, x, 0.0),
                                lambda x: torch.where(x.abs() <= 0.4, torch.zeros(()), x)], ids=["gt", "le"])
def test_hand_written_hardshrink(tmp_path, dialect, fn):
    c = check_module(Fn(fn), [_x(1, 4, 9)], tmp_path, dialect=dialect)
    assert _types(c) == ["Input", "Shrink"]


def test_shrink_of_intermediate_used_twice_is_not_recomposed(tmp_path):
    """abs(x) read by two users: the where chain stays (and is refused: ncnn has no where)."""
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    def fn(x):
        a = x.abs()
        return torch.where(a > 0.4, x, 0.0), a

    result = convert(str(export_pt2(Fn(fn), [_x(1, 4, 9)], tmp_path / "m.pt2")), ConvertOptions())
    assert "aten.hardshrink.default" not in {op.type for op in result.aten.ops}
    assert all(op.type != "Shrink" for op in result.ncnn.ops)
