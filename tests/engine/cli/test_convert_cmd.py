"""``pt2ncnn convert`` / shorthand / ``coverage``: files, exit codes, reports, pass dumps."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "resources" / "samples" / "tiny_cnn.pt2"


@pytest.fixture
def sample(tmp_path) -> Path:
    dst = tmp_path / "tiny_cnn.pt2"
    shutil.copy(SAMPLE, dst)
    return dst


def test_convert_writes_four_files_report_and_pass_dumps(sample, tmp_path, capsys):
    report = tmp_path / "r.json"
    rc = main(["convert", str(sample), "--dump-passes", str(tmp_path / "passes"), "--report", str(report)])
    out = capsys.readouterr().out
    assert rc == 0, out
    for suffix in (".ncnn.param", ".ncnn.bin", ".pnnx.param", ".pnnx.bin"):
        assert (tmp_path / f"tiny_cnn{suffix}").stat().st_size > 0
    data = json.loads(report.read_text())
    param_layers = int((tmp_path / "tiny_cnn.ncnn.param").read_text().splitlines()[1].split()[0])
    assert data["layers"] == param_layers
    assert data["diagnostics"] == []
    names = [p["name"] for p in data["passes"]]
    assert "lower_aten_to_pnnx" in names and "insert_split" in names
    assert all({"added", "removed", "changed", "seconds"} <= set(p) for p in data["passes"])
    assert data["seconds"] > 0
    dumps = sorted(p.name for p in (tmp_path / "passes").iterdir())
    assert dumps[0] == "00_build_graph.diff" and len(dumps) == 2 * (len(names) + 1)
    assert f"{param_layers} ncnn layers" in out


def test_pnnx_style_shorthand_with_fp32_and_paths(sample, tmp_path):
    p, b = tmp_path / "a.param", tmp_path / "a.bin"
    assert main([str(sample), "fp16=0", f"ncnnparam={p}", f"ncnnbin={b}"]) == 0
    half = tmp_path / "tiny_cnn.ncnn.bin"
    assert main([str(sample)]) == 0
    # fp32 weights take about twice the bytes of fp16 ones
    assert b.stat().st_size > 1.7 * half.stat().st_size


def test_unknown_key_and_missing_file_exit_2_with_one_line(sample, capsys):
    assert main([str(sample), "foo=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown option foo=")
    assert main(["convert", "does_not_exist.pt2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: does_not_exist.pt2: no such file"]


torch = pytest.importorskip("torch")


class Unsupported(torch.nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(torch.relu(x))


def test_incomplete_conversion_exits_1_writes_nothing_then_partial(tmp_path, capsys):
    pt2 = tmp_path / "u.pt2"
    torch.export.save(torch.export.export(Unsupported(), (torch.randn(1, 4),)), str(pt2))
    rc = main(["convert", str(pt2), "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "aten.special_bessel_j0.default" in err and "conversion incomplete: 1 operator" in err
    assert not list(tmp_path.glob("u.ncnn.*")) and not list(tmp_path.glob("u.pnnx.*"))
    diags = json.loads((tmp_path / "r.json").read_text())["diagnostics"]
    assert [d["op"] for d in diags] == ["aten.special_bessel_j0.default"]
    assert diags[0]["node"] == "special_bessel_j0" and "test_convert_cmd.py" in diags[0]["source"]
    rc = main(["convert", str(pt2), "--partial", "--no-pnnx"])
    assert rc == 1 and (tmp_path / "u.ncnn.param").exists()


def test_coverage_lists_targets_and_model_rows(sample, capsys):
    assert main(["coverage", "--json"]) == 0
    targets = json.loads(capsys.readouterr().out)
    aten = {t["target"] for t in targets["aten"]}
    assert {"aten.conv2d.default", "aten.convolution.default", "aten.relu.default"} <= aten
    assert main(["coverage", str(sample), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows["unsupported"] == 0 and rows["supported"] > 30


def test_console_script_runs_in_a_subprocess(sample):
    r = subprocess.run([sys.executable, "-m", "engine.cli.main", "convert", str(sample), "--quiet"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_output_folder_is_created_and_a_bad_report_path_is_one_line(sample, tmp_path, capsys):
    out = tmp_path / "new" / "sub"
    assert main(["convert", str(sample), "-o", str(out), "-q"]) == 0
    assert (out / "tiny_cnn.ncnn.param").exists()
    assert main(["convert", str(sample), "-o", str(out), "-q", "--report", str(tmp_path / "missing" / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing/r.json: the folder does not exist" in err[0]


def test_the_command_is_imported_before_numpy():
    """``pt2ncnn`` sets numpy's BLAS to one thread (OpenBLAS starts a spinning thread per core
    on import: ~0.1 s of CPU per run, for no matrix work); that only works while neither
    ``engine`` nor the command module has imported numpy yet."""
    code = ("import sys, engine, engine.cli, engine.cli.main\n"
            "assert 'numpy' not in sys.modules, 'numpy imported before entry() runs'\n"
            "from engine import load, Package, ExportedProgram, MemberInfo, PT2Error\n"
            "assert load.__module__ == 'engine.reader.package' and MemberInfo.__name__ == 'MemberInfo'\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names file descriptors through /proc (Linux)")
def test_files_are_forced_to_disk_only_with_fsync(sample, tmp_path, monkeypatch):
    """Without ``--fsync`` nothing is fsynced (the kernel writes the pages back later); with it,
    every written file before its rename and then the folder; the model loads in ncnn either way."""
    import os

    import ncnn

    synced: list[str] = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    stems = {"tiny_cnn.ncnn.param", "tiny_cnn.ncnn.bin", "tiny_cnn.pnnx.param", "tiny_cnn.pnnx.bin",
             "tiny_cnn_ncnn.py", "tiny_cnn_pnnx.py"}
    for flags, out in (([], tmp_path / "plain"), (["--fsync"], tmp_path / "durable")):
        assert main(["convert", str(sample), "-o", str(out), "-q", *flags]) == 0
        assert {p.name for p in out.iterdir()} == stems
        net = ncnn.Net()
        assert net.load_param(str(out / "tiny_cnn.ncnn.param")) == 0
        assert net.load_model(str(out / "tiny_cnn.ncnn.bin")) == 0
    from engine.writers import atomic_files

    with atomic_files([tmp_path / "lib.bin"]) as (f,):  # the library's default too
        f.write(b"x")
    durable = tmp_path / "durable"
    assert not [p for p in synced if not p.startswith(str(durable))]  # the plain runs synced nothing
    # each file was synced as its temporary file (renamed after), then the folder
    files = {Path(p).name.split(".", 1)[1].rsplit(".", 2)[0] for p in synced if p != str(durable)}
    assert files == stems and str(durable) in synced
