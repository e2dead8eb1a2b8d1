"""One exported package of the plain decoder per test session (exporting takes seconds)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.llm import export_decoder  # noqa: E402
from tests.engine.llm.decoder import TinyDecoder  # noqa: E402

MAX_LENGTH = 64


@pytest.fixture(scope="session")
def tiny_decoder():
    torch.manual_seed(0)
    return TinyDecoder().eval()


@pytest.fixture(scope="session")
def tiny_package(tiny_decoder, tmp_path_factory):
    return export_decoder(tiny_decoder, tmp_path_factory.mktemp("llm") / "tiny.pt2", max_length=MAX_LENGTH)
