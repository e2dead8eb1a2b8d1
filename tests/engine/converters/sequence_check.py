"""Compare a converted sequence model with PyTorch value by value (for the recurrent tests).

Sequence-first tensors ``(T, N, F)`` and recurrent states ``(L*D, N, H)`` carry their batch at
dim 1; :func:`check_sequence` feeds and reads every blob along the batch axis the converter
chose and compares values, and lets a test choose the one-sample arrays ncnn is fed instead
(e.g. int32 token ids, see :func:`int32_ids`).
"""
import numpy as np
import torch
from torch.utils._pytree import tree_leaves

from engine.convert import ConvertOptions, convert
from engine.diagnostics import format_table
from tests.harness import TOL, export_pt2, rel_error
from tests.ncnn_runtime import run_layout


def int32_ids(ids: torch.Tensor) -> np.ndarray:
    """Token ids as ncnn's Embed reads them (int32), in the float32 array the harness feeds."""
    return np.ascontiguousarray(ids.numpy().astype(np.int32)).view(np.float32)


def check_sequence(module, inputs, tmp_path, *, dialect, fp16=False, feed=None, run_inputs=None):
    """Export on ``inputs``, convert, run in ncnn and compare every output value in order.
    ``run_inputs``: other inputs (another sequence length) to run both on; ``feed``: one-sample
    arrays given to ncnn as they are (default: the run inputs, along their batch axes)."""
    module = module.eval()
    pt2 = export_pt2(module, inputs, tmp_path / f"seq_{dialect}.pt2", dialect=dialect)
    result = convert(str(pt2), ConvertOptions(fp16=fp16, lint=True))
    assert result.ok, "conversion incomplete:\n" + format_table(result.errors)
    param, bin_ = tmp_path / f"seq_{dialect}.param", tmp_path / f"seq_{dialect}.bin"
    result.write(param, bin_)
    run_in = list(run_inputs or inputs)
    with torch.no_grad():
        want = [t.numpy() for t in tree_leaves(module(*run_in))]
    arrays = feed if feed is not None else [x.numpy() for x in run_in]
    got = run_layout(param, bin_, arrays, result.ncnn.meta, raw=feed is not None)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.size == w.size, f"out{k}: ncnn {g.shape}, torch {w.shape}"
        err = rel_error(g.reshape(w.shape), w)
        assert err <= TOL[fp16], f"out{k}: relative error {err:.3g} ({dialect}, fp16={fp16})\n{result.ncnn.to_text()}"
    return result
