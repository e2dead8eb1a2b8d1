"""Pass manager: snapshots, diffs, timing, failing pass named with its predecessors."""
import pytest

from engine.ir import Graph
from engine.passes import PIPELINE, PassContext, PassError, PassManager, dump_records, graph_pass
from engine.passes.diff import diff_snapshots
from engine.passes.manager import pass_name

TEXT = """7767517
4 4
pnnx.Input x 0 1 x #x=(1,4)f32
F.dropout d 1 1 x d #d=(1,4)f32 !from=dropout
F.relu r 1 1 d r #r=(1,4)f32 !from=relu
pnnx.Output out 1 0 r
"""


@graph_pass("remove_dropout", "bypass dropout")
def remove_dropout(g, cx):
    for op in g.ops_of_type("F.dropout"):
        g.bypass(op)


@graph_pass("retype_relu")
def retype_relu(g, cx):
    for op in g.ops_of_type("F.relu"):
        op.type = "ReLU"
        op.params["0"] = 0.0


@graph_pass("nothing")
def nothing(g, cx):
    pass


@graph_pass("explode")
def explode(g, cx):
    raise ValueError("kaput")


def test_records_snapshot_diff_and_time():
    g = Graph.from_text(TEXT)
    recs = PassManager([remove_dropout, retype_relu, nothing], lint=True).run(g, PassContext())
    assert [r.name for r in recs] == ["build_graph", "remove_dropout", "retype_relu", "nothing"]
    assert recs[1].diff.counts() == {"added": 0, "removed": 1, "changed": 1}
    assert recs[1].diff.removed[0].provenance == ("dropout",)
    assert recs[2].diff.changed[0].name == "r" and "ReLU" in recs[2].diff.changed[0].after
    assert not recs[3].changed_anything
    assert recs[3].snapshot == g.to_text()
    assert all(r.seconds >= 0 for r in recs)


def test_failing_pass_is_named_with_predecessors():
    g = Graph.from_text(TEXT)
    with pytest.raises(PassError, match=r"pass explode failed: ValueError: kaput \(after the passes: remove_dropout, nothing\)"):
        PassManager([remove_dropout, nothing, explode]).run(g, PassContext())


def test_dump_writes_numbered_files(tmp_path):
    g = Graph.from_text(TEXT)
    recs = PassManager([remove_dropout, retype_relu]).run(g, PassContext())
    dump_records(recs, tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00_build_graph.diff", "00_build_graph.txt", "01_remove_dropout.diff", "01_remove_dropout.txt",
                     "02_retype_relu.diff", "02_retype_relu.txt"]
    assert (tmp_path / "01_remove_dropout.diff").read_text().startswith("# +0 -1 ~1")
    assert Graph.from_text((tmp_path / "02_retype_relu.txt").read_text()).find_op("r").type == "ReLU"


def test_diff_of_identical_snapshots_is_empty():
    assert diff_snapshots(TEXT, TEXT).empty


def test_every_pipeline_pass_has_its_own_name_and_description():
    """The Passes panel, ``--dump-passes`` file names and failure messages name a pass by its
    ``graph_pass`` name: none may fall back to a function's ``run`` or repeat another's."""
    passes = list(dict.fromkeys(PIPELINE))  # a pass may run twice (eliminate_dead_code)
    names = [pass_name(p) for p in passes]
    assert all(getattr(p, "pass_name", None) for p in passes), [f"{p.__module__}.{p.__name__}" for p in passes
                                                                  if not getattr(p, "pass_name", None)]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    assert all(p.pass_description for p in passes)
    assert "decompose_runtime_lookups" in names
