"""FFTs along the last dim as products with a constant DFT matrix (ATen level).

ncnn has no FFT layer and no complex numbers, but a discrete Fourier transform of ``N`` points is
a linear map: on a complex tensor's real layout (real and imaginary parts innermost) it is one
matrix product with a constant basis, which ncnn computes as an ``InnerProduct``/``MatMul``.

* ``_fft_r2c(x, [-1], normalization, onesided)`` — ``x`` (..., N) real →
  ``view_as_complex(reshape(x @ B, (..., F, 2)))`` with ``B[n, 2k] = cos(2πkn/N)``,
  ``B[n, 2k+1] = -sin(2πkn/N)`` (``F = N//2 + 1`` one-sided, else ``N``);
* ``_fft_c2c(x, [-1], normalization, forward)`` — complex → complex: ``(..., 2N) @ B`` on the
  real layouts, ``B`` the 2×2 blocks ``[[cos, ±sin], [∓sin, cos]]`` of each (n, k) pair;
* ``_fft_c2r(x, [-1], normalization, N)`` — ``x`` (..., F) complex, Hermitian →
  ``reshape(view_as_real(x), (..., 2F)) @ B`` with ``B[2k, n] = w_k cos(2πkn/N)``,
  ``B[2k+1, n] = -w_k sin(2πkn/N)`` (``w_k`` 1 for the zero and Nyquist frequencies, whose
  imaginary parts are ignored, 2 for the others, which stand for their conjugates too).

``normalization`` 0, 1, 2 scale by 1, ``1/√N``, ``1/N``. The training dialect's ``fft_rfft`` /
``fft_irfft`` (``norm`` "backward", "ortho" or "forward"; ``n`` the signal's length) are the same. Only a transform along the last dim
with static sizes is rewritten, and only up to :data:`MAX_POINTS` points (the basis is a
weight of 2·F·N floats). This is how core ATen's ``istft`` (an inverse real FFT of each frame
before its overlap-add) and ``torch.fft.rfft``/``irfft`` convert; ``stft`` is recomposed into
one ``Spectrogram`` before this pass.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Operator
from ._aten import AtenEmitter
from .manager import graph_pass
from .realize_complex_views import REAL_OF

#: the largest transform rewritten (its basis: 2·F·N floats, 2 MB at 512 points)
MAX_POINTS = 4096


def _scale(normalization: int, n: int) -> float:
    return {0: 1.0, 1: 1.0 / np.sqrt(n), 2: 1.0 / n}[int(normalization)]


def forward_basis(n: int, freqs: int, normalization: int) -> np.ndarray:
    """(N, 2F): a real signal of ``n`` samples times this is its spectrum's real layout."""
    angle = 2 * np.pi * np.outer(np.arange(n), np.arange(freqs)) / n
    basis = np.stack([np.cos(angle), -np.sin(angle)], axis=-1).reshape(n, 2 * freqs)
    return (basis * _scale(normalization, n)).astype(np.float32)


