"""Menus, the toolbar and keyboard shortcuts of the main window.

:func:`build_actions` creates every ``QAction`` (each with a shortcut and a status tip), puts
them in the menus and the toolbar, and returns them as an :class:`Actions` object the window
enables and disables. Help ▸ Keyboard Shortcuts (F1) lists every window action that has a
shortcut — read from the actions themselves, so the list cannot go stale — and the keys of a
graph view (:data:`GRAPH_KEYS`).
"""
from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu, QMessageBox, QStyle, QToolBar, QWidget

from . import document, icons

if TYPE_CHECKING:  # pragma: no cover
    from .main_window import MainWindow

#: keys handled by a graph view itself (gui.graph.view.GraphView.keyPressEvent)
GRAPH_KEYS = (
    ("arrows", "walk the graph: Up a producer, Down a consumer, Left / Right the neighbour"),
    ("Home / End", "first / last node"),
    ("Enter", "centre on the selection"),
    ("Esc", "clear the selection"),
    ("+ / −", "zoom in / out"),
    ("F or 0", "fit the graph"),
    ("1", "actual size"),
)


@dataclass
class Actions:
    window: "MainWindow"
    open: QAction = None  # type: ignore[assignment]
    export: QAction = None  # type: ignore[assignment]
    write_pnnx: QAction = None  # type: ignore[assignment]
    export_image: QAction = None  # type: ignore[assignment]
    link_views: QAction = None  # type: ignore[assignment]
    write_py: QAction = None  # type: ignore[assignment]
    quit: QAction = None  # type: ignore[assignment]
    convert: QAction = None  # type: ignore[assignment]
    convert_options: QAction = None  # type: ignore[assignment]
    stop: QAction = None  # type: ignore[assignment]
    find: QAction = None  # type: ignore[assignment]
    find_next: QAction = None  # type: ignore[assignment]
    find_prev: QAction = None  # type: ignore[assignment]
    show_pnnx: QAction = None  # type: ignore[assignment]
    show_ncnn: QAction = None  # type: ignore[assignment]
    next_pass: QAction = None  # type: ignore[assignment]
    prev_pass: QAction = None  # type: ignore[assignment]
    hide_params: QAction = None  # type: ignore[assignment]
    fit: QAction = None  # type: ignore[assignment]
    zoom_in: QAction = None  # type: ignore[assignment]
    zoom_out: QAction = None  # type: ignore[assignment]
    other_view: QAction = None  # type: ignore[assignment]
    recent_menu: QMenu = None  # type: ignore[assignment]
    docks_menu: QMenu = None  # type: ignore[assignment]
    toolbar: QToolBar = None  # type: ignore[assignment]
    themes: dict[str, QAction] = field(default_factory=dict)

    def refresh_dock_menu(self) -> None:
        self.docks_menu.clear()
        for d in self.window.docks.values():
            self.docks_menu.addAction(d.toggleViewAction())


def _action(win, text: str, slot, shortcut=None, tip: str = "", icon=None, checkable: bool = False) -> QAction:
    a = QAction(text, win)
    if shortcut is not None:
        a.setShortcuts(shortcut if isinstance(shortcut, list) else [shortcut])
    if tip:
        a.setStatusTip(tip)
        a.setToolTip(f"{tip} ({a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)})"
                     if shortcut is not None else tip)
    if icon is not None:
        a.setIcon(icon)
    a.setCheckable(checkable)
    if slot is not None:
        a.triggered.connect(slot)
    win.addAction(a)  # shortcuts work even when the menu bar is hidden
    return a


