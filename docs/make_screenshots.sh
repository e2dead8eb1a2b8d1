#!/usr/bin/env bash
# Regenerate the README's screenshots with pt2ncnn-studio --screenshot (offscreen).
#   bash docs/make_screenshots.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
export QT_QPA_PLATFORM=offscreen
S=resources/samples/tiny_cnn.pt2
shot() { "$PY" -m gui.app --screenshot "docs/images/$1.png" "${@:2}"; }
shot studio-main     "$S" --select conv2d_5 --panel inspector
shot studio-ncnn     "$S" --right ncnn --select conv2d_5 --panel problems
shot studio-passes   "$S" --pass fuse_conv_batchnorm --panel passes
shot studio-weights  "$S" --tensor blocks.1.expand.0.weight --panel tensors
shot studio-verify   "$S" --converters docs/examples/break_one_relu.py --verify --right ncnn
shot studio-groups   resources/samples/tiny_transformer.pt2 --panel signature
shot studio-dark     "$S" --theme dark --select hardswish --right ncnn --panel signature
"$PY" docs/make_plugin_screenshots.py docs/images   # the plug-in walkthrough (needs torch and ncnn)