def inverse_basis(n: int, freqs: int, normalization: int) -> np.ndarray:
    """(2F, N): a one-sided spectrum's real layout (``F`` frequencies) times this is the real
    signal of ``n`` samples (frequencies past ``n//2`` ignored, as the inverse real FFT does)."""
    k = np.arange(freqs)
    weight = np.where((k == 0) | ((n % 2 == 0) & (k == n // 2)), 1.0, 2.0) * (k <= n // 2)
    angle = 2 * np.pi * np.outer(k, np.arange(n)) / n
    basis = np.stack([np.cos(angle), -np.sin(angle)], axis=1) * weight[:, None, None]
    return (basis.reshape(2 * freqs, n) * _scale(normalization, n)).astype(np.float32)


#: ``norm`` of torch.fft's functions as the ``normalization`` of the forward / inverse transform
_NORMS = {None: (0, 2), "backward": (0, 2), "ortho": (1, 1), "forward": (2, 0)}
_FORWARD = ("aten._fft_r2c.default", "aten.fft_rfft.default")


def _normalization(op: Operator) -> int | None:
    if op.type.startswith("aten._fft"):
        return op.params.get("normalization", 0)
    norm = op.params.get("norm")
    if norm not in _NORMS:
        return None
    return _NORMS[norm][0 if op.type in _FORWARD else 1]


def complex_basis(n: int, normalization: int, forward: bool) -> np.ndarray:
    """(2N, 2N): a complex signal's real layout times this is its (inverse) DFT's real layout."""
    sign = -1.0 if forward else 1.0
    angle = 2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n
    cos, sin = np.cos(angle), np.sin(angle)
    basis = np.empty((n, 2, n, 2))
    basis[:, 0, :, 0], basis[:, 1, :, 0] = cos, -sign * sin  # real part of the result
    basis[:, 0, :, 1], basis[:, 1, :, 1] = sign * sin, cos  # imaginary part
    return (basis.reshape(2 * n, 2 * n) * _scale(normalization, n)).astype(np.float32)


def _last_dim_only(op: Operator, rank: int) -> bool:
    dims = op.params.get("dim", -1)
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    return len(dims) == 1 and isinstance(dims[0], int) and dims[0] % rank == rank - 1


def _static(shape) -> bool:
    return shape is not None and len(shape) >= 1 and all(isinstance(d, int) for d in shape[-1:])


def _rfft(graph: Graph, op: Operator) -> None:
    x, out = op.inputs[0], op.outputs[0]
    n, freqs = x.shape[-1], out.shape[-1]
    em = AtenEmitter(graph, op)
    basis = em.constant(forward_basis(n, freqs, _normalization(op)), name=f"{op.name}_basis")
    real = REAL_OF.get(out.dtype, "f32")
    y = em.op("aten.matmul.default", {"self": x, "other": basis}, shape=list(x.shape[:-1]) + [2 * freqs], dtype=real,
              name=f"{op.name}_product")
    pairs = em.op("aten.view.default", {"self": y}, shape=list(out.shape) + [2], dtype=real, name=f"{op.name}_pairs")
    pairs.producer.params["size"] = list(out.shape) + [2]
    em.replace(em.op("aten.view_as_complex.default", {"self": pairs}, shape=list(out.shape), dtype=out.dtype,
                     name=f"{op.name}_spectrum"))
    graph.remove_op(op)


def _irfft(graph: Graph, op: Operator) -> None:
    x, out = op.inputs[0], op.outputs[0]
    n, freqs = out.shape[-1], x.shape[-1]
    em = AtenEmitter(graph, op)
    real = REAL_OF[x.dtype]
    pairs = em.op("aten.view_as_real.default", {"self": x}, shape=list(x.shape) + [2], dtype=real,
                  name=f"{op.name}_pairs")
    flat = em.op("aten.view.default", {"self": pairs}, shape=list(x.shape[:-1]) + [2 * freqs], dtype=real,
                 name=f"{op.name}_flat")
    flat.producer.params["size"] = list(x.shape[:-1]) + [2 * freqs]
    basis = em.constant(inverse_basis(n, freqs, _normalization(op)), name=f"{op.name}_basis")
    em.replace(em.op("aten.matmul.default", {"self": flat, "other": basis}, shape=list(out.shape), dtype=out.dtype,
                     name=f"{op.name}_signal"))
    graph.remove_op(op)


def _cfft(graph: Graph, op: Operator) -> None:
    x, out = op.inputs[0], op.outputs[0]
    n = x.shape[-1]
    em = AtenEmitter(graph, op)
    real = REAL_OF[x.dtype]
    pairs = em.op("aten.view_as_real.default", {"self": x}, shape=list(x.shape) + [2], dtype=real,
                  name=f"{op.name}_pairs")
    flat = em.op("aten.view.default", {"self": pairs}, shape=list(x.shape[:-1]) + [2 * n], dtype=real,
                 name=f"{op.name}_flat")
    flat.producer.params["size"] = list(x.shape[:-1]) + [2 * n]
    basis = em.constant(complex_basis(n, op.params.get("normalization", 0), bool(op.params.get("forward", True))),
                        name=f"{op.name}_basis")
    y = em.op("aten.matmul.default", {"self": flat, "other": basis}, shape=list(x.shape[:-1]) + [2 * n], dtype=real,
              name=f"{op.name}_product")
    out_pairs = em.op("aten.view.default", {"self": y}, shape=list(out.shape) + [2], dtype=real,
                      name=f"{op.name}_out_pairs")
    out_pairs.producer.params["size"] = list(out.shape) + [2]
    em.replace(em.op("aten.view_as_complex.default", {"self": out_pairs}, shape=list(out.shape), dtype=out.dtype,
                     name=f"{op.name}_spectrum"))
    graph.remove_op(op)


@graph_pass("decompose_fft", "FFTs along the last dim as products with a constant DFT basis")
def run(graph: Graph, cx) -> None:
    for op in graph.ops_of_type(*_FORWARD, "aten._fft_c2r.default", "aten.fft_irfft.default", "aten._fft_c2c.default"):
        x, out = op.inputs[0], op.outputs[0]
        if x.shape is None or out.shape is None or not _static(x.shape) or not _static(out.shape) \
                or not _last_dim_only(op, len(x.shape)) or max(x.shape[-1], out.shape[-1]) > MAX_POINTS \
                or _normalization(op) is None or len(op.inputs) != 1:
            continue
        if op.type == "aten._fft_c2c.default":
            if x.dtype in REAL_OF and out.dtype == x.dtype and x.shape[-1] == out.shape[-1]:
                _cfft(graph, op)
        elif op.type in _FORWARD and x.dtype not in REAL_OF and op.params.get("n") in (None, x.shape[-1]):
            _rfft(graph, op)
        elif op.type not in _FORWARD and x.dtype in REAL_OF:
            _irfft(graph, op)
