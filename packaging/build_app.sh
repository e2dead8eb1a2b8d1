#!/usr/bin/env bash
# Build the one-folder desktop app with PyInstaller (packaging/pt2ncnn-studio.spec) in a scratch
# virtualenv that has the runtime dependencies and PyInstaller but not torch, then check that
# the built app starts and renders its window offscreen.
#
#   bash packaging/build_app.sh                # → dist/pt2ncnn-studio/pt2ncnn-studio
#   VENV=/tmp/pyi-venv DIST=/tmp/app bash packaging/build_app.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
VENV=${VENV:-$ROOT/build/pyinstaller-venv}
DIST=${DIST:-$ROOT/dist}
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ ! -x "$VENV/bin/pyinstaller" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q pyinstaller "PySide6-Essentials>=6.5" "numpy>=1.24" "networkx>=3.0" "pyqtgraph>=0.13.3"
fi
if "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  echo "build_app: $VENV has torch; use a virtualenv without it" >&2
  exit 1
fi
"$VENV/bin/pyinstaller" --noconfirm --log-level WARN --distpath "$DIST" --workpath "$ROOT/build/pyinstaller" \
  "$ROOT/packaging/pt2ncnn-studio.spec"
APP=$DIST/pt2ncnn-studio/pt2ncnn-studio
SHOT=$(mktemp -d)/studio.png
QT_QPA_PLATFORM=offscreen "$APP" --screenshot "$SHOT" >/dev/null 2>&1 || { echo "build_app: $APP did not start" >&2; exit 1; }
[ "$(head -c 4 "$SHOT" | od -An -c | tr -d ' ')" = "211PNG" ] || { echo "build_app: no screenshot" >&2; exit 1; }
echo "build_app: OK — $APP ($(du -sh "$DIST/pt2ncnn-studio" | cut -f1)), screenshot $SHOT"
