"""stft / istft → ncnn Spectrogram / InverseSpectrogram with view_as_real / view_as_complex /
abs around them, both dialects (core ATen's framed FFT is recomposed; its istft converts piece by
piece); real FFTs as products with a constant DFT basis.
Windows are module buffers, as torchaudio's Spectrogram keeps them."""
import pytest
import torch

from tests.harness import DIALECTS, check_module, export_pt2

WINDOWS = {"hann": torch.hann_window, "hamming": torch.hamming_window, "ones": torch.ones}


class STFT(torch.nn.Module):
    def __init__(self, n_fft=16, hop=4, win=None, window="hann", out="real", **kw):
        super().__init__()
        win = win or n_fft
        self.register_buffer("window", WINDOWS[window](win) if window else None)
        self.kw = dict(n_fft=n_fft, hop_length=hop, win_length=win, return_complex=True, **kw)
        self.out = out

    def forward(self, x):
        s = torch.stft(x, window=self.window, **self.kw)
        if self.out == "real":
            return torch.view_as_real(s)
        return s.abs() if self.out == "magnitude" else s.abs().pow(2)


class ISTFT(torch.nn.Module):
    def __init__(self, n_fft=16, hop=4, window="hann", **kw):
        super().__init__()
        self.register_buffer("window", WINDOWS[window](n_fft))
        self.kw = dict(n_fft=n_fft, hop_length=hop, **kw)

    def forward(self, x):
        return torch.istft(torch.view_as_complex(x), window=self.window, **self.kw)

    def spectrum(self, samples=64):
        """A (1, freqs, frames, 2) input: the stft of a signal with this module's settings."""
        s = torch.stft(torch.randn(1, samples), self.kw["n_fft"], self.kw["hop_length"], window=self.window,
                       center=self.kw.get("center", True), normalized=self.kw.get("normalized", False),
                       return_complex=True)
        return torch.view_as_real(s).contiguous()


STFTS = {
    "hann": dict(),
    "hamming_not_centred": dict(window="hamming", center=False),
    "ones_normalized": dict(window="ones", normalized=True),
    "no_window": dict(window=None),
    "short_window": dict(win=12),
    "two_sided": dict(onesided=False),
    "constant_pad": dict(pad_mode="constant"),
    "n_fft_32_hop_8": dict(n_fft=32, hop=8),
    "magnitude": dict(out="magnitude"),
    "power": dict(out="power"),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(STFTS))
def test_stft(tmp_path, dialect, name):
    c = check_module(STFT(**STFTS[name]), [torch.randn(1, 100)], tmp_path, dialect=dialect)
    assert "Spectrogram" in [op.type for op in c.result.ncnn.ops]


@pytest.mark.parametrize("kw", [dict(), dict(window="hamming", normalized=True), dict(length=50),
                                dict(n_fft=32, hop=8, window="ones")], ids=["hann", "hamming_normalized", "length",
                                                                             "ones"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_istft(tmp_path, kw, dialect):
    """Core ATen writes istft as an inverse real FFT of each frame (a product with a constant
    basis here), a window product, an overlap-add (a Fold of one row) and a division by the
    folded window envelope."""
    m = ISTFT(**kw)
    c = check_module(m, [m.spectrum(100)], tmp_path, dialect=dialect)
    types = [op.type for op in c.result.ncnn.ops]
    assert ("InverseSpectrogram" if dialect == "training" else "Fold") in types


class RealFFT(torch.nn.Module):
    """torch.fft.rfft / irfft along the last dim (core ATen's _fft_r2c / _fft_c2r)."""

    def __init__(self, norm):
        super().__init__()
        self.norm = norm

    def forward(self, x):
        s = torch.fft.rfft(x, norm=self.norm)
        return torch.view_as_real(s), torch.fft.irfft(s, n=x.shape[-1], norm=self.norm)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_real_fft_and_its_inverse(tmp_path, dialect, norm):
    check_module(RealFFT(norm), [torch.randn(1, 3, 20)], tmp_path, dialect=dialect)


def test_custom_window_is_refused(tmp_path):
    from engine.convert import ConvertOptions, convert

    m = STFT()
    m.window = torch.rand(16)
    result = convert(str(export_pt2(m, [torch.randn(1, 64)], tmp_path / "m.pt2")), ConvertOptions())
    assert any("window" in d.reason for d in result.errors), result.errors


def test_complex_result_used_elementwise_is_refused(tmp_path):
    """ncnn has no complex numbers: a spectrum read by anything but its views, linear ops, abs
    or istft would be computed on its real layout."""
    from engine.convert import ConvertOptions, convert

    class Exp(STFT):
        def forward(self, x):
            return torch.view_as_real(torch.stft(x, window=self.window, **self.kw).exp())

    result = convert(str(export_pt2(Exp(), [torch.randn(1, 64)], tmp_path / "m.pt2")), ConvertOptions())
    assert any("complex" in d.reason for d in result.errors), result.errors


@pytest.mark.parametrize("dialect", DIALECTS)
def test_spectrum_times_a_real_number(tmp_path, dialect):
    """A product with a real number scales both parts: the same product on the real layout."""

    class Scaled(STFT):
        def forward(self, x):
            return torch.view_as_real(torch.stft(x, window=self.window, **self.kw) * 2.5)

    check_module(Scaled(), [torch.randn(1, 64)], tmp_path, dialect=dialect)


class ComplexViews(STFT):
    """A 1-D signal's spectrum moved around while complex: core ATen also squeezes it (it
    computes a batch of one), and here it is transposed, given a leading dim and reshaped."""

    def forward(self, x):
        s = torch.stft(x, window=self.window, **self.kw)  # (freqs, frames)
        t = s.transpose(0, 1).unsqueeze(0)  # (1, frames, freqs)
        return torch.view_as_real(s), torch.view_as_real(t.reshape(1, -1))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_views_of_a_complex_spectrum(tmp_path, dialect):
    c = check_module(ComplexViews(), [torch.randn(100)], tmp_path, dialect=dialect)
    assert "Spectrogram" in [op.type for op in c.result.ncnn.ops]


class ComplexISTFT(ISTFT):
    """istft with ``return_complex=True`` of a two-sided spectrum, returned as its real layout."""

    def forward(self, x):
        return torch.view_as_real(torch.istft(torch.view_as_complex(x), window=self.window, **self.kw))


@pytest.mark.parametrize("kw", [dict(center=False, window="hamming"), dict(center=True, length=28)],
                         ids=["not_centred", "length"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_istft_complex_result(tmp_path, kw, dialect):
    """Core ATen: a complex FFT (a product with a constant basis on the real layouts), a complex
    overlap-add (a Fold whose channels are the real and imaginary parts), a complex division
    by the window envelope."""
    m = ComplexISTFT(onesided=False, return_complex=True, **kw)
    spectrum = torch.randn(16, 9, 2)  # n_fft = 16 frequencies (two-sided), 9 frames
    c = check_module(m, [spectrum], tmp_path, dialect=dialect)
    assert ("InverseSpectrogram" if dialect == "training" else "Fold") in [op.type for op in c.result.ncnn.ops]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_istft_of_two_spectra(tmp_path, dialect):
    m = ISTFT(window="hamming")
    check_module(m, [torch.cat([m.spectrum(80), m.spectrum(80)])], tmp_path, dialect=dialect)
