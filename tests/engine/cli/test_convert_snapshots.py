"""``pt2ncnn convert`` keeps pass snapshots only when something shows them (``--report``,
``--dump-passes``): the files written are the same either way, and the report's per-pass
diff counts are real."""
import json
import shutil
from pathlib import Path

from engine.cli.main import main

SAMPLE = Path(__file__).resolve().parents[3] / "resources" / "samples" / "tiny_cnn.pt2"


def test_files_identical_with_and_without_snapshots(tmp_path):
    plain, reported = tmp_path / "plain", tmp_path / "reported"
    for d in (plain, reported):
        d.mkdir()
        shutil.copy(SAMPLE, d / "m.pt2")
    assert main(["convert", str(plain / "m.pt2"), "-q"]) == 0
    assert main(["convert", str(reported / "m.pt2"), "-q", "--report", str(reported / "r.json")]) == 0
    for suffix in (".ncnn.param", ".ncnn.bin", ".pnnx.param", ".pnnx.bin"):
        assert (plain / f"m{suffix}").read_bytes() == (reported / f"m{suffix}").read_bytes(), suffix
    passes = {p["name"]: p for p in json.loads((reported / "r.json").read_text())["passes"]}
    assert passes["lower_aten_to_pnnx"]["changed"] > 0  # every ATen op retyped, names kept
    assert passes["insert_split"]["added"] > 0
