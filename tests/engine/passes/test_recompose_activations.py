"""recompose_activations on hand-written core-ATen chains (numerics: tests/engine/converters/
test_activation.py runs every activation in the core dialect)."""
import numpy as np

import engine.convert  # noqa: F401  (engine.passes imported first is a circular import)
from engine.ir import Attribute, Graph
from engine.passes import recompose_activations

HARDSWISH = """
    pnnx.Input x 0 1 x #x=(1,4,5,6)f32
    aten.add.Tensor add 1 1 x add other=3 alpha=1 $self=x #add=(1,4,5,6)f32 !from=add
    aten.clamp.default c0 1 1 add c0 min=0 max=None $self=add #c0=(1,4,5,6)f32 !from=c0
    aten.clamp.default c1 1 1 c0 c1 min=None max=6 $self=c0 #c1=(1,4,5,6)f32 !from=c1
    aten.mul.Tensor mul 2 1 x c1 mul $self=x $other=c1 #mul=(1,4,5,6)f32 !from=mul
    aten.div.Tensor div 1 1 mul div other=6 $self=mul #div=(1,4,5,6)f32 !from=div
    pnnx.Output out 1 0 div
"""


def _graph(body: str) -> Graph:
    lines = [ln.strip() for ln in body.strip().splitlines()]
    g = Graph.from_text("7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n")
    for op in g.ops:
        if op.type.startswith("aten."):
            op.meta["target"] = op.type
    return g


def _run(g: Graph) -> list[str]:
    recompose_activations.run(g, None)
    g.lint()
    return [op.type for op in g.ops]


def test_hardswish_chain():
    g = _graph(HARDSWISH)
    assert _run(g) == ["pnnx.Input", "aten.hardswish.default", "pnnx.Output"]
    hs = g.find_op("div")
    assert hs.outputs[0].name == "div" and hs.inputs[0].name == "x" and hs.input_names == ["self"]
    assert set(hs.provenance.nodes) == {"add", "c0", "c1", "mul", "div"}
    assert hs.meta["target"] == "aten.hardswish.default"


def test_shared_intermediate_blocks_the_fusion():
    g = _graph(HARDSWISH.replace("pnnx.Output out 1 0 div", "pnnx.Output out 1 0 div\npnnx.Output out2 1 0 c1"))
    assert "aten.hardswish.default" not in _run(g)


def test_wrong_constant_blocks_the_fusion():
    assert "aten.hardswish.default" not in _run(_graph(HARDSWISH.replace("other=6", "other=5")))
    assert "aten.hardswish.default" not in _run(_graph(HARDSWISH.replace("other=3", "other=2")))


def test_hardsigmoid_from_hardtanh_and_reciprocal_multiplier():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,4)f32
        aten.add.Tensor add 1 1 x add other=3.0 alpha=1 $self=x #add=(1,4)f32
        aten.hardtanh.default h 1 1 add h min_val=0.0 max_val=6.0 $self=add #h=(1,4)f32
        aten.mul.Tensor mul 1 1 h mul other=0.16666666666666666 $self=h #mul=(1,4)f32
        pnnx.Output out 1 0 mul
    """)
    assert _run(g) == ["pnnx.Input", "aten.hardsigmoid.default", "pnnx.Output"]


def test_mish_needs_softplus_first():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,4)f32
        aten.exp.default exp 1 1 x exp $self=x #exp=(1,4)f32
        aten.log1p.default l 1 1 exp l $self=exp #l=(1,4)f32
        aten.gt.Scalar gt 1 1 x gt other=20 $self=x #gt=(1,4)bool
        aten.where.self w 3 1 gt x l w $condition=gt $self=x $other=l #w=(1,4)f32
        aten.tanh.default t 1 1 w t $self=w #t=(1,4)f32
        aten.mul.Tensor m 2 1 x t m $self=x $other=t #m=(1,4)f32
        pnnx.Output out 1 0 m
    """)
    assert _run(g) == ["pnnx.Input", "aten.mish.default", "pnnx.Output"]


