"""Fixtures of the verify tests: the 20+-layer CNN exported once per dialect, and its ncnn files."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from tests.engine.verify.models import deep_cnn, export  # noqa: E402


@pytest.fixture(scope="session")
def cnn_inputs():
    torch.manual_seed(1)
    return [torch.randn(1, 3, 16, 16)]


@pytest.fixture(scope="session", params=["training", "core"])
def cnn_pt2(request, tmp_path_factory, cnn_inputs):
    """The CNN saved as a .pt2 (with its sample inputs), TRAINING and core-ATen dialects."""
    d = tmp_path_factory.mktemp(f"cnn_{request.param}")
    return export(deep_cnn(), cnn_inputs, d / "cnn.pt2", request.param)


@pytest.fixture(scope="session")
def cnn_training_pt2(tmp_path_factory, cnn_inputs):
    d = tmp_path_factory.mktemp("cnn_training_only")
    return export(deep_cnn(), cnn_inputs, d / "cnn.pt2", "training")


@pytest.fixture(scope="session")
def cnn_ncnn_files(tmp_path_factory, cnn_training_pt2):
    """(param, bin) of the TRAINING-dialect CNN converted with fp32 weights."""
    from engine.convert import ConvertOptions, convert

    d = tmp_path_factory.mktemp("cnn_ncnn")
    result = convert(str(cnn_training_pt2), ConvertOptions(fp16=False))
    assert result.ok, result.errors
    param, bin_ = d / "cnn.ncnn.param", d / "cnn.ncnn.bin"
    result.write(param, bin_)
    return param, bin_
