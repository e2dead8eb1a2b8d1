"""legalize_tensor_rank and its index arithmetic (_rank_plan), on hand-written pnnx graphs and
checked against numpy: the rewritten ≤4-D graph computes the same values as the original
(evaluated with numpy, op by op)."""
import itertools
import math
import random

import numpy as np
import pytest

import engine.convert  # noqa: F401  (engine.passes imported first is a circular import)
from engine.convert.shapes import batch_dim, ncnn_rank
from engine.ir import Attribute, Graph
from engine.passes import legalize_tensor_rank
from engine.passes._rank_plan import apply_plan, merge_kept_runs, plan_block_permutes


def _graph(body: str) -> Graph:
    lines = [ln.strip() for ln in body.strip().splitlines()]
    return Graph.from_text("7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n")


def _eval(g: Graph, inputs: dict) -> dict:
    """The values of a pnnx graph of the ops this pass reads and writes, computed by numpy."""
    v = dict(inputs)
    for op in g.ops:
        t, p = op.type, op.params
        xs = [v[i.name] for i in op.inputs]
        if t == "pnnx.Input":
            continue
        if t == "pnnx.Attribute":
            out = op.attrs["data"].data
        elif t == "pnnx.Output":
            continue
        elif t == "Tensor.reshape":
            out = xs[0].reshape(p["shape"])
        elif t == "Tensor.permute":
            out = xs[0].transpose(p["dims"])
        elif t == "Tensor.select":
            out = np.take(xs[0], p["index"], axis=p["dim"])
        elif t == "Tensor.slice":
            idx = [slice(None)] * xs[0].ndim
            idx[p["dim"]] = slice(p["start"], p["end"], p.get("step", 1))
            out = xs[0][tuple(idx)]
        elif t == "pnnx.Expression":
            assert p["expr"] == "add(@0,@1)"
            out = xs[0] + xs[1]
        elif t == "F.softmax":
            e = np.exp(xs[0] - xs[0].max(axis=p["dim"], keepdims=True))
            out = e / e.sum(axis=p["dim"], keepdims=True)
        elif t == "torch.sum":
            out = xs[0].sum(axis=tuple(p["dim"]), keepdims=p["keepdim"])
        elif t == "Tensor.repeat":
            out = np.tile(xs[0], p["sizes"])
        else:
            raise AssertionError(t)
        assert list(out.shape) == list(op.outputs[0].shape), (op.name, out.shape, op.outputs[0].shape)
        v[op.outputs[0].name] = out
    return v


def _check(body: str, feeds: dict, consts: dict = (), max_rank: int = 4):
    g = _graph(body)
    for name, arr in dict(consts).items():
        g.find_op(name).attrs["data"] = Attribute(arr)
    want = _eval(g, feeds)
    outs = [op.inputs[0].name for op in g.output_ops()]
    legalize_tensor_rank.run(g, None)
    g.lint()
    got = _eval(g, feeds)
    for o in outs:
        np.testing.assert_allclose(got[o], want[o])
    for opd in g.operands.values():
        assert opd.shape is None or ncnn_rank(opd) <= max_rank, (opd.name, opd.shape)
    return g


def test_window_partition_is_reshape_permute_reshape():
    g = _check("""
        pnnx.Input x 0 1 x #x=(1,8,12,6)f32
        Tensor.reshape v 1 1 x v shape=(1,2,4,3,4,6) #v=(1,2,4,3,4,6)f32
        Tensor.permute p 1 1 v p dims=(0,1,3,2,4,5) #p=(1,2,3,4,4,6)f32
        Tensor.reshape r 1 1 p r shape=(6,16,6) #r=(6,16,6)f32
        pnnx.Output out 1 0 r
    """, {"x": np.random.rand(1, 8, 12, 6)})
    assert [op.type for op in g.ops] == ["pnnx.Input", "Tensor.reshape", "Tensor.permute", "Tensor.reshape",
                                         "pnnx.Output"]
    assert g.find_op("r") is not None and g.operands["r"].shape == [6, 16, 6]  # the result keeps its name


