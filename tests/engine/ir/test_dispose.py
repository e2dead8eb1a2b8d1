"""A disposed graph or package is freed by reference counting at once: operators and operands,
a package and its models refer to each other, and without disposing they wait for a full
cyclic collection (in Studio, a release that froze the window for seconds after switching
between large models)."""
import gc
import weakref
from pathlib import Path

import engine
from engine.build import build_graph
from engine.convert import ConvertOptions, convert

SAMPLES = Path(__file__).resolve().parents[3] / "resources" / "samples"


def _cyclic_garbage(make) -> int:
    """Objects only the cyclic collector frees once ``make()``'s result is dropped."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        make()
        return gc.collect()
    finally:
        if was:
            gc.enable()


def test_a_disposed_conversion_and_package_leave_no_cyclic_garbage():
    def open_build_convert_dispose():
        pkg = engine.load(SAMPLES / "tiny_transformer.pt2")
        ep = pkg.model
        g = build_graph(ep)
        r = convert(ep, ConvertOptions(snapshots=True, keep_aten=True))
        op = weakref.ref(r.ncnn.ops[0])
        for graph in (g, r.aten, r.pnnx, r.ncnn):
            graph.dispose()
        pkg.dispose()
        assert op() is None, "freed when disposed, not at a collection"

    def the_same_undisposed():
        pkg = engine.load(SAMPLES / "tiny_transformer.pt2")
        build_graph(pkg.model)
        convert(pkg.model, ConvertOptions(snapshots=True, keep_aten=True))
        pkg.close()

    assert _cyclic_garbage(the_same_undisposed) > 1000  # what disposing is for
    # each disposed graph keeps an empty shell with its list view (a graph and its view)
    assert _cyclic_garbage(open_build_convert_dispose) <= 4 * 4


def test_a_disposed_graph_is_empty_and_usable():
    pkg = engine.load(SAMPLES / "tiny_cnn.pt2")
    g = build_graph(pkg.model)
    op = g.ops[1]
    opd = g.ops[0].outputs[0]
    g.dispose()
    pkg.dispose()
    assert len(g.ops) == 0 and not g.operands and list(g.ops) == []
    assert opd.producer is None and opd.consumers == []
    # an operator something still refers to (a display node) holds no operands either
    assert op.inputs == [] and op.outputs == []
    assert pkg.models == {}
