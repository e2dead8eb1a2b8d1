"""Packaging configuration, checked without building anything (the build itself — wheel, sdist,
a clean virtualenv running both entry points — is ``packaging/check_wheel.sh``, a CI step):

* every data file of the ``engine``, ``gui`` and ``resources`` packages is matched by
  pyproject's ``package-data`` (a new data file cannot silently miss the wheel);
* the PyInstaller spec bundles every ``resources/`` folder and the engine's data;
* the ``.desktop`` entry runs the installed GUI script and names the icon the PNGs carry;
* the PNG icons are square and of the size their names say.
"""
from __future__ import annotations

import configparser
import fnmatch
import struct
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "gui", "resources")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _data_files() -> list[str]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", *PACKAGES], capture_output=True, text=True,
                             check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*") if p.is_file()]
    return sorted(f for f in out if not f.endswith((".py", ".pyc")) and "__pycache__" not in f)


def test_every_data_file_is_package_data():
    globs = _pyproject()["tool"]["setuptools"]["package-data"]
    missing = []
    for f in _data_files():
        package, rel = f.split("/", 1)
        if not any(fnmatch.fnmatch(rel, g) for g in globs.get(package, [])):
            missing.append(f)
    assert not missing, f"data files the wheel would not contain (add them to package-data): {missing}"


def test_the_desktop_entry_runs_the_gui_script_with_the_packaged_icon():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(ROOT / "resources" / "pt2ncnn-studio.desktop")
    d = entry["Desktop Entry"]
    assert d["Type"] == "Application"
    assert d["Exec"].split()[0] in _pyproject()["project"]["gui-scripts"]
    assert (ROOT / "resources" / "icons" / f"{d['Icon']}.svg").exists()
    assert list((ROOT / "resources" / "icons").glob(f"{d['Icon']}-*.png"))


@pytest.mark.parametrize("png", sorted((ROOT / "resources" / "icons").glob("pt2ncnn-studio-*.png")),
                         ids=lambda p: p.name)
def test_icon_sizes(png):
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    size = int(png.stem.rsplit("-", 1)[1])
    assert struct.unpack(">II", data[16:24]) == (size, size)


def test_the_pyinstaller_spec_bundles_every_resource_folder_and_the_engine_data():
    spec = (ROOT / "packaging" / "pt2ncnn-studio.spec").read_text()
    folders = sorted(p.name for p in (ROOT / "resources").iterdir() if p.is_dir() and p.name != "__pycache__")
    for name in folders:
        assert f'"resources" / "{name}"' in spec, f"resources/{name} is not bundled by the spec"
    assert '"engine" / "data"' in spec
    assert (ROOT / "packaging" / "studio_entry.py").exists()
