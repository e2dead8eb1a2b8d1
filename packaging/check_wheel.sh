#!/usr/bin/env bash
# Build the wheel and the sdist of pt2ncnn, install the wheel into a clean virtualenv and run
# both entry points from it — catches package data missing from the wheel (the ATen schema
# table, the ncnn layer table, the sample models, icons, the style sheet).
#
#   bash packaging/check_wheel.sh            # builds from the committed tree (git HEAD)
#   CHECK_WORKTREE=1 bash packaging/check_wheel.sh   # builds from the working tree as it is
#   KEEP_DIST=DIR bash packaging/check_wheel.sh      # also copies the wheel and sdist to DIR
#
# The virtualenv has no system site-packages; its dependencies (PySide6-Essentials, numpy,
# networkx, pyqtgraph) come from the package index — never torch, which the wheel must not need.
# Needs: python3 (>= 3.10) with venv, git (unless CHECK_WORKTREE), network access to the index.
# Exits non-zero with a message on the first failed step.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pt2ncnn-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1
step() { echo "== $*"; }
fail() { echo "check_wheel: $*" >&2; exit 1; }

step "source"
mkdir -p "$WORK/src" "$WORK/dist" "$WORK/run"
if [ -z "${CHECK_WORKTREE:-}" ] && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
  # the committed tree only: a file that is present here but not committed cannot hide a gap
  git -C "$ROOT" archive --format=tar HEAD | tar -x -C "$WORK/src"
  echo "git HEAD $(git -C "$ROOT" rev-parse --short HEAD)"
else
  (cd "$ROOT" && tar --exclude=.git --exclude=.venv --exclude=build --exclude='*.egg-info' \
     --exclude=__pycache__ -cf - .) | tar -x -C "$WORK/src"
  echo "working tree $ROOT"
fi

step "build wheel and sdist"
if "$PY" -c "import build" 2>/dev/null; then
  BUILD_PY=$PY
else
  "$PY" -m venv "$WORK/buildenv"
  "$WORK/buildenv/bin/pip" install -q build
  BUILD_PY=$WORK/buildenv/bin/python
fi
"$BUILD_PY" -m build --outdir "$WORK/dist" "$WORK/src" >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log" >&2; fail "python -m build failed"; }
WHEEL=$(ls "$WORK"/dist/*.whl)
SDIST=$(ls "$WORK"/dist/*.tar.gz)
ls -l "$WHEEL" "$SDIST"

step "wheel contents"
"$PY" - "$WHEEL" "$SDIST" <<'EOF'
import sys, tarfile, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["engine/data/aten_schemas.jsonl.gz", "engine/ncnn/layer_table.py", "engine/cli/main.py",
        "gui/app.py", "resources/samples/tiny_cnn.pt2", "resources/samples/tiny_transformer.pt2",
        "resources/icons/pt2ncnn-studio.svg", "resources/icons/pt2ncnn-studio-256.png",
        "resources/styles/studio.qss", "resources/pt2ncnn-studio.desktop"]
missing = [n for n in need if n not in names]
stray = sorted(n for n in names if n.startswith(("tests/", "packaging/")) or "__pycache__" in n)
sdist = {n.split("/", 1)[1] for n in tarfile.open(sys.argv[2]).getnames() if "/" in n}
missing_sdist = [n for n in need if n not in sdist]
if missing or stray or missing_sdist:
    sys.exit(f"missing from the wheel: {missing}; in the wheel but should not be: {stray}; "
             f"missing from the sdist: {missing_sdist}")
print(f"{len(names)} files, all package data present")
EOF

step "clean virtualenv"
"$PY" -m venv "$WORK/venv"
VPY=$WORK/venv/bin/python
"$VPY" -c "import sys; assert sys.prefix != sys.base_prefix; import site; print('site-packages:', site.getsitepackages()[0])"
"$WORK/venv/bin/pip" install -q "$WHEEL" || fail "pip install of the wheel failed"
if "$VPY" -c "import torch" 2>/dev/null; then fail "torch got installed: the wheel must not depend on it"; fi
"$WORK/venv/bin/pip" list --format=freeze | grep -iE '^(pt2ncnn|pyside6|numpy|networkx|pyqtgraph)' || true

cd "$WORK/run"  # away from the source tree: everything must come from the virtualenv
SAMPLE=$("$VPY" -c "import pathlib, resources; print(pathlib.Path(resources.__file__).parent / 'samples' / 'tiny_cnn.pt2')")
case "$SAMPLE" in "$WORK/venv/"*) ;; *) fail "the sample resolved outside the virtualenv: $SAMPLE" ;; esac

step "pt2ncnn inspect (bundled sample)"
"$WORK/venv/bin/pt2ncnn" inspect "$SAMPLE" | tee "$WORK/inspect.txt"
grep -q "aten.conv2d" "$WORK/inspect.txt" || fail "inspect printed no operator histogram"

step "pt2ncnn convert (bundled sample)"
"$WORK/venv/bin/pt2ncnn" convert "$SAMPLE" -o "$WORK/run"
for f in tiny_cnn.ncnn.param tiny_cnn.ncnn.bin tiny_cnn.pnnx.param tiny_cnn.pnnx.bin; do
  [ -s "$WORK/run/$f" ] || fail "convert did not write $f"
done

step "pt2ncnn-studio --screenshot (offscreen)"
QT_QPA_PLATFORM=offscreen "$WORK/venv/bin/pt2ncnn-studio" --screenshot "$WORK/run/studio.png"
"$VPY" - "$WORK/run/studio.png" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (1600, 1000) and len(data) > 20_000, (w, h, len(data))
print(f"screenshot {w}x{h}, {len(data)} bytes")
EOF

if [ -n "${KEEP_DIST:-}" ]; then
  mkdir -p "$KEEP_DIST" && cp "$WHEEL" "$SDIST" "$KEEP_DIST"/ && echo "kept $(basename "$WHEEL") $(basename "$SDIST") in $KEEP_DIST"
fi
echo "check_wheel: OK ($(du -k "$WHEEL" | cut -f1) KiB wheel)"
