"""The converter plug-ins of a Studio session: :class:`PluginSession`.

It keeps the session's plug-in files (written with "Write a converter…", added, or given in
the Convert dialog), each on or off, and

* writes a new one for a node: the template dialog (:mod:`gui.write_converter_dialog`), the
  file scaffolded and written in a worker, opened in the editor (:mod:`gui.plugin_editor`);
* watches the files (``QFileSystemWatcher``; a file an editor saves by renaming a new one over
  it is watched again) and converts again, off the UI thread, once one is saved;
* decides what a conversion with plug-ins shows (:meth:`take`): a file that does not load, or
  a plug-in rule that fails on a node, leaves the previous conversion in place and puts the
  plug-in's ``file:line`` and reason in Problems;
* fills the Plug-ins panel: files, rules, the nodes each rule converted, and Verify rule
  (:func:`gui.plugin_runs.check_rule`) — a rule beyond tolerance is flagged and Export asks
  before writing (:meth:`export_warning`).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import QFileSystemWatcher, QObject, QStandardPaths, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMenu

from engine.convert.plugins import nodes_by_rule, plugin_files
from engine.convert.scaffold import rule_filename
from engine.errors import PluginError
from engine.verify import MissingDependency

from .errors import describe
from .panels.plugins import FileRow, PluginsPanel, RuleRow
from .plugin_editor import PluginEditor, launch_external, split_where
from .plugin_runs import PluginFailure, PluginLoad, RuleCheck, check_rule, free_path, write_plugin_file
from .write_converter_dialog import WriteConverterDialog

if TYPE_CHECKING:  # pragma: no cover
    from .main_window import MainWindow

#: how long after the last change of a file the model is converted again (editors write twice)
DEBOUNCE_MS = 250
#: how long to look for a file an editor replaced by renaming (tries × 100 ms)
REWATCH_TRIES = 30


def _decomposable(_ctx, op_name: str) -> bool:
    from engine.convert.decomposition import decomposable

    return decomposable(op_name)


def _aten_overload(op) -> bool:
    from engine.build import schemas

    return op is not None and op.type.startswith("aten.") and schemas.get(op.type) is not None


def _builtin_rule(op_name: str) -> str:
    """How the built-in rule of ``op_name`` is named ("" when there is none)."""
    from engine import converters  # noqa: F401  (registers the built-in rules)
    from engine.convert import registry

    builtin = [c for c in registry.ATEN.candidates(op_name) if c.plugin_file is None]
    return builtin[0].label if builtin else ""


class PluginSession(QObject):
    """See the module docstring; one per window."""

    def __init__(self, window: "MainWindow", panel: PluginsPanel):
        super().__init__(window)
        self.win = window
        self.panel = panel
        self.paths: list[str] = []
        self.disabled: set[str] = set()
        self.loads: dict[str, PluginLoad] = {}
        self.problems: list = []  #: the plug-in problems of the last conversion not taken
        self.nodes: dict[str, list[str]] = {}  #: rule tag → ATen nodes it converted (current conversion)
        self.checks: dict[str, RuleCheck] = {}
        self.notes: dict[str, str] = {}  #: rule tag → "verifying…" or why Verify rule failed
        self.editors: dict[str, PluginEditor] = {}
        self.dialog: WriteConverterDialog | None = None
        self.watcher = QFileSystemWatcher(self)
        self.watcher.fileChanged.connect(self._file_changed)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self.reconvert)
        panel.toggled.connect(self.set_enabled)
        panel.verifyRequested.connect(self.verify_rule)
        panel.editRequested.connect(self.edit)
        panel.addRequested.connect(self.add_dialog)
        panel.editorRequested.connect(self.choose_editor)
        window.conversionChanged.connect(self._on_conversion)
        window.documentChanged.connect(self._on_conversion)
        window.aten_panel.view.nodeMenuRequested.connect(self._node_menu)
        self.action = self._install_action()
        self.refresh()

    def _install_action(self) -> QAction:
        win = self.win
        a = QAction("&Write a Converter for the Selected Node…", win)
        a.setObjectName("writeConverterForNode")
        a.setStatusTip("Write a converter plug-in for the ATen node selected (a new rule, or one overriding the "
                       "built-in)")
        a.triggered.connect(self.write_for_selection)
        for top in win.menuBar().actions():  # the Model menu, after Convert with Options
            menu = top.menu()
            if menu is not None and win.actions.convert in menu.actions():
                menu.insertAction(win.actions.stop, a)
        return a

    # ---------------------------------------------------------------- files
    def folder(self) -> str:
        """Where new plug-in files go (``plugins/dir``; default: the app's data folder)."""
        folder = self.win.settings.get("plugins/dir", "", str) or os.path.join(
            QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation), "converters")
        os.makedirs(folder, exist_ok=True)
        return folder

    def add(self, path: str) -> None:
        path = os.path.abspath(path)
        if path not in self.paths:
            self.paths.append(path)
        self._watch(path)

    def adopt(self, entries) -> None:
        """Take the files of ``entries`` (files, folders of them) into the session."""
        for entry in entries:
            try:
                files = plugin_files([entry])
            except PluginError:
                files = [entry]  # missing: the conversion says so
            for f in files:
                self.add(str(f))

    def effective(self, converters) -> list[str]:
        """The plug-in files a conversion runs with: the session's (``converters`` adopted), on."""
        self.adopt(converters)
        return [p for p in self.paths if p not in self.disabled]

    def set_enabled(self, path: str, on: bool) -> None:
        (self.disabled.discard if on else self.disabled.add)(path)
        self.refresh()
        self.reconvert()

    def _watch(self, path: str) -> None:
        """(Re)watch ``path``: an editor that saved by renaming left the watch on the old file."""
        if path in self.watcher.files():
            self.watcher.removePath(path)
        if os.path.exists(path):
            self.watcher.addPath(path)

    def _file_changed(self, path: str) -> None:
        if os.path.exists(path):
            self._saved(path)
        else:  # replaced by a rename: look for it again
            QTimer.singleShot(100, lambda: self._rewatch(path, REWATCH_TRIES))

    def _rewatch(self, path: str, tries: int) -> None:
        if os.path.exists(path):
            self._saved(path)
        elif tries > 0:
            QTimer.singleShot(100, lambda: self._rewatch(path, tries - 1))

    def _saved(self, path: str) -> None:
        self._watch(path)
        editor = self.editors.get(path)
        if editor is not None:
            editor.file_changed()
        if path not in self.disabled and path in self.paths:
            self._debounce.start()

    def reconvert(self):
        """Convert the model again with the session's plug-ins (off the UI thread)."""
        win = self.win
        if win.doc is None:
            return None
        conv = win.doc.conversion
        return win.convert(conv.options if conv is not None else None)

    # ---------------------------------------------------------------- conversions
    def take(self, doc, result) -> bool:
        """Whether the window shows ``result`` (a Conversion or :class:`PluginFailure`); when
        a plug-in is broken the previous conversion stays and Problems says where."""
        loads = result.loads if isinstance(result, PluginFailure) else result.plugins
        self.loads.update({ld.path: ld for ld in loads})
        if isinstance(result, PluginFailure):
            problems = result.diagnostics
        else:
            problems = [d for d in result.result.errors if d.plugin] if doc.conversion is not None else []
        self.problems = problems
        if not problems:
            self.refresh()
            return True
        self._show_problems(doc)
        first = problems[0]
        kept = "the previous conversion is kept" if doc.conversion is not None else "nothing converted"
        self.win.status(f"Plug-in problem at {first.plugin}: {first.reason} — {kept} (see Problems)")
        if doc.conversion is None and isinstance(result, PluginFailure):  # nothing to show: say so at once
            self.win.right_panel.show_graph(None, message="Not converted: a converter plug-in does not load — "
                                                          "see Problems")
            error = next(ld.error for ld in result.loads if ld.error is not None)
            self.win.reporter.report("Conversion failed", error)
        self.refresh()
        return False

    def _show_problems(self, doc) -> None:
        prev = doc.conversion.diagnostics if doc.conversion is not None else []
        nodes = {d.node for d in self.problems if d.node}
        rows = self.problems + [d for d in prev if not d.node or d.node not in nodes]
        self.win.problems.set_diagnostics(rows, converted=True)
        dock = self.win.docks["problems"]
        dock.show()
        dock.raise_()

    def _on_conversion(self) -> None:
        doc = self.win.doc
        conv = doc.conversion if doc is not None else None
        self.nodes = nodes_by_rule(conv.result.pnnx, conv.result.ncnn) if conv is not None else {}
        self.checks.clear()
        self.notes.clear()
        self.refresh()

    # ---------------------------------------------------------------- the panel
    def refresh(self) -> None:
        doc = self.win.doc
        conv = doc.conversion if doc is not None else None
        failed = self.problems + ([d for d in conv.result.errors if d.plugin] if conv is not None else [])
        rows = []
        for p in self.paths:
            load = self.loads.get(p)
            mine = [d for d in failed if split_where(d.plugin)[0] == p]
            rules = []
            for r in load.rules if load is not None else ():
                problem = "; ".join(dict.fromkeys(f"{d.node}: {d.reason}" for d in mine if d.op == r.target))
                check = self.checks.get(r.tag)
                rules.append(RuleRow(r.tag, r.function, r.target, r.priority, r.where, self.nodes.get(r.tag, []),
                                     problem, check.describe() if check else self.notes.get(r.tag, ""),
                                     check.ok if check else None))
            error = str(load.error) if load is not None and load.error is not None else ""
            rows.append(FileRow(p, p not in self.disabled, error, rules))
        on = sum(p not in self.disabled for p in self.paths)
        summary = (f"{len(self.paths)} plug-in file{'s' if len(self.paths) != 1 else ''}, {on} on — saving one "
                   "converts the model again; uncheck one to convert without it") if self.paths else ""
        self.panel.set_rows(rows, summary)

    # ---------------------------------------------------------------- writing one
    def write_for_selection(self):
        cur = self.win.inspector.current
        if cur is None or cur[0] != "aten":
            self.win.status("Select an ATen node first (left graph), then Model ▸ Write a Converter…")
            return None
        return self.write_converter(cur[1])

    def _node_menu(self, name: str, global_pos) -> None:
        doc = self.win.doc
        if doc is None or not _aten_overload(doc.aten.find_op(name)):
            return
        menu = QMenu(self.win)
        menu.addAction("Write a converter…", lambda: self.write_converter(name))
        menu.popup(global_pos)

    def write_converter(self, node: str) -> WriteConverterDialog | None:
        """Open the template dialog for ATen node ``node``."""
        doc = self.win.doc
        op = doc.aten.find_op(node) if doc is not None else None
        if not _aten_overload(op):
            self.win.status(f"{node} is not an ATen operator a converter plug-in can take")
            return None
        conv = doc.conversion
        unconverted = conv is not None and any(node in d.node.split(",") for d in conv.result.errors)
        overrides = "" if unconverted else _builtin_rule(op.type)
        dlg = WriteConverterDialog(op.type, node, free_path(self.folder(), rule_filename(op.type)),
                                   overrides=overrides, parent=self.win)
        dlg.accepted.connect(lambda d=dlg, o=op: self._write(d, o))
        self.dialog = dlg
        dlg.open()
        self.win.runner.submit("Checking for a decomposition", _decomposable, op.type, report_errors=False, quiet=True,
                               on_result=lambda ok, d=dlg: d.enable_decompose(bool(ok)) if d is self.dialog else None)
        return dlg

    def _write(self, dlg: WriteConverterDialog, op) -> None:
        doc = self.win.doc
        path = dlg.path.text().strip()
        self.win.status(f"Writing {os.path.basename(path)}…")
        self.win.runner.submit("Cannot write the converter", write_plugin_file, op.type, op, dlg.template,
                               doc.path if doc else None, path, on_result=self._written)

    def _written(self, path: str) -> None:
        self.add(path)
        self.disabled.discard(os.path.abspath(path))
        line = None
        try:
            with open(path, encoding="utf-8") as f:
                line = next((k for k, ln in enumerate(f, 1) if "write me" in ln or "@aten_converter" in ln), None)
        except OSError:
            pass
        self.win.status(f"Wrote {path}: edit the rule and save — the model is converted again")
        dock = self.win.docks.get("plugins")
        if dock is not None:
            dock.show()
        self.edit(path if line is None else f"{path}:{line}")
        self.reconvert()

    # ---------------------------------------------------------------- editing
    def edit(self, where: str) -> PluginEditor | None:
        """Open ``file`` or ``file:line`` in the user's editor, else the built-in one."""
        path, line = split_where(where)
        command = self.win.settings.get("plugins/editor", "", str)
        if command:
            why = launch_external(command, path, line)
            if not why:
                return None
            self.win.status(f"Editor: {why} — using the built-in editor")
        editor = self.editors.get(path)
        if editor is None:
            editor = self.editors[path] = PluginEditor(path, self.win)
        editor.show()
        editor.raise_()
        editor.activateWindow()
        editor.go_to(line)
        return editor

    def add_dialog(self) -> QFileDialog:
        dlg = QFileDialog(self.win, "Add converter plug-ins", self.folder(), "Python files (*.py)")
        dlg.setFileMode(QFileDialog.FileMode.ExistingFiles)
        dlg.filesSelected.connect(self._added)
        dlg.finished.connect(lambda _r, d=dlg: d.deleteLater())
        dlg.open()
        return dlg

    def _added(self, files: list[str]) -> None:
        for f in files:
            self.add(f)
        self.refresh()
        self.reconvert()

    def choose_editor(self) -> QInputDialog:
        dlg = QInputDialog(self.win)
        dlg.setWindowTitle("Editor for plug-in files")
        dlg.setLabelText("Command ({file} and {line} are replaced; empty: the built-in editor),\n"
                         "e.g.  code -g {file}:{line}   or   gvim +{line} {file}")
        dlg.setTextValue(self.win.settings.get("plugins/editor", "", str))
        dlg.textValueSelected.connect(lambda text: self.win.settings.set("plugins/editor", text.strip()))
        dlg.finished.connect(lambda _r, d=dlg: d.deleteLater())
        dlg.open()
        return dlg

    # ---------------------------------------------------------------- checking a rule
    def verify_rule(self, tag: str):
        """Verify the layers rule ``tag`` made, alone on PyTorch's inputs (worker thread)."""
        win = self.win
        doc = win.doc
        conv = doc.conversion if doc is not None else None
        if conv is None or not conv.result.ok:
            win.status("Verify rule: the model must convert completely first (see Problems)")
            return None
        nodes = self.nodes.get(tag)
        if not nodes:
            win.status("Verify rule: this rule converted no node of the model")
            return None
        self.notes[tag] = "verifying…"
        self.refresh()
        win.status("Verifying the rule's layers against PyTorch…")
        return win.runner.submit("Verify rule", check_rule, doc, conv, tag, nodes, group="verify-rule",
                                 report_errors=False, on_result=self._checked,
                                 on_error=lambda e, t=tag: self._check_failed(t, e))

    def _checked(self, check: RuleCheck) -> None:
        doc = self.win.doc
        self.notes.pop(check.tag, None)
        if doc is None or doc.conversion is not check.conversion:
            self.refresh()
            return  # converted again since: stale
        self.checks[check.tag] = check
        self.refresh()
        self.win.status(f"Rule {check.tag.rpartition('::')[2]}: {check.describe()}")

    def _check_failed(self, tag: str, error: BaseException) -> None:
        if isinstance(error, MissingDependency):
            why = f"needs {error.package} (torch and ncnn)"
        else:
            why = describe(error)[0]
        self.notes[tag] = f"not verified: {why}"
        self.refresh()
        self.win.status(f"Verify rule failed: {why}")

    def export_warning(self) -> str:
        """What Export warns about before writing: rules checked beyond tolerance ("" when none)."""
        doc = self.win.doc
        bad = [c for c in self.checks.values() if not c.ok and doc is not None and c.conversion is doc.conversion]
        return "\n".join(f"{c.tag.rpartition('::')[2]} ({os.path.basename(c.tag.partition('::')[0])}): "
                         f"{c.describe()}" for c in bad)
