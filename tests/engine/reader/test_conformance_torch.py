"""Conformance of the reader with a live ``torch.export.load`` (needs torch 2.13).

For every committed fixture and model, torch loads the file in this process and the reader's
view must equal it bit for bit (``tests/fixtures/describe.py``). Older-schema fixtures, which
torch 2.13 refuses, are compared with torch's load of the same program re-exported and saved
at 8.20. A second test checks the committed manifest is still what torch reports, so the
torch-free conformance tests cannot drift from torch.
"""
from __future__ import annotations

import json
import logging
import warnings

import pytest

torch = pytest.importorskip("torch")

import engine  # noqa: E402
from tests.fixtures import MANIFEST, PT2_DIR  # noqa: E402
from tests.fixtures import models as _models  # noqa: E402,F401  (registers the namedtuple)
from tests.fixtures.describe import (  # noqa: E402
    describe_reader_program,
    describe_torch_program,
    diff_programs,
)
from tests.fixtures.make_fixtures import FIXTURES as SPECS  # noqa: E402
from tests.fixtures.make_fixtures import exported, load_with_torch  # noqa: E402
from tests.fixtures.runner import REPO  # noqa: E402

pytestmark = pytest.mark.torch

MANIFEST_DATA = json.loads(MANIFEST.read_text())["fixtures"]
SPEC_BY_NAME = {s.name: s for s in SPECS}
CASES = [(f, m) for f, e in sorted(MANIFEST_DATA.items()) for m in e["models"]]
IDS = [f"{f}:{m}" for f, m in CASES]


@pytest.fixture(scope="module")
def torch_programs(tmp_path_factory):
    """fixture name → {model: torch ExportedProgram}, loaded once per module."""
    logging.getLogger("torch").setLevel(logging.ERROR)
    cache: dict[str, dict] = {}

    def get(fixture: str) -> dict:
        if fixture not in cache:
            spec = SPEC_BY_NAME[fixture]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if spec.torch_loadable:
                    cache[fixture] = load_with_torch(PT2_DIR / spec.file)
                else:
                    path = tmp_path_factory.mktemp("orig") / f"{fixture}.pt2"
                    torch.export.save(exported(*spec.extra["source"]), str(path))
                    cache[fixture] = load_with_torch(path)
        return cache[fixture]

    return get


@pytest.mark.parametrize("fixture,model", CASES, ids=IDS)
def test_reader_matches_live_torch(torch_programs, fixture, model):
    expected = describe_torch_program(torch_programs(fixture)[model])
    with engine.load(PT2_DIR / MANIFEST_DATA[fixture]["file"]) as pkg:
        actual = describe_reader_program(pkg.models[model])
        problems = diff_programs(
            expected, actual, persistent_recorded=MANIFEST_DATA[fixture]["persistent_recorded"]
        )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("fixture,model", CASES, ids=IDS)
def test_manifest_is_what_torch_reports(torch_programs, fixture, model):
    live = describe_torch_program(torch_programs(fixture)[model])
    recorded = MANIFEST_DATA[fixture]["models"][model]
    stale = {k: (recorded.get(k), v) for k, v in live.items() if recorded.get(k) != v}
    assert not stale, f"manifest is stale; rerun tests/fixtures/make_fixtures.py: {sorted(stale)}"


def test_reader_values_equal_torch_tensors(torch_programs):
    """Spot check through numpy equality (beyond hashes) on the dtype zoo, incl. NaN bits."""
    import numpy as np

    ep_t = torch_programs("dtypes")["model"]
    with engine.load(PT2_DIR / "dtypes.pt2") as pkg:
        ep = pkg.model
        for fqn, t in ep_t.state_dict.items():
            arr = ep.tensor(fqn)
            raw_t = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
            raw_r = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
            assert np.array_equal(raw_t, raw_r), fqn
            assert arr.shape == tuple(t.shape) and ep.tensor_dtype(fqn).torch_name == str(t.dtype)[6:]


SAMPLES = sorted((REPO / "resources" / "samples").glob("*.pt2"))


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.name for p in SAMPLES])
def test_bundled_samples_match_torch(sample):
    """The sample models shipped in resources/samples read exactly as torch loads them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep_t = torch.export.load(str(sample))
    with engine.load(sample) as pkg:
        problems = diff_programs(describe_torch_program(ep_t), describe_reader_program(pkg.model))
    assert not problems, "\n".join(problems)
