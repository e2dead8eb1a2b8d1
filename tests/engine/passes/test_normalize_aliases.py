"""ATen alias ops as ``torch.export`` keeps them (``torch.multiply``, ``torch.greater``,
``torch.clip``, ``torch.special.expit``, ``torch.swapaxes``...): renamed to their canonical ops,
converted, and checked in ncnn against PyTorch."""
import pytest
import torch

from engine.convert import ConvertOptions, convert
from engine.passes.normalize_aliases import ALIASES
from tests.harness import Fn, check_module, export_pt2

CASES = {
    "multiply": lambda x, y: torch.multiply(x, y) + torch.multiply(x, 2.0),
    "divide": lambda x, y: torch.divide(x, y.abs() + 1) + torch.divide(x, 3.0),
    "divide_floor": lambda x, y: torch.divide(x * 4, y.abs() + 1, rounding_mode="floor"),
    "subtract": lambda x, y: torch.subtract(x, y, alpha=2) + torch.subtract(x, 1.5),
    "true_divide_scalar": lambda x, y: torch.true_divide(x, 2.0),
    "negative_absolute": lambda x, y: torch.negative(x) + torch.absolute(y),
    "arc": lambda x, y: torch.arcsin(x.clamp(-0.9, 0.9)) + torch.arccos(y.clamp(-0.9, 0.9))
    + torch.arctan(x) + torch.arcsinh(y) + torch.arctanh(x.clamp(-0.9, 0.9)),
    "arctan2": lambda x, y: torch.arctan2(x, y),
    "clip": lambda x, y: torch.clip(x, -0.5, 0.5),
    "comparisons": lambda x, y: torch.greater(x, y).float() + torch.greater_equal(x, 0.1).float()
    + torch.less(x, y).float() * 2 + torch.less_equal(x, y).float() + torch.not_equal(x, y).float(),
    "special": lambda x, y: torch.special.expit(x) + torch.special.erf(y),
    "swapaxes": lambda x, y: torch.swapaxes(x, 1, 2) * torch.swapdims(y, 2, 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_alias_converts_like_its_canonical_op(tmp_path, name):
    check_module(Fn(CASES[name]), [torch.randn(1, 4, 6), torch.randn(1, 4, 6)], tmp_path)


def test_the_pass_leaves_no_alias_and_keeps_the_original_name(tmp_path):
    pt2 = export_pt2(Fn(CASES["comparisons"]), [torch.randn(1, 4, 6), torch.randn(1, 4, 6)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions(lint=True))
    record = next(r for r in result.records if r.name == "normalize_aliases")
    text = record.snapshot
    assert not [a for a in ALIASES if a in text], text
    for canonical in ("aten.gt.Tensor", "aten.ge.Scalar", "aten.lt.Tensor", "aten.le.Tensor", "aten.ne.Tensor"):
        assert canonical in text
    assert record.diff.counts()  # the pass changed the graph


def test_every_canonical_op_has_a_converter():
    import engine.converters  # noqa: F401  (registers the built-in converters)
    from engine.convert.registry import ATEN

    missing = [c for c, _ in ALIASES.values() if c not in ATEN]
    assert missing == [], missing
