"""``pt2ncnn verify`` runs the model in PyTorch, whose ``torch.export.load`` unpickles weights,
constants, custom / opaque objects and sample inputs without restrictions. Verification must
therefore never hand it a package whose pickles this reader has not accepted: for every hostile
case of the malformed corpus (a pickle that would create ``<tmp>/PWNED``), verify exits 2 with
one line naming the member, and the marker does not exist afterwards.

Found while hardening: before :func:`engine.verify.torch_run.vet_for_torch`, hostile sample
inputs and opaque-object constants ran their payload under ``pt2ncnn verify``.
"""
from __future__ import annotations

import pytest

from engine.cli.main import main
from tests.fixtures.malformed import CASES, MARKER_NAME, Case

pytest.importorskip("torch")
pytest.importorskip("ncnn")

HOSTILE = [c for c in CASES if c.marker]


@pytest.mark.torch
@pytest.mark.ncnn
@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_verify_never_hands_a_hostile_package_to_torch(case: Case, tmp_path, capsys):
    path = case.write(tmp_path)
    rc = main(["verify", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert not (tmp_path / MARKER_NAME).exists(), f"{case.id}: the payload ran"
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert any(n.lower() in err[0].lower() for n in case.needles) or "not run in PyTorch" in err[0], err
