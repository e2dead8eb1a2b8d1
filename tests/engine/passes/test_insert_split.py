"""insert_split on hand-written ncnn graphs: one Split output per use, in consumer order, also
for blobs a many-input layer reads (whose inputs the pass indexes once)."""
import pytest

import engine.convert  # noqa: F401  (import order: engine.convert before engine.passes)
from engine.ir import Graph
from engine.passes import PassContext, PassManager, insert_split

S = "(4,5,6)f32"


def _run(*lines: str) -> Graph:
    lines = ("Input in0 0 1 a #a=" + S, "Input in1 0 1 b #b=" + S) + lines
    g = Graph.from_text("7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n")
    PassManager([insert_split.run], lint=True).run(g, PassContext())
    return g


def _inputs(g: Graph) -> dict[str, list[str]]:
    return {op.name: [i.name for i in op.inputs] for op in g.ops if op.inputs}


@pytest.mark.parametrize("n_extra", [0, 5])  # a concat of few inputs (scanned) and of many (indexed)
def test_every_use_gets_its_own_split_output(n_extra):
    extra = [f"e{k}" for k in range(n_extra)]
    makes = [f"ReLU r{k} 1 1 b {x} #{x}={S}" for k, x in enumerate(extra)]
    ins = ["b", "a", *extra, "a"]
    g = _run(*makes, f"Concat cat {len(ins)} 1 {' '.join(ins)} y #y=(24,5,6)f32",
             "ReLU relu 1 1 a z #z=" + S, "Output out 2 0 y z")
    got = _inputs(g)
    assert got["a_split"] == ["a"] and got["relu"] == ["a_split_2"]
    # b's readers in the order they were linked: the ReLUs, then the concat (once: b unsplit)
    b_in_cat = f"b_split_{n_extra}" if n_extra else "b"
    assert got["cat"] == [b_in_cat, "a_split_0", *extra, "a_split_1"]
    assert [got[f"r{k}"] for k in range(n_extra)] == [[f"b_split_{k}"] for k in range(n_extra)]


def test_blob_read_once_or_only_by_outputs_gets_no_split():
    g = _run("ReLU r 1 1 a y #y=" + S, "Output out 2 0 y b")
    assert [op.type for op in g.ops] == ["Input", "Input", "ReLU", "Output"]
