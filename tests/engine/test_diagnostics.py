"""DiagnosticList keeps one diagnostic per (operator, reason, node), in the order first seen."""
from engine.diagnostics import Diagnostic, DiagnosticList


def _d(operator: str, reason: str, node: str = "n") -> Diagnostic:
    return Diagnostic(node=node, op="aten.foo.default", reason=reason, operator=operator)


def test_duplicates_dropped_order_kept():
    dl = DiagnosticList()
    for d in [_d("a", "r1"), _d("b", "r1"), _d("a", "r1"), _d("a", "r2"), _d("a", "r1", node="m"), _d("b", "r1")]:
        dl.add(d)
    assert [(d.operator, d.reason, d.node) for d in dl] == [("a", "r1", "n"), ("b", "r1", "n"), ("a", "r2", "n"),
                                                            ("a", "r1", "m")]
    assert len(dl.errors) == 4


def test_initial_items_count_as_seen():
    dl = DiagnosticList([_d("a", "r1")])
    dl.add(_d("a", "r1"))
    dl.add(_d("a", "r2"))
    assert [d.reason for d in dl] == ["r1", "r2"]
