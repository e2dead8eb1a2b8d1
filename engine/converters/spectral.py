"""Short-time Fourier transforms: ``torch.stft`` / ``torch.istft`` and the complex views around
them (``view_as_real`` / ``view_as_complex``, ``abs`` of a spectrum).

ATen → pnnx:

* ``aten.stft.default`` / ``aten.stft.center`` (``return_complex=True``) → ``torch.stft``
  (``n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided``) with the
  window type read off its constant window (all ones, or periodic Hann / Hamming; none = ones);
  export has already padded a centred input, so ``center`` is usually False;
* ``aten.istft.default`` → ``torch.istft`` (the same, plus ``length`` and ``return_complex``);
* ``aten.view_as_real.default`` / ``aten.view_as_complex.default`` → ``torch.view_as_real`` /
  ``torch.view_as_complex``; ``aten.abs.default`` of a complex tensor → ``torch.abs``.

pnnx → ncnn: ncnn has no complex numbers: a complex tensor is its ``view_as_real`` layout
(``(..., 2)``, real and imaginary parts innermost). ``torch.stft`` → ``Spectrogram`` (``power`` 0,
a (freqs, frames, 2) blob) of a 1-D signal; ``torch.istft`` → ``InverseSpectrogram`` (``returns``
1: the real signal; 0: a complex one as (samples, 2)) of a (freqs, frames, 2) blob, one-sided
or two-sided, cut to ``length`` with a ``Crop`` when that is
shorter; the two views are no layers at all; ``abs`` of a complex tensor is a ``Reduction`` L2
over the innermost axis. A complex value read by anything else is refused: ncnn would compute
on the real layout as if it were the tensor.
"""
from __future__ import annotations

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_rank, ncnn_shape
from ..ncnn.enums import ReductionOp
from .shape import intermediate

_COMPLEX = ("c64", "c128", "c32")
#: ncnn's window_type
_WINDOWS = {"ones": 0, "hann": 1, "hamming": 2}
#: ncnn's pad_type for a centred stft
_PAD_TYPES = {"constant": 0, "replicate": 1, "reflect": 2}
#: pnnx ops that read a complex tensor correctly in ncnn (in its real layout)
_COMPLEX_READERS = ("torch.view_as_real", "torch.abs", "torch.istft")


def _is_complex(opd) -> bool:
    return opd is not None and opd.dtype in _COMPLEX


def window_type(window: np.ndarray | None, length: int) -> str | None:
    """``"ones"``, ``"hann"`` or ``"hamming"`` when ``window`` (None: all ones) is that periodic
    window of ``length`` samples (the ones ncnn generates), else None."""
    if window is None:
        return "ones"
    w = np.asarray(window, np.float64).reshape(-1)
    if len(w) != length:
        return None
    phase = 2 * np.pi * np.arange(length) / length
    known = {"ones": np.ones(length), "hann": 0.5 - 0.5 * np.cos(phase), "hamming": 0.54 - 0.46 * np.cos(phase)}
    for name, want in known.items():
        if np.allclose(w, want, rtol=1e-5, atol=1e-6):
            return name
    return None


def padded_window(window: np.ndarray, n_fft: int) -> tuple[str, int] | None:
    """``(type, win_length)`` when ``window`` (``n_fft`` samples) is a known window of
    ``win_length`` samples zero-padded on both sides as ``torch.stft`` pads it, else None."""
    w = np.asarray(window, np.float64).reshape(-1)
    if len(w) != n_fft:
        return None
    for length in range(n_fft, 0, -1):
        left = (n_fft - length) // 2
        if np.any(w[:left]) or np.any(w[left + length:]):
            continue
        kind = window_type(w[left:left + length], length)
        if kind is not None:
            return kind, length
    return None


def _transform_params(ctx, op, inverse: bool) -> dict:
    """The pnnx params shared by stft and istft (refusing what ncnn cannot compute)."""
    n_fft = op.params.get("n_fft")
    if not isinstance(n_fft, int) or n_fft < 1:
        ctx.unsupported(f"n_fft={n_fft!r}")
    hop = op.params.get("hop_length") or n_fft // 4
    win = op.params.get("win_length") or n_fft
    if not all(isinstance(v, int) and v >= 1 for v in (hop, win)) or win > n_fft:
        ctx.unsupported(f"hop_length={hop!r} win_length={win!r} for n_fft={n_fft}")
    w = op.named_input("window")
    value = None if w is None else ctx.const_value(w)
    if w is not None and value is None:
        ctx.unsupported("a window computed at run time (ncnn generates ones, Hann or Hamming windows)")
    kind = window_type(value, win)
    if kind is None and value is not None and op.params.get("win_length") is None:  # already padded to n_fft
        kind, win = padded_window(value, n_fft) or (None, win)
    if kind is None:
        ctx.unsupported("a window other than all ones, periodic Hann or periodic Hamming (what ncnn generates)")
    return {"n_fft": n_fft, "hop_length": hop, "win_length": win, "window": kind,
            "center": bool(op.params.get("center", False)), "pad_mode": op.params.get("pad_mode") or "reflect",
            "normalized": bool(op.params.get("normalized")), "onesided": op.params.get("onesided") is not False}