def test_prelu_and_leaky_relu_from_where():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,3,4,4)f32
        pnnx.Attribute w 0 1 w @data=(1,3,1,1)f32 #w=(1,3,1,1)f32
        aten.gt.Scalar gt 1 1 x gt other=0 $self=x #gt=(1,3,4,4)bool
        aten.mul.Tensor m 2 1 w x m $self=w $other=x #m=(1,3,4,4)f32
        aten.where.self p 3 1 gt x m p $condition=gt $self=x $other=m #p=(1,3,4,4)f32
        aten.gt.Scalar gt2 1 1 p gt2 other=0 $self=p #gt2=(1,3,4,4)bool
        aten.mul.Tensor m2 1 1 p m2 other=0.1 $self=p #m2=(1,3,4,4)f32
        aten.where.self q 3 1 gt2 p m2 q $condition=gt2 $self=p $other=m2 #q=(1,3,4,4)f32
        pnnx.Output out 1 0 q
    """)
    g.find_op("w").attrs["data"] = Attribute(np.full((1, 3, 1, 1), 0.25, np.float32))
    assert _run(g) == ["pnnx.Input", "pnnx.Attribute", "aten._prelu_kernel.default", "aten.leaky_relu.default",
                       "pnnx.Output"]
    assert g.find_op("p").input_names == ["self", "weight"]
    assert g.find_op("q").params == {"negative_slope": 0.1}


def test_where_with_nonzero_threshold_is_left_alone():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,4)f32
        aten.gt.Scalar gt 1 1 x gt other=1 $self=x #gt=(1,4)bool
        aten.mul.Tensor m 1 1 x m other=0.1 $self=x #m=(1,4)f32
        aten.where.self q 3 1 gt x m q $condition=gt $self=x $other=m #q=(1,4)f32
        pnnx.Output out 1 0 q
    """)
    assert "aten.leaky_relu.default" not in _run(g)


GELU_NEW = """
    pnnx.Input x 0 1 x #x=(1,4,6)f32
    aten.mul.Tensor half 1 1 x half other=0.5 $self=x #half=(1,4,6)f32
    aten.pow.Tensor_Scalar cube 1 1 x cube exponent=3.0 $self=x #cube=(1,4,6)f32
    aten.mul.Tensor k 1 1 cube k other=0.044715 $self=cube #k=(1,4,6)f32
    aten.add.Tensor inner 2 1 x k inner alpha=1 $self=x $other=k #inner=(1,4,6)f32
    aten.mul.Tensor scaled 1 1 inner scaled other=0.7978845608028654 $self=inner #scaled=(1,4,6)f32
    aten.tanh.default t 1 1 scaled t $self=scaled #t=(1,4,6)f32
    aten.add.Tensor one 1 1 t one other=1.0 alpha=1 $self=t #one=(1,4,6)f32
    aten.mul.Tensor y 2 1 half one y $self=half $other=one #y=(1,4,6)f32
    pnnx.Output out 1 0 y
"""


def test_gelu_new_chain():
    g = _graph(GELU_NEW)
    assert _run(g) == ["pnnx.Input", "aten.gelu.default", "pnnx.Output"]
    assert g.find_op("y").params == {"approximate": "tanh"}


def test_gelu_new_with_other_constants_stays():
    assert "aten.gelu.default" not in _run(_graph(GELU_NEW.replace("other=0.044715", "other=0.05")))


def test_each_pattern_is_offered_only_the_root_types_it_can_match():
    """The pass offers an op only to the patterns whose ROOTS list its type: a pattern must then
    find nothing in an op of any other type. Every op of these chains (each a match for some
    pattern at its real root) is retyped to every root type and handed to every pattern."""
    from engine.passes._match import Match

    hardsigmoid = """
        pnnx.Input x 0 1 x #x=(1,4)f32
        aten.add.Tensor add 1 1 x add other=3.0 alpha=1 $self=x #add=(1,4)f32
        aten.hardtanh.default h 1 1 add h min_val=0.0 max_val=6.0 $self=add #h=(1,4)f32
        aten.div.Tensor div 1 1 h div other=6 $self=h #div=(1,4)f32
        pnnx.Output out 1 0 div
    """
    times_sixth = HARDSWISH.replace("aten.div.Tensor div 1 1 mul div other=6",
                                    "aten.mul.Tensor div 1 1 mul div other=0.16666666666666666")
    chains = [HARDSWISH, GELU_NEW, hardsigmoid, times_sixth]
    types = sorted({t for ts in recompose_activations.ROOTS.values() for t in ts}
                   | {"aten.add.Tensor", "aten.clamp.default", "aten.tanh.default"})
    offered = 0
    for text in chains:
        g = _graph(text)
        root = g.ops[-2]
        assert any(p(Match(), root) is not None for p in recompose_activations.ROOTS), "the chain matches"
        for op in g.ops:
            real = op.type
            for t in types:
                op.type = t
                for pattern, roots in recompose_activations.ROOTS.items():
                    if t not in roots:
                        offered += 1
                        assert pattern(Match(), op) is None, (pattern.__name__, t, op.name)
            op.type = real
    assert offered > 500
    assert set(recompose_activations.ROOTS) == set(recompose_activations.PATTERNS)
