"""A weight holding NaN or infinite values is written as it is, with one warning naming the ncnn
layer, the weight, the counts and the ATen node it came from (CLI: on stderr; report: in the
diagnostics)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from engine.convert import convert
from tests.harness import export_pt2, run_ncnn

ROOT = Path(__file__).resolve().parents[3]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory):
    m = Net().eval()
    with torch.no_grad():
        m.conv.weight[0, 0, 0, 0] = float("nan")
        m.conv.weight[1, 0, 0, 0] = float("nan")
        m.fc.weight[0, 0] = float("inf")
    return export_pt2(m, [torch.randn(1, 3, 8, 8)], tmp_path_factory.mktemp("nan") / "m.pt2")


def test_nonfinite_weights_are_written_with_a_warning_each(poisoned, tmp_path):
    result = convert(str(poisoned))
    assert result.ok and not [d for d in result.diagnostics if d.severity == "warning"]
    param, bin_ = tmp_path / "m.ncnn.param", tmp_path / "m.ncnn.bin"
    result.write(param, bin_, fp16=False)
    warnings = [d for d in result.diagnostics if d.severity == "warning"]
    assert len(warnings) == 2, [str(w) for w in warnings]
    conv, fc = sorted(warnings, key=lambda d: d.reason)
    assert "2 NaN" in conv.reason and "'weight_data'" in conv.reason and "conv" in conv.node
    assert "1 infinite" in fc.reason and fc.module == "fc"
    result.write(param, bin_, fp16=False)  # writing again adds no duplicate
    assert len([d for d in result.diagnostics if d.severity == "warning"]) == 2
    # the model is what the weights say: NaN where the NaN filters are used
    (y,) = run_ncnn(param, bin_, [np.random.rand(1, 3, 8, 8).astype(np.float32)], 1)
    assert np.isnan(y).any()


def test_cli_prints_the_warnings_and_reports_them(poisoned, tmp_path):
    r = subprocess.run([sys.executable, "-m", "engine.cli.main", "convert", str(poisoned), "-o", str(tmp_path),
                        "--report", str(tmp_path / "r.json")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(lines) == 2 and any("NaN" in ln for ln in lines) and any("±65504" in ln for ln in lines), r.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert sum(d["severity"] == "warning" for d in report["diagnostics"]) == 2
