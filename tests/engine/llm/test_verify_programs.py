"""Verify on each program of a decoder package: the token-id inputs, carried as int32 through
a Split and a layout Reshape to the Embed, are compared as integers and fed as integers to the
layers run alone — so no layer is reported divergent when the model is right."""
from __future__ import annotations

import json

import pytest

from engine.cli.main import main

pytest.importorskip("ncnn")


@pytest.mark.parametrize("program", ["prefill", "decode"])
def test_verify_each_program_finds_no_divergent_layer(tiny_package, program, capsys):
    rc = main(["verify", str(tiny_package), "--model-name", program, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["ok"] and report["first_divergent"] is None, report["first_divergent"]
    ids = [r for r in report["layers"] if r["type"] == "Input" and r.get("max_abs") is not None]
    assert ids, "the token-id input was not compared"
    assert all(r["max_abs"] == 0.0 for r in ids)
    embeds = [r for r in report["layers"] if r["type"] == "Embed"]
    assert embeds and all(r["status"] == "ok" for r in embeds)
