"""Regenerate the README's screenshots of the main states with ``pt2ncnn-studio --screenshot``::

    python -m gui.screenshots OUTDIR

Each picture is one run of the application (in its own process, offscreen) on a bundled sample.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CNN = str(ROOT / "resources" / "samples" / "tiny_cnn.pt2")
TRANSFORMER = str(ROOT / "resources" / "samples" / "tiny_transformer.pt2")

#: file name → arguments after ``--screenshot FILE``
SHOTS: dict[str, list[str]] = {
    "studio-main.png": [CNN, "--select", "batch_norm_1"],
    "studio-ncnn.png": [CNN, "--right", "ncnn", "--select", "conv2d_1"],
    "studio-passes.png": [CNN, "--pass", "7", "--panel", "passes"],
    "studio-problems.png": [TRANSFORMER, "--panel", "problems", "--hide-params"],
    "studio-weights.png": [CNN, "--tensor", "blocks.1.expand.0.weight", "--panel", "tensors"],
    "studio-search.png": [TRANSFORMER, "--search", "module:attn", "--hide-params"],
    "studio-dark.png": [CNN, "--theme", "dark", "--select", "hardswish", "--right", "ncnn"],
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    failed = 0
    for name, extra in SHOTS.items():
        cmd = [sys.executable, "-m", "gui.app", "--screenshot", str(out / name), *extra]
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        status = "ok" if r.returncode == 0 else f"failed ({r.returncode}): {r.stderr.strip().splitlines()[-1:]}"
        print(f"{name}: {status}")
        failed += r.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
