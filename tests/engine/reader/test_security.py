"""No pickle payload in a package is ever executed.

Each hostile case (``tests/fixtures/malformed.py``, ``marker=True``) hides a pickle that calls
``os.system`` / ``posix.system`` / ``builtins.eval`` / ``builtins.exec`` / ``subprocess.Popen``
(via GLOBAL, STACK_GLOBAL and INST) to create ``<tmp>/PWNED`` — in a torch 2.8 weights dict,
legacy state-dict and constants pickles, sample inputs, a tensor-subclass weight, and
TorchScript / opaque object constants. The reader must refuse the global by name (or report
the payload present-but-unreadable while the rest of the model opens), the CLI must exit
cleanly, and the marker must not exist afterwards — in this process or in the CLI's.
``test_torch_executes_the_same_payload`` shows the payloads are live: torch's own loader runs
them.
"""
from __future__ import annotations

import json
import textwrap

import pytest

import engine
from tests.fixtures import MANIFEST
from tests.fixtures import picklecraft as pc
from tests.fixtures import zipcraft as zc
from tests.fixtures.describe import array_sha
from tests.fixtures.malformed import (
    CASES,
    CASES_BY_ID,
    MARKER_NAME,
    ROOT,
    Case,
    layout_2_8_from_tiny,
    tiny_tensor_specs,
    touch_everything,
)
from tests.fixtures.runner import run_cli, run_measured

HOSTILE = [c for c in CASES if c.marker]
TINY_TENSORS = json.loads(MANIFEST.read_text())["fixtures"]["tiny"]["models"]["model"]["tensors"]


def _refused(case: Case, message: str) -> None:
    assert any(n in message for n in case.needles), f"{case.id}: {message}"
    assert case.member in message, f"{case.id}: {message}"
    assert "\n" not in message


def _check_other_tensors(ep, skip: str) -> None:
    for fqn, want in TINY_TENSORS.items():
        if fqn != skip:
            assert array_sha(ep.tensor(fqn)) == want["sha256"], fqn


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_hostile_pickle_never_runs(case: Case, tmp_path):
    path = case.write(tmp_path)
    marker = tmp_path / MARKER_NAME
    try:
        if case.id.startswith("pickle_sample_inputs"):
            with engine.load(path) as pkg:
                _check_other_tensors(pkg.model, skip="")
                with pytest.raises(engine.PT2FormatError) as info:
                    pkg.model.sample_inputs()
                _refused(case, str(info.value))
        elif case.id == "pickle_tensor_subclass_weight":
            with engine.load(path) as pkg:
                ep = pkg.model
                entry = next(e for e in ep.tensors.entries() if e.fqn == "fc1.weight")
                assert not entry.readable and "subclass" in entry.reason, entry.reason
                with pytest.raises(engine.PT2FormatError) as info:
                    ep.tensor("fc1.weight")
                _refused(case, str(info.value))
                _check_other_tensors(ep, skip="fc1.weight")
                assert len(ep.graph.nodes) == 3
        elif case.id.endswith("_object_constant"):
            with engine.load(path) as pkg:
                ep = pkg.model
                _check_other_tensors(ep, skip="")
                objects = {e.fqn: e for e in ep.tensors.objects()}
                assert "hostile_obj" in objects and not objects["hostile_obj"].readable
                assert objects["hostile_obj"].reason
                with pytest.raises(engine.PT2FormatError) as info:
                    ep.tensor("hostile_obj")
                _refused(case, str(info.value))
        else:
            with pytest.raises(engine.PT2FormatError) as info:
                touch_everything(path)
            _refused(case, str(info.value))
    finally:
        assert not marker.exists(), f"{case.id}: the hostile pickle ran"


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_cli_never_runs_hostile_pickle(case: Case, tmp_path):
    path = case.write(tmp_path)
    r = run_cli("inspect", str(path), "--json")
    assert not (tmp_path / MARKER_NAME).exists(), f"{case.id}: the hostile pickle ran in the CLI"
    assert "Traceback" not in r.stderr + r.stdout
    assert r.returncode in ((2,) if case.cli_exit == 2 else (0, 2)), r.stderr
    if r.returncode == 2:
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


#: Globals a torch.save payload may try that the allow-list must refuse (not just the obvious).
OTHER_GLOBALS = [
    ("torch.storage", "_load_from_bytes"),  # re-enters torch.load
    ("torch", "load"),
    ("torch._utils", "_rebuild_qtensor"),
    ("torch._tensor", "_rebuild_from_type_v2"),  # tensor subclasses: arbitrary class
    ("numpy.core.multiarray", "_reconstruct"),
    ("builtins", "getattr"),
    ("builtins", "__import__"),
    ("__builtin__", "eval"),
    ("collections", "namedtuple"),
    ("io", "open"),
    ("shutil", "rmtree"),
    ("pickle", "loads"),
]


@pytest.mark.parametrize("module,name", OTHER_GLOBALS, ids=[f"{m}.{n}" for m, n in OTHER_GLOBALS])
def test_unlisted_globals_are_refused_by_name(module, name, tmp_path):
    specs, storages = tiny_tensor_specs()
    w = pc.PickleWriter().empty_dict().mark()
    for fqn, t in specs.items():
        w.str(fqn)
        pc.write_tensor(w, t)
    w.str("payload").glob(module, name).mark().str("x").tuple().reduce()
    weights = pc.torch_save_zip(w.setitems().stop(), storages, "model")
    ms = zc.read_members_bytes(layout_2_8_from_tiny(None, ""))
    ms = [m.with_(data=weights) if m.name == ROOT + "data/weights/model.pt" else m for m in ms]
    path = zc.write(tmp_path / "unlisted.pt2", ms)
    with pytest.raises(engine.PT2FormatError) as info:
        touch_everything(path)
    assert f"{module}.{name}" in str(info.value), str(info.value)


def test_crafted_2_8_is_valid(tmp_path):
    """The torch-free 2.8 package the hostile cases start from opens and matches torch."""
    path = tmp_path / "crafted.pt2"
    path.write_bytes(layout_2_8_from_tiny(None, ""))
    with engine.load(path) as pkg:
        assert pkg.layout == "pt2-2.8"
        _check_other_tensors(pkg.model, skip="")


def test_torch_executes_the_same_payload(tmp_path):
    """Proof the hostile sample inputs are live: ``torch.export.load`` (which falls back to
    ``weights_only=False`` for sample inputs) creates the marker; our reader did not."""
    pytest.importorskip("torch")
    case = CASES_BY_ID["pickle_sample_inputs_builtins_eval"]
    path = case.write(tmp_path)
    body = textwrap.dedent(f"""
        import logging, warnings
        logging.disable(logging.CRITICAL)
        warnings.simplefilter("ignore")
        torch.export.load({str(path)!r})
    """)
    run_measured("import torch", body)
    assert (tmp_path / MARKER_NAME).exists(), "torch did not run the payload: the test is vacuous"