@aten_converter("aten.stft.default", "aten.stft.center")
def stft(ctx, op):
    if not op.params.get("return_complex"):
        ctx.unsupported("stft with return_complex=False (deprecated real output)")
    params = _transform_params(ctx, op, inverse=False)
    if params["pad_mode"] not in _PAD_TYPES:
        ctx.unsupported(f"stft pad_mode={params['pad_mode']!r}")
    return ctx.emit("torch.stft", [op.inputs[0]], params=params)


@aten_converter("aten.istft.default")
def istft(ctx, op):
    params = _transform_params(ctx, op, inverse=True)
    length = op.params.get("length")
    if length is not None and not isinstance(length, int):
        ctx.unsupported(f"istft length={length!r} computed at run time")
    params["length"] = length
    params["return_complex"] = bool(op.params.get("return_complex"))
    return ctx.emit("torch.istft", [op.inputs[0]], params=params)


@aten_converter("aten.view_as_real.default", "aten.view_as_complex.default")
def complex_view(ctx, op):
    return ctx.emit(f"torch.{op.type.split('.')[1]}", [op.inputs[0]])


def _complex_input(op, ctx):
    return None if _is_complex(op.inputs[0]) else "unsupported: abs of a real tensor (elementwise family)"


@aten_converter("aten.abs.default", validator=_complex_input)
def complex_abs(ctx, op):
    return ctx.emit("torch.abs", [op.inputs[0]])


# ----------------------------------------------------------------------------- pnnx → ncnn
def _complex_readers_only(opd) -> str | None:
    """Refuse a complex value that something other than a complex-aware op reads."""
    for c in opd.consumers:
        if c.type not in _COMPLEX_READERS + ("pnnx.Output",):
            return (f"unsupported: the complex value {opd.name} is read by {c.type} ({c.name}); ncnn has no complex "
                    "numbers (view_as_real, abs and istft convert)")
        if c.type == "pnnx.Output":
            return f"unsupported: the complex value {opd.name} is a model output (return view_as_real of it)"
    return None


def _check_stft(op, ctx):
    if ncnn_rank(op.inputs[0]) != 1:
        return f"unsupported: stft of {op.inputs[0].name} {op.inputs[0].shape} (ncnn's Spectrogram takes one signal)"
    return _complex_readers_only(op.outputs[0])


def _real_layout(opd) -> list:
    """The torch shape of a complex operand's real layout (``view_as_real``)."""
    return list(opd.shape) + [2]


def _spectral_params(p: dict) -> dict:
    return {"n_fft": p["n_fft"], "hoplen": p["hop_length"], "winlen": p["win_length"],
            "window_type": _WINDOWS[p["window"]], "center": int(p["center"]), "normalized": int(p["normalized"])}


@ncnn_rule("torch.stft", validator=_check_stft)
def stft_layer(ctx, op):
    p = op.params
    return ctx.layer("Spectrogram", [op.inputs[0]], power=0, pad_type=_PAD_TYPES[p["pad_mode"]],
                     onesided=int(p["onesided"]), shape=_real_layout(op.outputs[0]), dtype="f32",
                     **_spectral_params(p))


def _istft_length(op) -> int:
    """The samples the runtime's InverseSpectrogram gives (PyTorch's default length)."""
    p = op.params
    frames = ncnn_shape(op.inputs[0])[-2]
    return (frames - 1) * p["hop_length"] + (p["n_fft"] % 2 if p["center"] else p["n_fft"])


def _check_istft(op, ctx):
    x, out = op.inputs[0], op.outputs[0]
    if x.shape is None or len(ncnn_shape(x) or []) != 3:
        return f"unsupported: istft of {x.name} {x.shape} (ncnn's InverseSpectrogram takes one spectrum)"
    natural, length = _istft_length(op), op.params.get("length")
    if length is not None and length > natural:
        return f"unsupported: istft to length {length}, longer than the {natural} samples the frames cover"
    if len(ncnn_shape(out) or []) != 1:
        return f"unsupported: istft to {out.shape}"
    return _complex_readers_only(out) if _is_complex(out) else None


@ncnn_rule("torch.istft", validator=_check_istft)
def istft_layer(ctx, op):
    """``returns`` 1 (the real signal), or 0 (the complex one, in its real layout ``(samples,
    2)``) for ``return_complex=True``; one-sided or not is read off the spectrum's height."""
    out = op.outputs[0]
    complex_out = _is_complex(out)
    layout = {"shape": _real_layout(out), "dtype": "f32"} if complex_out else {}
    y = ctx.layer("InverseSpectrogram", [op.inputs[0]], returns=0 if complex_out else 1, **layout,
                  **_spectral_params(op.params))
    natural, length = _istft_length(op), op.params.get("length")
    if length is None or length == natural:
        return y
    intermediate(y, [natural, 2] if complex_out else [natural])
    return ctx.layer("Crop", [y], starts=[0], ends=[length], axes=[0], **layout)


def _check_view(op, ctx):
    if op.type == "torch.view_as_complex":
        return _complex_readers_only(op.outputs[0])
    return None


@ncnn_rule("torch.view_as_real", "torch.view_as_complex", validator=_check_view)
def complex_view_layer(ctx, op):
    """The same blob: a complex tensor already is its real layout in ncnn."""
    return op.inputs[0]


@ncnn_rule("torch.abs")
def complex_abs_layer(ctx, op):
    x = op.inputs[0]
    return ctx.layer("Reduction", [x], operation=int(ReductionOp.L2), reduce_all=0, axes=[len(ncnn_shape(x)) - 1],
                     keepdims=0, coeff=1.0, fixbug0=1)
