"""Every malformed package raises one ``PT2FormatError`` naming the place and the reason.

The corpus (``tests/fixtures/malformed.py``) is generated into a tmp dir from the committed
fixtures: broken containers, JSON, references, payload geometry, versions, decompression bombs
and ZIP64 lies. For each case the reader, reading *everything* through the public API, must
raise ``engine.PT2FormatError`` (nothing else) within seconds, with a one-line message that
names the member / node and contains the expected reason; ``pt2ncnn inspect`` must exit 2 with
one ``error: <file>: <reason>`` line on stderr and no traceback. Heavy cases are re-run in a
fresh interpreter to bound time and peak memory. (Hostile pickles: ``test_security.py``.)
"""
from __future__ import annotations

import time

import pytest

import engine
from tests.fixtures.malformed import CASES, Case, touch_everything
from tests.fixtures.runner import run_cli, run_measured

FORMAT_CASES = [c for c in CASES if not c.marker]
HEAVY_CASES = [c for c in FORMAT_CASES if c.heavy]
SECONDS = 5.0
#: peak RSS a heavy case may add over the same interpreter that only opened a valid file
EXTRA_RSS_MB = 150


def check_message(case: Case, message: str) -> None:
    assert message and "\n" not in message.strip(), f"not one line: {message!r}"
    low = message.lower()
    assert any(n.lower() in low for n in case.needles), (
        f"{case.id}: message does not say why (wanted one of {case.needles}): {message}"
    )
    if case.member:
        assert case.member in message, f"{case.id}: message does not name {case.member!r}: {message}"


@pytest.mark.parametrize("case", FORMAT_CASES, ids=[c.id for c in FORMAT_CASES])
def test_reader_raises_typed_error(case: Case, tmp_path):
    path = case.write(tmp_path)
    t0 = time.perf_counter()
    with pytest.raises(engine.PT2FormatError) as info:
        touch_everything(path)
    elapsed = time.perf_counter() - t0
    err = info.value
    assert str(err) == f"{err.member}: {err.reason}"
    check_message(case, str(err))
    assert elapsed < SECONDS, f"{case.id} took {elapsed:.1f} s"


@pytest.mark.parametrize("case", FORMAT_CASES, ids=[c.id for c in FORMAT_CASES])
def test_cli_exits_2_with_one_line(case: Case, tmp_path):
    path = case.write(tmp_path)
    r = run_cli("inspect", str(path))
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    allowed = (2,) if case.cli_exit == 2 else (0, 2)
    assert r.returncode in allowed, f"exit {r.returncode}; stderr: {r.stderr}"
    if r.returncode == 2:
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert lines[0].startswith("error: ") and path.name in lines[0], lines[0]
    assert r.seconds < SECONDS + 3


@pytest.fixture(scope="module")
def baseline_rss_kb():
    """Peak RSS of an interpreter that imports the engine and opens a valid fixture."""
    from tests.fixtures.malformed import TINY

    result = run_measured(
        "import engine\nfrom tests.fixtures.malformed import touch_everything",
        f"touch_everything({str(TINY)!r})",
    )
    assert result["error"] is None, result["error"]
    return result["maxrss_kb"]


@pytest.mark.parametrize("case", HEAVY_CASES, ids=[c.id for c in HEAVY_CASES])
def test_heavy_case_bounded_time_and_memory(case: Case, tmp_path, baseline_rss_kb):
    path = case.write(tmp_path)
    result = run_measured(
        "import engine\nfrom tests.fixtures.malformed import touch_everything",
        f"touch_everything({str(path)!r})",
    )
    assert result["error"] and result["error"].startswith("PT2FormatError"), result["error"]
    extra_mb = (result["maxrss_kb"] - baseline_rss_kb) / 1024
    assert extra_mb < EXTRA_RSS_MB, f"{case.id}: {extra_mb:.0f} MB above baseline"
    assert result["seconds"] < SECONDS, f"{case.id}: {result['seconds']:.1f} s"
