"""Bounded fuzzing of the whole path: mutated copies of valid packages go through open →
inspect → build_graph → convert (with snapshots and the report) → write, and must end in
success or a typed ``engine.PT2Error`` — never another exception, a hang (> 5 s per example)
or a peak RSS growth beyond 1 GiB (:mod:`tests.fuzz.oracle`).

Mutations (:mod:`tests.fuzz.mutations`) at the byte, zip-structure and JSON-value level, alone
and mixed, of every seed package (all three layouts, both dialects, symbolic shapes, a
transformer block, the bundled CNN sample). Deterministic (``derandomize``) and sized to run in
well under a minute in the default test run; the atheris harness (``atheris_pt2.py``) goes
further by hand. A failure prints the mutated package's members and where the failing package
was saved (``$TMPDIR/pt2fuzz-failure-<test>.pt2``); copy it into ``crashers/`` with the fix (see
``test_crashers.py``).
"""
from __future__ import annotations

import collections
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from tests.fuzz import mutations as M
from tests.fuzz.oracle import Hang, MemoryBlowup, guarded, run_pipeline


def _settings(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """Where mutated packages and their outputs go: RAM (``/dev/shm``) when there is one, since
    every example writes a package and a model's files and removes them again."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(prefix="pt2fuzz-", dir=shm) as d:
            yield Path(d)
    else:
        yield tmp_path_factory.mktemp("fuzz")


def check(blob: bytes, scratch: Path) -> str:
    """Run the pipeline on ``blob`` under the limits; limits broken become test failures."""
    folder = Path(tempfile.mkdtemp(dir=scratch))
    path = folder / "fuzzed.pt2"
    path.write_bytes(blob)
    out = folder / "out"
    out.mkdir()
    try:
        with guarded():
            return run_pipeline(path, out)
    except (Hang, MemoryBlowup) as e:
        raise AssertionError(f"{type(e).__name__}: {e}") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def fuzz(blob: bytes, scratch: Path) -> None:
    note(f"members: {M.members_of(blob)}")
    try:
        check(blob, scratch)
    except BaseException:
        # one file per test, overwritten while hypothesis shrinks: it ends as the minimal example
        test = os.environ.get("PYTEST_CURRENT_TEST", "fuzz").split("::")[-1].split(" ")[0]
        kept = Path(tempfile.gettempdir()) / f"pt2fuzz-failure-{test}.pt2"
        kept.write_bytes(blob)
        note(f"the failing package is kept in {kept}")
        raise


seeds = st.sampled_from(sorted(M.SEEDS))


@pytest.mark.slow
@_settings(60)
@given(seed=seeds, data=st.data())
def test_byte_mutations(seed, data, scratch):
    fuzz(M.mutate(M.HypothesisChooser(data), seed, levels=("bytes",)), scratch)


@pytest.mark.slow
@_settings(80)
@given(seed=seeds, data=st.data())
def test_zip_structure_mutations(seed, data, scratch):
    fuzz(M.mutate(M.HypothesisChooser(data), seed, levels=("zip",)), scratch)


@pytest.mark.slow
@_settings(220)
@given(seed=seeds, data=st.data())
def test_json_value_mutations(seed, data, scratch):
    fuzz(M.mutate(M.HypothesisChooser(data), seed, levels=("json",), max_steps=4), scratch)


@pytest.mark.slow
@_settings(80)
@given(seed=seeds, data=st.data())
def test_mixed_mutations(seed, data, scratch):
    fuzz(M.mutate(M.HypothesisChooser(data), seed), scratch)


class _RandomChooser:
    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def raw(self, max_size: int) -> bytes:
        return self.r.randbytes(self.r.randint(0, max_size))


def test_json_mutations_reach_the_converter(scratch):
    """The fuzz is only worth its time if mutated packages get past the reader: at least a
    quarter of single JSON mutations must reach the converter (a file the reader refuses
    ends in ``refused: PT2FormatError``)."""
    outcomes = collections.Counter()
    for i in range(40):
        ch = _RandomChooser(i)
        outcome = check(M.mutate(ch, M.pick(ch, sorted(M.SEEDS)), levels=("json",), max_steps=1), scratch)
        outcomes["read" if not outcome.startswith("refused: PT2FormatError") else "refused"] += 1
    assert outcomes["read"] >= 10, outcomes
