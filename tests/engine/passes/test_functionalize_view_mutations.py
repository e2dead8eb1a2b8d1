"""functionalize_view_mutations: in-place writes through views reach the base tensor (built from
real TRAINING-dialect exports, checked by evaluating the graph after constant folding)."""
import numpy as np
import torch

import engine
import engine.convert  # noqa: F401
from engine.build import build_graph
from engine.passes import PassContext, fold_constants, functionalize_view_mutations, normalize_inplace, remove_noops
from tests.harness import Fn, check_module, export_pt2


def _graph(fn, x, tmp_path):
    pt2 = export_pt2(Fn(fn), [x], tmp_path / "m.pt2")
    return build_graph(engine.load(str(pt2)).model)


def _folded_output(g):
    cx = PassContext()
    for p in (functionalize_view_mutations.run, normalize_inplace.run, remove_noops.run, fold_constants.run):
        p(g, cx)
    g.lint()
    out = g.output_ops()[0].inputs[0]
    assert out.producer.type == "pnnx.Attribute", [op.type for op in g.ops]
    return out.producer.attrs["data"].data, cx


def _mask(x):
    m = x.new_zeros((6, 6))
    count = 0
    for h in ((0, -3), (-3, -1), (-1, None)):
        for w in ((0, -3), (-3, -1), (-1, None)):
            m[h[0]:h[1], w[0]:w[1]] = count
            count += 1
    return m


def test_slice_fills_reach_the_base(tmp_path):
    x = torch.randn(1, 4)
    g = _graph(_mask, x, tmp_path)
    got, cx = _folded_output(g)
    np.testing.assert_array_equal(got, _mask(x).numpy())
    assert not cx.diagnostics.errors


def test_select_view_and_permute_writes(tmp_path):
    def f(x):
        m = x.new_zeros((2, 3, 4))
        m[1].fill_(2.0)
        m.view(6, 4)[:, 1] = 3.0
        m.permute(2, 0, 1)[3, 0] += 5.0
        return m

    x = torch.randn(1, 4)
    got, _ = _folded_output(_graph(f, x, tmp_path))
    np.testing.assert_array_equal(got, f(x).numpy())


def test_reads_before_the_write_see_the_old_value(tmp_path):
    def f(x):
        m = x.new_ones((3, 3))
        before = m * 2
        m[0, :] = 7.0
        return before + m

    x = torch.randn(1, 4)
    got, _ = _folded_output(_graph(f, x, tmp_path))
    np.testing.assert_array_equal(got, f(x).numpy())



def test_a_second_write_through_a_kept_view_reaches_the_base(tmp_path):
    """``mv``, a view of ``m`` kept in a variable, is written three times (a slice fill, a row,
    an in-place add): each write reaches ``m`` through the views the earlier writes' rewrites
    added (the pass counts the order once and places what it adds right after its write)."""
    def f(x):
        m = x.new_zeros((2, 3, 4))
        mv = m.view(6, 4)
        mv[:, 1] = 3.0
        mv[0] = 9.0
        mv[2:4] += 1.0
        return m * 2

    x = torch.randn(1, 4)
    got, cx = _folded_output(_graph(f, x, tmp_path))
    np.testing.assert_array_equal(got, f(x).numpy())
    assert not cx.diagnostics.errors
    # and through the whole conversion into the ncnn runtime, the folded mask times the input
    check_module(Fn(lambda x: f(x) * x), [x], tmp_path, name="kept_view")
