"""A package of two programs (an LLM's prefill and decode, exported at test time) in Studio:
Model ▸ Program in File lists both; picking one opens, converts and verifies that program."""
from __future__ import annotations

import pytest

from tests.gui.conftest import open_model

torch = pytest.importorskip("torch")
pytest.importorskip("ncnn")

from engine.llm import export_decoder  # noqa: E402
from tests.engine.llm.decoder import TinyDecoder  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.ncnn]


@pytest.fixture(scope="module")
def decoder_pt2(tmp_path_factory):
    torch.manual_seed(0)
    return export_decoder(TinyDecoder().eval(), tmp_path_factory.mktemp("programs") / "tiny.pt2", max_length=64)


def _program_menu(window):
    model_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Model")
    return next(a.menu() for a in model_menu.actions() if a.menu() is not None and "Program" in a.text())


def test_each_program_of_a_package_opens_converts_and_verifies(window, decoder_pt2):
    open_model(window, decoder_pt2)
    menu = _program_menu(window)
    for name in ("decode", "prefill"):
        menu.aboutToShow.emit()
        listed = {a.text(): a for a in menu.actions()}
        assert set(listed) == {"prefill", "decode"}
        listed[name].trigger()
        assert window.wait_settled(120_000), "the window did not settle"
        assert window.doc.model_name == name
        conversion = window.doc.conversion
        assert conversion is not None and conversion.result.ok, window.reporter.history
        verify = next(a for a in window.actions.toolbar.actions() if a.objectName() == "verifyAction")
        verify.trigger()
        assert window.wait_settled(120_000), "verification did not finish"
        run = window.verifier.run
        assert run is not None and run.result.ok and run.result.first_divergent is None, window.reporter.history
