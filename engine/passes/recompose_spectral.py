"""Put core ATen's ``stft`` back together (ATen level, before lowering).

``run_decompositions()`` spells ``torch.stft(x, n_fft, hop, window=w, return_complex=True)`` as
frames, a window product and a real FFT of each frame::

    f = unfold(x, -1, n_fft, hop)                 # (..., frames, n_fft)
    s = _fft_r2c(f * w, [-1], normalization, onesided)
    y = permute(s, (..., -1, -2))                 # (..., freqs, frames), complex

(``w``: the window zero-padded to ``n_fft``, a constant or a ``constant_pad_nd`` of one; no
product when there is none) which becomes ``aten.stft.default(x, n_fft, hop, win_length, w,
normalized, onesided, True)`` — the
``normalization`` of ``_fft_r2c`` must be none (0) or ``1/sqrt(n)`` (1, ``normalized=True``).
The frames and the FFT result must have no other user. A centred input's padding stays as it
was exported (a reflect pad gather, converted on its own). ``istft``'s decomposition (an
overlap-add ``index_put`` and a window envelope) is not recomposed: it is refused at its
``_fft_c2r``.
"""
from __future__ import annotations


from ..ir import Graph, Operator
from ._match import Match, commuted
from ._rewrite import replace_chain, rewrite_from_roots
from .manager import graph_pass

def _const(opd) -> bool:
    p = opd.producer if opd is not None else None
    return opd is not None and ("const" in opd.meta or (p is not None and p.type == "pnnx.Attribute"))


def _window(m: Match, w, n_fft: int):
    """``(window operand, win_length)``: a constant of ``n_fft`` samples, or a constant padded
    to ``n_fft`` with zeros on both sides as ``torch.stft`` pads a shorter window."""
    pad = m.take(w, "aten.constant_pad_nd.default")
    if pad is None:
        return (w, None) if list(w.shape or []) == [n_fft] and _const(w) else None
    inner = pad.inputs[0]
    length = (inner.shape or [0])[0]
    left = (n_fft - length) // 2
    if not _const(inner) or len(inner.shape) != 1 or float(pad.params.get("value") or 0.0) != 0.0 or \
            list(pad.params.get("pad") or []) != [left, n_fft - length - left]:
        return None
    return inner, length


def _last(dim, rank: int) -> bool:
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return len(dims) == 1 and isinstance(dims[0], int) and dims[0] % rank == rank - 1


def _stft(graph: Graph, root: Operator) -> bool:
    x = root.inputs[0] if root.inputs else None
    rank = len(x.shape or []) if x is not None else 0
    if root.type != "aten.permute.default" or rank < 2 or \
            list(root.params.get("dims") or []) != list(range(rank - 2)) + [rank - 1, rank - 2]:
        return False
    m = Match()
    fft = m.take(x, "aten._fft_r2c.default")
    if fft is None or not _last(fft.params.get("dim"), rank) or fft.params.get("normalization") not in (0, 1):
        return False
    frames, window, win_length = fft.inputs[0], None, None
    prod = m.take(frames, "aten.mul.Tensor")
    if prod is not None:
        frames, window = next(((f, w) for f, w in commuted(prod) if len(w.shape or []) == 1), (None, None))
    unfold = m.take(frames, "aten.unfold.default")
    if unfold is None or not _last(unfold.params.get("dimension"), len(unfold.inputs[0].shape or [1])):
        return False
    n_fft, hop = unfold.params.get("size"), unfold.params.get("step")
    if window is not None:
        found = _window(m, window, n_fft)
        if found is None:
            return False
        window, win_length = found
    signal = unfold.inputs[0]
    inputs, names = ([signal, window], ["self", "window"]) if window is not None else ([signal], ["self"])
    params = {"n_fft": n_fft, "hop_length": hop, "win_length": win_length, "normalized": fft.params["normalization"] == 1,
              "onesided": bool(fft.params.get("onesided", True)), "return_complex": True}
    replace_chain(graph, root, m.ops, "aten.stft.default", inputs, input_names=names,
                  params=params).meta["target"] = "aten.stft.default"
    return True


@graph_pass("recompose_spectral", "turn core ATen's framed real FFT back into one stft")
def run(graph: Graph, cx) -> None:
    rewrite_from_roots(graph, _stft, "recomposed stft", ("aten.permute.default",))
