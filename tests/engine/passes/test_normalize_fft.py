"""FFTs over several dims, over a dim that is not the last, of a real signal cast to complex, and
the real / imaginary parts of a spectrum (``normalize_fft``, then ``decompose_fft``): exported
with torch.export in both dialects, run in ncnn against PyTorch (FNet's token mixing is
``fftn(x, dim=(1, 2)).real``)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.convert import ConvertOptions, convert  # noqa: E402
from tests.harness import DIALECTS, Fn, check_module, export_pt2  # noqa: E402

CASES = {
    # FNet's mixing: a 2-D transform of a real signal, its real part
    "fftn_real": lambda x: torch.fft.fftn(x, dim=(1, 2)).real,
    "fft2_ortho_imag": lambda x: torch.fft.fft2(x, norm="ortho").imag,
    "fftn_all_dims_forward_norm": lambda x: torch.fft.fftn(x, norm="forward").real,
    "fft_dim1_then_ifft": lambda x: torch.fft.ifft(torch.fft.fft(x, dim=1), dim=1).real,
    "ifft2_of_fft2": lambda x: torch.fft.ifft2(torch.fft.fft2(x)).imag * 7 + torch.fft.ifft2(torch.fft.fft2(x)).real,
    "rfft_dim1_abs": lambda x: torch.fft.rfft(x, dim=1).abs(),
    "irfft_dim1": lambda x: torch.fft.irfft(torch.fft.rfft(x, dim=1), n=x.shape[1], dim=1),
    "rfft2_real": lambda x: torch.fft.rfft2(x).real,
    "irfft2_of_rfft2": lambda x: torch.fft.irfft2(torch.fft.rfft2(x) * 0.5),
    "irfftn_ortho_dims01": lambda x: torch.fft.irfftn(torch.fft.rfftn(x, dim=(0, 1)), dim=(0, 1), norm="ortho"),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_transform_matches_pytorch_in_ncnn(case, dialect, tmp_path):
    torch.manual_seed(0)
    x = torch.randn(1, 6, 10)
    checked = check_module(Fn(CASES[case]), (x,), tmp_path, dialect=dialect, tol=1e-5)
    assert max(checked.errors) < 1e-5


@pytest.mark.parametrize("dialect", DIALECTS)
def test_four_d_mixing_with_a_batch_of_two(dialect, tmp_path):
    torch.manual_seed(1)
    x = torch.randn(2, 3, 5, 4)
    check_module(Fn(lambda t: torch.fft.fftn(t, dim=(2, 3)).real + torch.fft.fft(t, dim=1).imag), (x,), tmp_path,
                 dialect=dialect, tol=1e-5)


def test_a_transform_over_a_dim_of_run_time_size_is_reported_not_rewritten(tmp_path):
    x = torch.randn(1, 6, 8)
    seq = torch.export.Dim("seq", min=2, max=64)
    pt2 = export_pt2(Fn(lambda t: torch.fft.fftn(t, dim=(1, 2)).real), (x,), tmp_path / "dyn.pt2",
                     dynamic_shapes=(({1: seq},),))
    result = convert(str(pt2), ConvertOptions())
    assert not result.ok
    by_op = {e.op: e.reason for e in result.errors}
    assert set(by_op) == {"aten.fft_fftn.default", "aten.real.default"}, by_op
    assert "over dim 1 of a run-time size" in by_op["aten.fft_fftn.default"]
    assert "reads the spectrum of" in by_op["aten.real.default"]
