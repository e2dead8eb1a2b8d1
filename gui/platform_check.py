"""Before Qt starts: can its xcb platform plugin load? (:func:`platform_problem`, no Qt import)

On a fresh Linux desktop the PySide6 wheel's X11 plugin (``libqxcb.so``) may need system
libraries that are not installed (``libxcb-cursor0``, ``libxcb-icccm4``, ``libxcb-keysyms1``...).
Qt then prints "Could not load the Qt platform plugin xcb" and aborts the process. Asking the
dynamic loader first (``ldd`` on the plugin) names what is missing, so the app can say so in one
line and exit instead.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping

#: The system packages the xcb plugin needs on Debian / Ubuntu beyond a minimal X11 install
#: (the README's quick start lists them).
DEBIAN_PACKAGES = ("libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libxcb-image0", "libxcb-render-util0",
                   "libxcb-shape0", "libxcb-randr0", "libxcb-xkb1", "libxkbcommon-x11-0", "libegl1", "libfontconfig1")
_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$", re.M)


def xcb_plugin() -> Path | None:
    """The PySide6 wheel's xcb platform plugin, if there is one."""
    try:
        import PySide6
    except ImportError:
        return None
    path = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return path if path.is_file() else None


def missing_libraries(library: Path) -> list[str]:
    """The shared libraries ``library`` needs (directly or not) that the loader cannot find,
    by ``ldd``; empty when all are there or ``ldd`` is not available."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        out = subprocess.run([ldd, str(library)], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return list(dict.fromkeys(_NOT_FOUND.findall(out)))


def debian_package(soname: str) -> str:
    """The Debian / Ubuntu package that usually ships ``soname`` (``libxcb-icccm.so.4`` →
    ``libxcb-icccm4``, ``libxkbcommon-x11.so.0`` → ``libxkbcommon-x11-0``)."""
    m = re.fullmatch(r"(lib[\w.+-]*?)\.so\.(\d+)(?:\.\d+)*", soname)
    if m is None:
        return soname
    base, major = m.groups()
    return f"{base}{'-' if base[-1].isdigit() else ''}{major}".lower().replace("_", "-")


def platform_problem(environ: Mapping[str, str], plugin: Path | None = None) -> str | None:
    """Why Qt's xcb platform plugin will not load here, in one line — or None (it will, or
    another platform is in use). Checked on Linux when the platform is xcb (``QT_QPA_PLATFORM``
    unset or ``xcb``) and an X display is set."""
    if not sys.platform.startswith("linux"):
        return None
    platform = environ.get("QT_QPA_PLATFORM", "")
    if platform not in ("", "xcb") or not environ.get("DISPLAY"):
        return None
    if not platform and environ.get("WAYLAND_DISPLAY"):
        return None  # Qt picks its Wayland plugin first
    plugin = plugin or xcb_plugin()
    if plugin is None:
        return None
    missing = missing_libraries(plugin)
    if not missing:
        return None
    packages = " ".join(dict.fromkeys(debian_package(s) for s in missing))
    return (f"pt2ncnn-studio: cannot open a window: Qt's X11 (xcb) platform plugin needs {', '.join(missing)}, "
            f"not installed on this system; on Debian/Ubuntu: sudo apt install {packages} "
            f"(or render without a window: QT_QPA_PLATFORM=offscreen pt2ncnn-studio --screenshot OUT.png)")
