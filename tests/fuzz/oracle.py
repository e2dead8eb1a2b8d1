"""The fuzzing property, checked on one package: open → inspect → build_graph → convert → write.

:func:`run_pipeline` runs a package through everything a user can do with it from the CLI or
the Studio — open it, print the ``inspect`` summary (text and JSON), build the ATen graph of
every model, convert it with pass snapshots and the report, write the (partial) ncnn and pnnx
files — and returns the outcome (``"converted"``, ``"incomplete"``, ``"refused: <Error>"``).
Allowed failures are the engine's typed errors (:class:`engine.PT2Error`), whose message is
one non-empty line. Anything else propagates.

:func:`guarded` adds the resource limits: a :class:`Hang` is raised in the main thread after
``seconds`` (a SIGALRM timer), and :class:`MemoryBlowup` when the peak RSS grew by more than
``max_bytes`` (peak reset through ``/proc/self/clear_refs`` before the run); the address space
is capped a little above that while the run lasts, so a runaway allocation fails with
``MemoryError`` instead of taking the machine down. Both are ``BaseException`` s so that no
``except Exception`` in the engine (a converter's crash guard) can swallow them.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
from pathlib import Path

import engine
from engine.build import build_graph
from engine.cli.inspect_cmd import render_text
from engine.convert import ConvertOptions, convert
from engine.errors import ConversionError, PT2Error
from engine.reader.summary import summarize

SECONDS = 5.0
MAX_BYTES = 1 << 30


class Hang(BaseException):
    """The pipeline ran longer than allowed."""


class MemoryBlowup(BaseException):
    """The pipeline's peak RSS grew more than allowed."""


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


@contextlib.contextmanager
def _alarm(seconds: float):
    if not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum, frame):
        raise Hang(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _address_space_cap(extra: int):
    try:
        import resource
        vm = _status_kib("VmSize") * 1024
    except (ImportError, OSError, KeyError):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def guarded(seconds: float = SECONDS, max_bytes: int = MAX_BYTES):
    """Run the block under the time and memory limits (see the module docstring)."""
    can_measure = os.path.exists("/proc/self/status") and _reset_peak_rss()
    before = _status_kib("VmRSS") * 1024 if can_measure else 0
    t0 = time.perf_counter()
    with _alarm(seconds), _address_space_cap(2 * max_bytes):
        yield
    elapsed = time.perf_counter() - t0
    if elapsed > seconds:
        raise Hang(f"took {elapsed:.1f} s")
    if can_measure:
        grown = _status_kib("VmHWM") * 1024 - before
        if grown > max_bytes:
            raise MemoryBlowup(f"peak RSS grew by {grown / 2**20:.0f} MiB")


def check_typed(e: PT2Error) -> None:
    text = str(e)
    assert text.strip(), f"{type(e).__name__} with an empty message"


def _write(result, out_dir: Path) -> None:
    before = set(os.listdir(out_dir))
    try:
        result.write_all(out_dir, "fuzzed", partial=not result.ok)
    except PT2Error:
        left = set(os.listdir(out_dir)) - before
        assert not any(n.endswith((".tmp", ".bak")) for n in left), f"temporary files left behind: {left}"
        raise


def run_pipeline(path: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
                 strict_passes: bool = False) -> str:
    """Run ``path`` through the whole pipeline; return the outcome. Typed errors are the
    outcome ``refused: <type>: <message>``; with ``strict_passes`` a pass that crashed with
    an untyped exception (a ``ConversionError`` wrapping it) is re-raised as that exception."""
    with contextlib.ExitStack() as stack:
        if out_dir is None:
            out_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="pt2fuzz-"))
        out = Path(out_dir)
        try:
            outcome = "converted"
            with engine.load(path) as pkg:
                for name in pkg.model_names:
                    info = summarize(pkg, name)
                    render_text(info)
                    json.dumps(info)
                    ep = pkg.models[name]
                    build_graph(ep)
                    result = convert(ep, ConvertOptions(snapshots=True))
                    json.dumps(result.report())
                    if not result.ok:
                        outcome = "incomplete"
                    _write(result, out)
            return outcome
        except ConversionError as e:
            check_typed(e)
            cause = e.__cause__
            inner = getattr(cause, "cause", None)
            if strict_passes and inner is not None and not isinstance(inner, PT2Error):
                raise inner
            return f"refused: {type(e).__name__}: {e}"
        except PT2Error as e:
            check_typed(e)
            return f"refused: {type(e).__name__}: {e}"
