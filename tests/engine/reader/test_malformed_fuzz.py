"""Bounded fuzzing of the reader: mutated copies of a valid package either read fully or raise
``engine.PT2FormatError`` — never any other exception, never a hang.

Mutations of the committed ``tiny.pt2`` (pt2 layout) and ``legacy_8_20.pt2``: random byte
flips, truncation, and replacing a random value anywhere in the program JSON or the weights
config with a random JSON value. Deterministic (``derandomize``) and small (a few hundred
examples in total), so it runs in seconds in the default test run.
"""
from __future__ import annotations

import json
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from tests.fixtures.malformed import (
    LEGACY,
    MODEL_JSON,
    TINY,
    WEIGHTS_CONFIG,
    corrupt_json_value,
    touch_everything,
)

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SECONDS = 5.0
SOURCES = {"tiny": TINY.read_bytes(), "legacy": LEGACY.read_bytes()}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
    | st.sampled_from([{"as_int": -1}, {"as_none": True}, {"as_tensor": {"name": "nope"}},
                       {"as_expr": {"expr_str": "s0", "hint": None}}, "Infinity", "NaN"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=4,
)


def _read_or_refuse(blob: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzzed.pt2"
        path.write_bytes(blob)
        t0 = time.perf_counter()
        try:
            touch_everything(path)
        except engine.PT2FormatError as e:
            assert str(e) and str(e) == f"{e.member}: {e.reason}"
        assert time.perf_counter() - t0 < SECONDS


@FUZZ
@given(source=st.sampled_from(sorted(SOURCES)), data=st.data())
def test_byte_flips(source, data):
    blob = bytearray(SOURCES[source])
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(blob) - 1), st.integers(1, 255)),
                               min_size=1, max_size=8))
    for pos, mask in flips:
        blob[pos] ^= mask
    _read_or_refuse(bytes(blob))


@FUZZ
@given(source=st.sampled_from(sorted(SOURCES)), data=st.data())
def test_truncation(source, data):
    blob = SOURCES[source]
    _read_or_refuse(blob[: data.draw(st.integers(0, len(blob) - 1))])


def _draw_path(data, doc) -> list:
    """A random path to an existing value inside ``doc`` (at least one step deep)."""
    path, cur = [], doc
    while True:
        if isinstance(cur, dict) and cur:
            key = data.draw(st.sampled_from(sorted(cur)))
        elif isinstance(cur, list) and cur:
            key = data.draw(st.integers(0, len(cur) - 1))
        else:
            return path
        path.append(key)
        cur = cur[key]
        if data.draw(st.integers(0, 4)) == 0:
            return path


@pytest.mark.parametrize("member", [MODEL_JSON, WEIGHTS_CONFIG], ids=["program", "weights_config"])
def test_json_value_mutations(member):
    blob = SOURCES["tiny"]
    with zipfile.ZipFile(TINY) as zf:
        doc = json.loads(zf.read(member))

    @FUZZ
    @given(data=st.data(), value=json_values)
    def run(data, value):
        path = _draw_path(data, doc)
        if path:
            _read_or_refuse(corrupt_json_value(blob, member, path, value))

    run()