def build_actions(win: "MainWindow") -> Actions:
    A = Actions(win)
    K = QKeySequence
    std = win.style().standardIcon
    A.open = _action(win, "&Open…", win.open_dialog, K(K.StandardKey.Open), "Open a .pt2 package", icons.icon("open"))
    A.export = _action(win, "&Export ncnn…", win.export_dialog, K("Ctrl+E"),
                       "Write .ncnn.param / .ncnn.bin (and pnnx files)", icons.icon("export"))
    A.write_pnnx = _action(win, "Also write pnnx files", None, tip="Export writes .pnnx.param / .pnnx.bin too",
                           checkable=True)
    A.write_pnnx.setChecked(win.settings.get("export/pnnx", False, bool))
    A.write_pnnx.toggled.connect(lambda on: win.settings.set("export/pnnx", on))
    A.export_image = _action(win, "Export &Graph Image…", win.exporter.start_image, K("Ctrl+Shift+E"),
                             "Save the graph last clicked as an SVG or PNG picture")
    A.write_py = _action(win, "Also write Python scripts", None, checkable=True,
                         tip="Export writes <stem>_ncnn.py (runs the ncnn model) and, with the pnnx files, "
                             "<stem>_pnnx.py (the model as a PyTorch module)")
    A.write_py.setChecked(win.settings.get("export/python", False, bool))
    A.write_py.toggled.connect(lambda on: win.settings.set("export/python", on))
    A.quit = _action(win, "&Quit", win.close, K(K.StandardKey.Quit), "Quit")
    A.convert = _action(win, "&Convert", lambda: win.convert(), K("Ctrl+R"), "Convert to ncnn", icons.icon("convert"))
    A.convert_options = _action(win, "Convert with &Options…", win.convert_dialog, K("Ctrl+Shift+R"),
                                "fp16, converter plug-ins, input shapes")
    A.stop = _action(win, "&Stop", win.cancel_tasks, K("Ctrl+."), "Stop what is running",
                     std(QStyle.StandardPixmap.SP_BrowserStop))
    A.find = _action(win, "&Find…", win.find, K(K.StandardKey.Find), "Search nodes by name, op type or module",
                     icons.icon("search"))
    A.find_next = _action(win, "Find &Next", win.search.next, [K("F3")], "Next search result")
    A.find_prev = _action(win, "Find &Previous", win.search.previous, [K("Shift+F3")], "Previous search result")
    A.show_pnnx = _action(win, "pnnx Graph", lambda: win.show_right("pnnx"), K("Ctrl+1"), "Show the pnnx graph")
    A.show_ncnn = _action(win, "ncnn Graph", lambda: win.show_right("ncnn"), K("Ctrl+2"), "Show the ncnn graph")
    A.prev_pass = _action(win, "Previous Pass", lambda: win.step_pass(-1), K("Ctrl+["), "Select the previous pass")
    A.next_pass = _action(win, "Next Pass", lambda: win.step_pass(+1), K("Ctrl+]"), "Select the next pass")
    A.hide_params = _action(win, "Hide &Parameters", None, K("Ctrl+H"),
                            "Hide parameter, buffer and constant nodes", icons.icon("params"), checkable=True)
    A.hide_params.setChecked(win.settings.get("view/hide_params", False, bool))
    A.hide_params.toggled.connect(win.set_hide_params)
    A.fit = _action(win, "&Fit Graphs", lambda: [p.view.fit() for p in (win.aten_panel, win.right_panel)],
                    K("Ctrl+0"), "Fit both graphs", icons.icon("fit"))
    A.zoom_in = _action(win, "Zoom &In", lambda: win.active_panel().view.zoom_by(1.25), [K("Ctrl++"), K("Ctrl+=")],
                        "Zoom in", icons.icon("zoom-in"))
    A.zoom_out = _action(win, "Zoom &Out", lambda: win.active_panel().view.zoom_by(0.8), K("Ctrl+-"), "Zoom out",
                         icons.icon("zoom-out"))
    A.other_view = _action(win, "Switch Graph", win.focus_other_view, K("F6"), "Move the focus to the other graph")
    A.link_views = _action(win, "&Link Graph Views", None, K("Ctrl+L"),
                           "Pan and zoom both graphs together (the other view follows to what it became)",
                           checkable=True)
    A.link_views.setChecked(win.settings.get("view/linked", False, bool))

    mb = win.menuBar()
    m = mb.addMenu("&File")
    m.addAction(A.open)
    A.recent_menu = m.addMenu("Open &Recent")
    A.recent_menu.aboutToShow.connect(lambda: _fill_recent(win, A.recent_menu))
    samples = m.addMenu("Open &Sample")
    for p in document.sample_paths():
        samples.addAction(p.name, lambda path=p: win.open_file(path))
    m.addSeparator()
    m.addAction(A.export)
    m.addAction(A.write_pnnx)
    m.addAction(A.write_py)
    m.addAction(A.export_image)
    m.addSeparator()
    m.addAction(A.quit)

    m = mb.addMenu("&Model")
    for a in (A.convert, A.convert_options, A.stop):
        m.addAction(a)
    models = m.addMenu("Program in &File")
    models.aboutToShow.connect(lambda: _fill_models(win, models))
    m.addSeparator()
    for a in (A.show_pnnx, A.show_ncnn, A.prev_pass, A.next_pass):
        m.addAction(a)

    m = mb.addMenu("&View")
    for a in (A.find, A.find_next, A.find_prev):
        m.addAction(a)
    m.addSeparator()
    for a in (A.hide_params, A.fit, A.zoom_in, A.zoom_out, A.other_view, A.link_views):
        m.addAction(a)
    m.addSeparator()
    A.docks_menu = m.addMenu("&Panels")
    A.refresh_dock_menu()
    m.addAction("Reset Layout", win.reset_layout)
    tm = m.addMenu("&Theme")
    group = QActionGroup(win)
    current = win.settings.get("view/theme", "system", str)
    for key in ("system", "light", "dark"):
        a = tm.addAction(key.capitalize())
        a.setCheckable(True)
        a.setChecked(key == current)
        a.triggered.connect(lambda _c=False, k=key: win.set_scheme(k))
        group.addAction(a)
        A.themes[key] = a

    m = mb.addMenu("&Help")
    m.addAction(_action(win, "&Keyboard Shortcuts", lambda: show_shortcuts(win), K(K.StandardKey.HelpContents),
                        "List the keyboard shortcuts"))
    m.addAction(_action(win, "&About", win.about, tip="Version and what this is"))

    tb = QToolBar("Main")
    tb.setObjectName("mainToolbar")
    tb.setMovable(False)
    tb.setToolButtonStyle(tb.toolButtonStyle().ToolButtonTextBesideIcon)
    for a in (A.open, A.convert, A.export):
        tb.addAction(a)
    tb.addSeparator()
    for a in (A.find, A.hide_params, A.fit, A.zoom_in, A.zoom_out):
        tb.addAction(a)
    win.addToolBar(tb)
    A.toolbar = tb
    return A


