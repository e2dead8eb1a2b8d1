"""Coverage-guided fuzzing of the whole pipeline with atheris (libFuzzer for Python), by hand.

The property is the one of the default test run (:mod:`tests.fuzz.oracle`): opening,
inspecting, building, converting and writing a package ends in success or a typed
``engine.PT2Error``. Any other exception is a crash; libFuzzer's ``-timeout`` and
``-rss_limit_mb`` catch hangs and memory blow-ups.

Setup (once; atheris has wheels for CPython 3.8-3.11 on x86-64 Linux)::

    .venv/bin/pip install atheris

Run (from the repository root; stops at the first crash and writes ``crash-<sha1>``)::

    mkdir -p /tmp/pt2-corpus
    .venv/bin/python tests/fuzz/atheris_pt2.py /tmp/pt2-corpus -timeout=5 -rss_limit_mb=2048 \\
        -max_len=512 -len_control=0 -max_total_time=600

(``-len_control=0`` lets inputs grow at once: in structured mode a longer input means more
mutation steps. About 20-30 inputs a second on one core; ``-jobs=N -workers=N`` for more.)

Modes (our options come before libFuzzer's):

* default — *structured*: the fuzzer's bytes choose a seed package and a list of byte /
  zip-structure / JSON-value mutations (:mod:`tests.fuzz.mutations`); most inputs reach the
  converter. A crash file is the fuzzer's input, not a package: turn it into one with
  ``--emit crash-<sha1> out.pt2``.
* ``--raw`` — the fuzzer's bytes *are* the package; the corpus folder is seeded with the seed
  packages. Slower to get anywhere (zip CRCs), but finds reader problems structured mutation
  cannot make.
* ``--strict-passes`` — a pass that crashed on a strange graph (reported to users as a
  ``ConversionError`` naming the pass) counts as a crash too.
* ``--replay FILE...`` — run the pipeline on crash inputs (structured) or packages (``--raw``)
  without fuzzing, printing each outcome; ``--emit IN OUT.pt2`` writes the package a
  structured input stands for.

Keep what it finds: copy the package into ``tests/fuzz/crashers/`` and list it in
``tests/fuzz/test_crashers.py`` with the fix.
"""
from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import atheris  # noqa: E402


def _import_engine() -> None:
    """Import every engine module now, inside the instrumentation block (the engine imports
    converters, passes and writers lazily; modules imported later would not be instrumented)."""
    import importlib
    import pkgutil

    import engine

    for mod in pkgutil.walk_packages(engine.__path__, "engine."):
        if not mod.name.startswith(("engine.verify", "engine.ncnn.gen_")):  # torch / generator scripts
            importlib.import_module(mod.name)


with atheris.instrument_imports(include=["engine"]):
    _import_engine()

from tests.fuzz import mutations as M  # noqa: E402
from tests.fuzz.oracle import run_pipeline  # noqa: E402

SEED_NAMES = sorted(M.SEEDS)
SCRATCH = Path(tempfile.mkdtemp(prefix="pt2-atheris-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
OPTIONS = {"raw": False, "strict": False}


class FdpChooser:
    """A :class:`tests.fuzz.mutations.Chooser` over an ``atheris.FuzzedDataProvider``."""

    def __init__(self, fdp: atheris.FuzzedDataProvider):
        self.fdp = fdp

    def integer(self, lo: int, hi: int) -> int:
        span = hi - lo
        if span < 2**63:
            return lo + self.fdp.ConsumeIntInRange(0, span)
        return lo + self.fdp.ConsumeUInt((span.bit_length() + 7) // 8) % (span + 1)

    def raw(self, max_size: int) -> bytes:
        return self.fdp.ConsumeBytes(self.fdp.ConsumeIntInRange(0, max_size))


def package_of(data: bytes) -> bytes:
    """The package a fuzzer input stands for."""
    if OPTIONS["raw"]:
        return data
    ch = FdpChooser(atheris.FuzzedDataProvider(data))
    return M.mutate(ch, M.pick(ch, SEED_NAMES), max_steps=4)


def one_input(data: bytes) -> str:
    blob = package_of(data)
    path = SCRATCH / "input.pt2"
    path.write_bytes(blob)
    out = SCRATCH / "out"
    out.mkdir(exist_ok=True)
    for f in out.iterdir():
        f.unlink()
    return run_pipeline(path, out, strict_passes=OPTIONS["strict"])


def _seed_corpus(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if not any(folder.iterdir()):
        for name, path in M.SEEDS.items():
            (folder / f"seed-{name}.pt2").write_bytes(path.read_bytes())


def main(argv: list[str]) -> int:
    logging.disable(logging.CRITICAL)
    args = list(argv[1:])
    for flag, key in (("--raw", "raw"), ("--strict-passes", "strict")):
        if flag in args:
            args.remove(flag)
            OPTIONS[key] = True
    if args[:1] == ["--emit"]:
        Path(args[2]).write_bytes(package_of(Path(args[1]).read_bytes()))
        print(f"wrote {args[2]}")
        return 0
    if args[:1] == ["--replay"]:
        for name in args[1:]:
            print(f"{name}: {one_input(Path(name).read_bytes())}")
        return 0
    if OPTIONS["raw"]:
        corpus = next((a for a in args if not a.startswith("-")), None)
        if corpus:
            _seed_corpus(Path(corpus))
    atheris.Setup([argv[0], *args], one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