def test_selects_of_a_permuted_head_split_move_before_it():
    g = _check("""
        pnnx.Input x 0 1 x #x=(1,36,48)f32
        Tensor.reshape v 1 1 x v shape=(4,9,3,2,8) #v=(4,9,3,2,8)f32
        Tensor.permute p 1 1 v p dims=(2,0,3,1,4) #p=(3,4,2,9,8)f32
        Tensor.select q 1 1 p q dim=0 index=0 #q=(4,2,9,8)f32
        Tensor.select k 1 1 p k dim=0 index=1 #k=(4,2,9,8)f32
        Tensor.select w 1 1 p w dim=0 index=-1 #w=(4,2,9,8)f32
        pnnx.Expression a 2 1 q k a expr="add(@0,@1)" #a=(4,2,9,8)f32
        pnnx.Expression b 2 1 a w b expr="add(@0,@1)" #b=(4,2,9,8)f32
        pnnx.Output out 1 0 b
    """, {"x": np.random.rand(1, 36, 48)})
    types = [op.type for op in g.ops]
    # the 5-D values take a batch axis (ncnn holds 4 dims and a batch; checked numerically above)
    assert all(batch_dim(o) is not None for op in g.ops for o in op.outputs if o.shape is not None and len(o.shape) == 5)
    assert types.count("Tensor.permute") <= 3


def test_five_blocks_take_two_permutes():
    g = _check("""
        pnnx.Input x 0 1 x #x=(1,4,6,9)f32
        Tensor.reshape v 1 1 x v shape=(1,4,2,3,3,3) #v=(1,4,2,3,3,3)f32
        Tensor.permute p 1 1 v p dims=(0,2,4,3,5,1) #p=(1,2,3,3,3,4)f32
        Tensor.reshape r 1 1 p r shape=(1,6,9,4) #r=(1,6,9,4)f32
        pnnx.Output out 1 0 r
    """, {"x": np.random.rand(1, 4, 6, 9)})
    assert [op.type for op in g.ops].count("Tensor.permute") == 2


def test_broadcast_groups_and_materialized_broadcast():
    _check("""
        pnnx.Input x 0 1 x #x=(4,3,25)f32
        pnnx.Attribute m 0 1 m @data=(1,4,1,5,5)f32 #m=(1,4,1,5,5)f32
        Tensor.reshape v 1 1 x v shape=(1,4,3,5,5) #v=(1,4,3,5,5)f32
        pnnx.Expression a 2 1 v m a expr="add(@0,@1)" #a=(1,4,3,5,5)f32
        Tensor.reshape r 1 1 a r shape=(12,25) #r=(12,25)f32
        pnnx.Output out 1 0 r
    """, {"x": np.random.rand(4, 3, 25)}, {"m": np.random.rand(1, 4, 1, 5, 5).astype(np.float32)})
    # five alternating broadcast groups: one input is tiled to merge two of them
    g = _check("""
        pnnx.Input x 0 1 x #x=(1,720)f32
        pnnx.Input y 0 1 y #y=(1,48)f32
        Tensor.reshape xv 1 1 x xv shape=(2,3,4,5,6) #xv=(2,3,4,5,6)f32
        Tensor.reshape yv 1 1 y yv shape=(2,1,4,1,6) #yv=(2,1,4,1,6)f32
        pnnx.Expression a 2 1 xv yv a expr="add(@0,@1)" #a=(2,3,4,5,6)f32
        Tensor.reshape r 1 1 a r shape=(6,20,6) #r=(6,20,6)f32
        pnnx.Output out 1 0 r
    """, {"x": np.random.rand(1, 720), "y": np.random.rand(1, 48)})
    # (2, 3, 4, 5, 6) runs with dim 0 as ncnn's batch: four dims broadcast as they are, or a
    # tile merges two groups when they do not fit
    assert all(batch_dim(o) is not None for op in g.ops for o in op.outputs if o.shape is not None and len(o.shape) == 5)