def _fill_recent(win: "MainWindow", menu: QMenu) -> None:
    menu.clear()
    files = win.settings.recent_files()
    if not files:
        a = menu.addAction("(none)")
        a.setEnabled(False)
        return
    for k, path in enumerate(files):
        label = f"&{k + 1} {os.path.basename(path)}" if k < 9 else os.path.basename(path)
        a = menu.addAction(label, lambda p=path: _open_recent(win, p))
        a.setToolTip(path)
        a.setStatusTip(path)
    menu.addSeparator()
    menu.addAction("Clear", win.settings.clear_recent)


def _fill_models(win: "MainWindow", menu: QMenu) -> None:
    """The ExportedPrograms of a multi-model package; picking one re-opens the file on it."""
    menu.clear()
    doc = win.doc
    if doc is None:
        return
    group = QActionGroup(menu)
    for name in doc.model_names:
        a = menu.addAction(name, lambda n=name: win.open_file(doc.path, n))
        a.setCheckable(True)
        a.setChecked(name == doc.model_name)
        group.addAction(a)


def _open_recent(win: "MainWindow", path: str) -> None:
    if not Path(path).exists():
        win.settings.remove_recent(path)
        win.reporter.report("Cannot open recent file", f"{path}: file not found (removed from the list)")
        return
    win.open_file(path)


def shortcut_rows(win: "MainWindow") -> list[tuple[str, str]]:
    """(keys, what they do) for every action of the window with a shortcut, in menu order, then
    the graph view's own keys."""
    rows = []
    for a in QWidget.actions(win):  # the QWidget method: MainWindow.actions is the Actions set
        keys = " / ".join(s.toString(QKeySequence.SequenceFormat.NativeText) for s in a.shortcuts())
        if keys:
            rows.append((keys, a.text().replace("&", "").rstrip("…")))
    return rows + [(f"In a graph: {k}", v) for k, v in GRAPH_KEYS]


def show_shortcuts(win: "MainWindow") -> QMessageBox:
    box = QMessageBox(win)
    box.setObjectName("shortcutsDialog")
    box.setWindowTitle("Keyboard shortcuts")
    table = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>&nbsp;&nbsp;{html.escape(v)}</td></tr>"
                    for k, v in shortcut_rows(win))
    box.setText(f"<table>{table}</table>")
    box.open()
    return box
