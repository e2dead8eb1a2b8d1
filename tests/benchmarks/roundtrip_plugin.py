"""pytest plug-in: every converter-test model also goes through the generated Python scripts.

Opt-in (a breadth check, never part of the test run)::

    PYTHONPATH=. python -m pytest -p tests.benchmarks.roundtrip_plugin tests/engine/converters -q

It wraps :func:`tests.harness.check_module`: after the harness's own check, the same conversion
goes through :func:`tests.roundtrip.check_scripts`, run on the test's own inputs (``_pnnx.py`` vs the module, its
``export_exported_program()``, ``_ncnn.py`` vs the module, and the re-exported package
converted and compared with the first ncnn model), with the tolerances of the issue (1e-5; ncnn
1e-4) or the test's own when it asks for a looser one. A failure fails the test; every check is
also recorded as one JSON line in ``$PT2NCNN_ROUNDTRIP_LOG`` (default
``/tmp/pt2ncnn_roundtrip.jsonl``), which ``check_python_export.py --tests`` tabulates.
"""
from __future__ import annotations

import functools
import inspect
import json
import os
import traceback

LOG = os.environ.get("PT2NCNN_ROUNDTRIP_LOG", "/tmp/pt2ncnn_roundtrip.jsonl")


def _record(rec: dict) -> None:
    with open(LOG, "a") as f:
        f.write(json.dumps(rec) + "\n")


def pytest_configure(config):
    import torch

    import tests.harness as harness

    original = harness.check_module
    params = inspect.signature(original)

    @functools.wraps(original)
    def check_module(*args, **kwargs):
        checked = original(*args, **kwargs)
        from tests.roundtrip import check_scripts

        bound = params.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        rec = {"test": test, "dialect": a.get("dialect"), "layers": checked.result.layer_count}
        try:
            loose = a.get("tol") or 0.0  # a test that accepts a looser conversion (dropped casts...)
            rec["tol"] = max(1e-5, loose)
            folder = a["tmp_path"] / f"scripts_{a.get('name')}_{a.get('dialect')}"
            own = list(a["inputs"])  # the test's inputs, chosen for the model, when they are plain tensors
            c = check_scripts(checked.result, a["module"], folder, tol=max(1e-5, loose), ncnn_tol=max(1e-4, loose),
                              inputs=own if all(isinstance(t, torch.Tensor) for t in own) else None)
            rec.update(status="ok", pnnx_error=c.pnnx_error, ncnn_error=c.ncnn_error,
                       roundtrip_error=c.roundtrip_error, roundtrip_layers=c.roundtrip_layers)
        except BaseException as e:  # noqa: BLE001 - recorded, then re-raised
            rec.update(status="failed", error=f"{type(e).__name__}: {str(e)[:300]}",
                       where=traceback.format_exc().strip().splitlines()[-3:])
            _record(rec)
            raise
        _record(rec)
        return checked

    harness.check_module = check_module  # before any test module imports it