def test_softmax_sum_and_slices_of_6d():
    _check("""
        pnnx.Input x 0 1 x #x=(2,3,4,5,6)f32
        Tensor.reshape v 1 1 x v shape=(1,2,3,4,5,6) #v=(1,2,3,4,5,6)f32
        F.softmax s 1 1 v s dim=3 #s=(1,2,3,4,5,6)f32
        torch.sum m 1 1 s m dim=(2,4) keepdim=True #m=(1,2,1,4,1,6)f32
        Tensor.slice c 1 1 v c dim=4 start=1 end=5 step=2 #c=(1,2,3,4,2,6)f32
        Tensor.reshape r1 1 1 m r1 shape=(48) #r1=(48)f32
        Tensor.reshape r2 1 1 c r2 shape=(288) #r2=(288)f32
        pnnx.Output out 1 0 r1
        pnnx.Output out2 1 0 r2
    """, {"x": np.random.rand(2, 3, 4, 5, 6)})


def test_graph_without_high_rank_tensors_is_untouched():
    text = """
        pnnx.Input x 0 1 x #x=(1,3,4,5)f32
        Tensor.permute p 1 1 x p dims=(0,2,3,1) #p=(1,4,5,3)f32
        pnnx.Output out 1 0 p
    """
    g = _graph(text)
    before = g.to_text()
    legalize_tensor_rank.run(g, None)
    assert g.to_text().replace("batch", "") == before.replace("batch", "")


def test_merge_kept_runs():
    assert merge_kept_runs([1, 3, 2, 4, 5], [1, 2, 3, 4, 5]) == [[1], [2], [3], [4, 5]]
    assert merge_kept_runs([2, 0, 3, 1, 4], [0, 1, 2, 3, 4]) == [[0], [1], [2], [3], [4]]
    assert merge_kept_runs([0, 1, 2], [0, 1, 2]) == [[0, 1, 2]]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_block_permute_plans_are_correct_and_short(n):
    perms = list(itertools.permutations(range(n)))
    random.seed(n)
    for target in perms if n <= 5 else random.sample(perms, 40):
        plan = plan_block_permutes(target)
        assert apply_plan(range(n), plan) == list(target)
        for cuts, order in plan:
            assert len(order) <= 4
        if n <= 4:
            assert len(plan) <= 1
        elif n <= 6:
            assert len(plan) <= 2  # optimal for up to 6 blocks (breadth-first)
    assert math.prod([1]) == 1


def _random_chain(rng, shape):
    """A random chain of reshapes (splitting and merging dims) and permutes."""
    steps, cur = [], list(shape)
    for _ in range(rng.randint(2, 5)):
        if rng.random() < 0.5 and len(cur) > 1:
            dims = list(range(len(cur)))
            rng.shuffle(dims)
            steps.append(("permute", dims))
            cur = [cur[d] for d in dims]
        else:
            flat = []
            for n in cur:  # split composite dims into factors, then merge neighbours at random
                f = next((p for p in (2, 3, 5) if n % p == 0 and n > p), None)
                flat += [f, n // f] if f and rng.random() < 0.6 else [n]
            new = [flat[0]]
            for n in flat[1:]:
                if rng.random() < 0.3:
                    new[-1] *= n
                else:
                    new.append(n)
            steps.append(("reshape", new))
            cur = new
    return steps


def test_atom_view_matches_numpy_on_random_chains():
    """Chains that are one permutation of atoms compose exactly; the others (a reshape cutting
    across atoms a permute separated) are reported, never miscomputed."""
    from engine.passes._rearrange import AtomView, NotRearrangement

    rng = random.Random(7)
    composed = 0
    for _ in range(300):
        shape = [rng.choice([1, 2, 3, 4, 6]) for _ in range(rng.randint(2, 4))]
        x = np.random.rand(*shape)
        view, want = AtomView(shape), x
        try:
            for kind, arg in _random_chain(rng, shape):
                if kind == "permute":
                    view.permute(arg)
                    want = want.transpose(arg)
                else:
                    view.reshape(arg)
                    want = want.reshape(arg)
        except NotRearrangement:
            continue
        composed += 1
        r = view.result()
        got = x.reshape(r.sizes or [1]).transpose(r.order or [0]).reshape(want.shape)
        np.testing.assert_array_equal(got, want)
    assert composed > 250
