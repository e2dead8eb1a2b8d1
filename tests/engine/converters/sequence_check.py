"""Compare a converted sequence model with PyTorch value by value (for the recurrent tests).

The harness's :func:`tests.harness.check_module` drops dim 0 of every output; sequence-first
tensors ``(T, 1, F)`` and recurrent states ``(L*D, 1, H)`` carry their batch at dim 1 and ncnn
holds them whole, so :func:`check_sequence` compares values in order (sizes must agree) and
lets a test choose the arrays ncnn is fed (e.g. int32 token ids, see :func:`int32_ids`).
"""
import numpy as np
import torch
from torch.utils._pytree import tree_leaves

from engine.convert import ConvertOptions, convert
from engine.diagnostics import format_table
from tests.harness import TOL, export_pt2, rel_error, run_ncnn


def int32_ids(ids: torch.Tensor) -> np.ndarray:
    """Token ids as ncnn's Embed reads them (int32), in the float32 array the harness feeds."""
    return np.ascontiguousarray(ids.numpy().astype(np.int32)).view(np.float32)


def check_sequence(module, inputs, tmp_path, *, dialect, fp16=False, feed=None, run_inputs=None):
    """Export on ``inputs``, convert, run in ncnn and compare every output value in order.
    ``run_inputs``: other inputs (another sequence length) to run both on; ``feed``: the arrays
    given to ncnn (default: the run inputs, without dim 0 where it is 1)."""
    module = module.eval()
    pt2 = export_pt2(module, inputs, tmp_path / f"seq_{dialect}.pt2", dialect=dialect)
    result = convert(str(pt2), ConvertOptions(fp16=fp16, lint=True))
    assert result.ok, "conversion incomplete:\n" + format_table(result.errors)
    param, bin_ = tmp_path / f"seq_{dialect}.param", tmp_path / f"seq_{dialect}.bin"
    result.write(param, bin_)
    run_in = list(run_inputs or inputs)
    with torch.no_grad():
        want = [t.numpy() for t in tree_leaves(module(*run_in))]
    arrays = feed if feed is not None else [x.numpy()[0] if x.shape[0] == 1 else x.numpy() for x in run_in]
    got = run_ncnn(param, bin_, arrays, len(want))
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.size == w.size, f"out{k}: ncnn {g.shape}, torch {w.shape}"
        err = rel_error(g.reshape(w.shape), w)
        assert err <= TOL[fp16], f"out{k}: relative error {err:.3g} ({dialect}, fp16={fp16})\n{result.ncnn.to_text()}"
    return result
