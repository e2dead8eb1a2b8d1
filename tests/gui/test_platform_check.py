"""First run on a desktop without Qt's xcb libraries: ``pt2ncnn-studio`` names what is missing in
one line and exits 2 — it used to abort (exit 134) in Qt's "Could not load the Qt platform
plugin xcb"."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gui.platform_check import debian_package, missing_libraries, platform_problem, xcb_plugin

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def plugin_missing_a_library(tmp_path) -> Path:
    """A shared library needing ``libpt2ncnnmissing.so.3``, which is then deleted."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a library with a missing dependency")
    (tmp_path / "dep.c").write_text("int pt2ncnn_dep(void) { return 3; }\n")
    (tmp_path / "plugin.c").write_text("int pt2ncnn_dep(void);\nint plugin(void) { return pt2ncnn_dep(); }\n")
    dep = tmp_path / "libpt2ncnnmissing.so.3"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(dep), "-Wl,-soname,libpt2ncnnmissing.so.3",
                    str(tmp_path / "dep.c")], check=True)
    plugin = tmp_path / "libqfake.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(plugin), str(tmp_path / "plugin.c"), str(dep)], check=True)
    dep.unlink()
    return plugin


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the xcb plugin is Linux's")
def test_a_missing_library_is_named_with_its_package(plugin_missing_a_library):
    assert missing_libraries(plugin_missing_a_library) == ["libpt2ncnnmissing.so.3"]
    line = platform_problem({"DISPLAY": ":0"}, plugin_missing_a_library)
    assert line.startswith("pt2ncnn-studio: cannot open a window: Qt's X11 (xcb) platform plugin needs "
                           "libpt2ncnnmissing.so.3, not installed")
    assert "sudo apt install libpt2ncnnmissing3 " in line and "\n" not in line
    # not checked where xcb is not the platform
    for env in ({}, {"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"},
                {"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}):
        assert platform_problem(env, plugin_missing_a_library) is None
    assert platform_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "w"},
                            plugin_missing_a_library) is not None


def test_debian_package_names():
    assert [debian_package(s) for s in ("libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1",
                                        "libxkbcommon-x11.so.0", "libEGL.so.1", "libfontconfig.so.1.12.0")] == [
        "libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libxkbcommon-x11-0", "libegl1", "libfontconfig1"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the xcb plugin is Linux's")
def test_studio_says_what_is_missing_instead_of_aborting():
    plugin = xcb_plugin()
    missing = missing_libraries(plugin) if plugin is not None else []
    if not missing:
        pytest.skip("every library of the xcb plugin is installed here")
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    env.update(DISPLAY=":99", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "gui.app"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr[-500:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and all(m in lines[0] for m in missing), lines
    assert "sudo apt install " + " ".join(debian_package(m) for m in missing) in lines[0]


def test_the_readme_quick_start_lists_the_packages():
    import re

    from gui.platform_check import DEBIAN_PACKAGES

    text = (ROOT / "README.md").read_text()
    quick = text[text.index("## Quick start"):text.index("## Command line")]
    assert re.search(r"^sudo apt install (.+)$", quick, re.M).group(1).split() == list(DEBIAN_PACKAGES)
