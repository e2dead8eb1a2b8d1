"""Every input a fuzzer broke the engine with, kept as a regression test.

Each file in ``crashers/`` is a package found by ``test_fuzz_pipeline.py`` or the atheris
harness that once made the pipeline raise an untyped exception (or hang). :data:`EXPECTED` says
what the pipeline must do with it now: the outcome's beginning (``refused: PT2FormatError``)
and words its message must hold. A new crasher is added here with the fix that makes it pass.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.oracle import guarded, run_pipeline

CRASHERS = Path(__file__).resolve().parent / "crashers"

#: file → (outcome prefix, words the outcome must contain)
EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    # the graph declares p_fc2_weight as [8, 4], the weights config stores [2, 8]: the lazy
    # weight loader raised IRError("attribute loader returned shape ...") while writing
    "weight_shape_disagrees_with_graph.pt2": ("refused: PT2FormatError", ("p_fc2_weight", "[2, 8]", "[8, 4]")),
    # a relu of a constant whose input lost its argument name: the lazily folded constant
    # raised fold_constants._NotConstant("self") while writing
    "folded_constant_missing_argument.pt2": ("refused: PT2FormatError", ("relu", "missing argument self")),
    # a permute of a weight declared [16, 0] in the graph (numpy computes [16, 10]): IRError
    # ("attribute loader returned shape ...") while writing the pnnx model; now the addmm reading
    # it is refused before anything is written (its operand is no constant of the declared shape)
    "folded_constant_shape_disagrees.pt2": ("incomplete", ()),
    # an addmm that lost an operand: fuse_unrolled_rnn indexed mm.inputs[2] (IndexError, so
    # the whole conversion failed as "pass fuse_unrolled_rnn failed"); now no match, converts
    "rnn_fusion_matmul_missing_operand.pt2": ("incomplete", ()),
}


def test_every_crasher_is_listed():
    assert sorted(p.name for p in CRASHERS.glob("*.pt2")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_crasher_is_handled(name, tmp_path):
    prefix, words = EXPECTED[name]
    with guarded():
        outcome = run_pipeline(CRASHERS / name, tmp_path, strict_passes=True)
    assert outcome.startswith(prefix), outcome
    for w in words:
        assert w in outcome, outcome
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".bak"))]
