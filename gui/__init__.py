"""pt2ncnn Studio — the desktop workbench (PySide6 + pyqtgraph).

The package talks to the engine only through its public API. Layout:

* :mod:`gui.app` — ``main()``: command line, QApplication, exception hook, ``--screenshot``;
* :mod:`gui.main_window` — the window: actions, menus, docks, and the wiring between them
  (:mod:`gui.actions`, :mod:`gui.statusbar`, :mod:`gui.export_flow`, :mod:`gui.sync`,
  :mod:`gui.linked_views`, :mod:`gui.shortcut_guard`, :mod:`gui.verify_controller`);
* :mod:`gui.workers` — every thread the GUI starts (load, convert, layout, export, statistics);
* :mod:`gui.document` — what is open: the package, its program, the ATen graph, the conversion;
* :mod:`gui.graph` — the graph views (display model, layered layout, scene, items, view);
* :mod:`gui.panels` — the docks (inspector, tensors, weights, signature, passes, problems, search).
"""
from . import compat as _compat

_compat.apply()


def app_version() -> str:
    """The installed pt2ncnn's version ("unknown" when run from a tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pt2ncnn")
    except PackageNotFoundError:
        return "unknown"
