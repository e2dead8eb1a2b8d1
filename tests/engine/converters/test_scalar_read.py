"""A tensor's value read as a number at run time (``.item()``/``.tolist()``): refused by name with
the cure, in both dialects (``aten.item`` / core ATen's ``_local_scalar_dense``)."""
import pytest
import torch

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, export_pt2


class Scaled(torch.nn.Module):
    def forward(self, x):
        return x * x.sum().item()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_number_read_at_run_time_is_refused_with_the_cure(tmp_path, dialect):
    pt2 = export_pt2(Scaled(), (torch.randn(2, 3),), tmp_path / "item.pt2", dialect=dialect)
    result = convert(str(pt2), ConvertOptions())
    reads = [e for e in result.errors if e.op in ("aten.item.default", "aten._local_scalar_dense.default")]
    assert reads, [(e.op, e.reason) for e in result.errors]
    assert "read as a number at run time" in reads[0].reason and "x * t.item()" in reads[0].reason


def test_a_constant_number_still_folds(tmp_path):
    """The constant case never reaches the refusal: ``item()`` of a buffer folds."""
    class FromBuffer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor(3.0))

        def forward(self, x):
            return x * self.scale.item()

    pt2 = export_pt2(FromBuffer(), (torch.randn(2, 3),), tmp_path / "const.pt2")
    assert convert(str(pt2), ConvertOptions()).ok
