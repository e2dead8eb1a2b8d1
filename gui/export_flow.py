"""File ▸ Export ncnn: asking, choosing the file, writing it in a worker, telling the outcome.

:class:`ExportFlow` runs the steps in the order a user expects: an incomplete conversion is
asked about first ("1 operator is not converted — write the partial model?"), then the file
dialog opens (non-blocking, ``open()``) in the last export folder, or next to the model —
unless the model is one of the bundled samples or its folder is not writable, then in the home
folder. The write runs through the window's :class:`~gui.workers.TaskRunner` (all files or
none); the status bar says what was written, or that the export failed and nothing was written.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QFileDialog, QMessageBox

from engine.convert import script_path

from .document import SAMPLES

if TYPE_CHECKING:  # pragma: no cover
    from .main_window import MainWindow

log = logging.getLogger(__name__)


def export_paths(param_path: str) -> tuple[str, str, str, str]:
    """``dir/name.ncnn.param`` → the four files written next to each other."""
    p = os.fspath(param_path)
    for suffix in (".ncnn.param", ".param", ".ncnn.bin", ".bin"):
        if p.endswith(suffix):
            p = p[: -len(suffix)]
            break
    return f"{p}.ncnn.param", f"{p}.ncnn.bin", f"{p}.pnnx.param", f"{p}.pnnx.bin"


def write_files(ctx, result, paths: tuple[str, str, str, str], pnnx: bool, partial: bool,
                python: bool = False) -> list[str]:
    ncnn_param, ncnn_bin, pnnx_param, pnnx_bin = paths
    ctx.progress(0, 1, "writing files")
    scripts = {}
    if python:  # <stem>_ncnn.py, and <stem>_pnnx.py when its .pnnx.bin is written too
        scripts = {"ncnn_py": script_path(ncnn_param, "ncnn"),
                   "pnnx_py": script_path(pnnx_param, "pnnx") if pnnx else None}
    # all files or none; a cancel (Stop, closing the window) stops the write and replaces nothing
    written = result.write(ncnn_param, ncnn_bin, pnnx_param if pnnx else None, pnnx_bin if pnnx else None,
                           partial=partial, cancel=ctx, **scripts)
    return [str(w) for w in written]


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def default_folder(model_path: str, remembered: str | None) -> str:
    """Where the export dialog opens: the last export folder, else the model's own folder —
    never inside the installed package's samples, never a folder the user cannot write."""
    for candidate in (remembered, os.path.dirname(model_path)):
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK) \
                and not _inside(Path(candidate), SAMPLES):
            return candidate
    return str(Path.home())


def _operators(n: int) -> str:
    return f"{n} operator is" if n == 1 else f"{n} operators are"


class ExportFlow:
    """See the module docstring; one per window."""

    def __init__(self, window: "MainWindow"):
        self.win = window
        self.dialog: QFileDialog | None = None
        self.question: QMessageBox | None = None

    def start(self) -> None:
        """File ▸ Export ncnn (Ctrl+E)."""
        win = self.win
        conv = win.doc.conversion if win.doc else None
        if conv is None:
            return
        flagged = win.plugins.export_warning()
        if flagged:
            self._ask("Plug-in rule differs from PyTorch", f"Verify rule found a converter plug-in beyond "
                      f"tolerance:\n{flagged}", "Export the model anyway?", self._start_checked)
            return
        self._start_checked()

    def _start_checked(self) -> None:
        conv = self.win.doc.conversion
        if conv.result.ok:
            self._choose_file(partial=False)
            return
        n = len(conv.result.errors)
        self._ask("Incomplete conversion", f"{_operators(n)} not converted (see Problems).",
                  "Write the partial model anyway? It cannot run until the missing layers exist.",
                  lambda: self._choose_file(partial=True))

    def _ask(self, title: str, text: str, question: str, on_yes) -> QMessageBox:
        """A non-blocking Yes / No question (No by default); ``on_yes()`` after Yes."""
        box = QMessageBox(QMessageBox.Icon.Question, title, text,
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self.win)
        box.setObjectName("exportQuestion")
        box.setInformativeText(question)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        box.finished.connect(lambda _r, b=box: self._answered(b, on_yes))
        self.question = box
        box.open()
        return box

    def _answered(self, box: QMessageBox, on_yes) -> None:
        yes = box.clickedButton() is box.button(QMessageBox.StandardButton.Yes)
        box.deleteLater()
        if yes:
            on_yes()

    def _choose_file(self, partial: bool) -> None:
        win = self.win
        stem = Path(win.doc.path).with_suffix("").name
        folder = default_folder(win.doc.path, win.settings.get("export/dir", None, str))
        dlg = QFileDialog(win, "Export ncnn model", os.path.join(folder, f"{stem}.ncnn.param"),
                          "ncnn param (*.param)")
        dlg.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dlg.setDefaultSuffix("param")
        dlg.fileSelected.connect(lambda path: self._chosen(path, partial))
        dlg.finished.connect(lambda _r, d=dlg: d.deleteLater())
        self.dialog = dlg
        dlg.open()

    def _chosen(self, path: str, partial: bool) -> None:
        if not path:
            return
        self.win.settings.set("export/dir", os.path.dirname(path))
        self.write(path, partial=partial)

    def write(self, param_path: str, *, pnnx: bool | None = None, partial: bool = False,
              python: bool | None = None):
        """Write ``<stem>.ncnn.param/.bin`` (and the pnnx files, and the Python scripts) in a worker."""
        win = self.win
        conv = win.doc.conversion if win.doc else None
        if conv is None:
            return None
        if pnnx is None:
            pnnx = win.actions.write_pnnx.isChecked()
        if python is None:
            python = win.actions.write_py.isChecked()
        layers = conv.result.layer_count
        return win.runner.submit("Export", write_files, conv.result, export_paths(param_path), pnnx, partial, python,
                                 group="export", on_result=lambda files, n=layers: self._written(files, n),
                                 on_error=self._failed)

    def _written(self, files: list[str], layers: int) -> None:
        win = self.win
        win.last_export = files
        names = ", ".join(os.path.basename(f) for f in files)
        folder = os.path.dirname(files[0]) if files else ""
        conv = win.doc.conversion if win.doc else None
        warned = ""
        if conv is not None:  # writing may add warnings (weights holding NaN or infinite values)
            win.problems.set_diagnostics(win.diagnostics())
            n = sum(d.severity == "warning" and d.stage == "write_ncnn" for d in conv.result.diagnostics)
            warned = f" — {n} weight warning(s), see Problems" if n else ""
        win.status(f"Exported {layers} layers → {names} in {folder}{warned}")
        win.exported.emit(files)

    def _failed(self, error: BaseException) -> None:
        from .errors import describe

        self.win.status(f"Export failed — nothing written: {describe(error)[0]}")

    # ---------------------------------------------------------------- graph pictures
    def start_image(self) -> None:
        """File ▸ Export Graph Image: the graph last clicked, as SVG or PNG (non-blocking dialog)."""
        win = self.win
        panel = win.active_panel()
        if panel.graph is None:
            win.status("No graph to export")
            return
        view = panel.key if panel.key == "aten" else win._right_graph_key()
        stem = Path(win.doc.path).with_suffix("").name if win.doc else "graph"
        folder = default_folder(win.doc.path if win.doc else "", win.settings.get("export/dir", None, str))
        dlg = QFileDialog(win, f"Export the {view} graph as a picture", os.path.join(folder, f"{stem}-{view}.svg"),
                          "SVG picture (*.svg);;PNG image (*.png)")
        dlg.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dlg.filterSelected.connect(lambda f, d=dlg: d.setDefaultSuffix("png" if "png" in f else "svg"))
        dlg.setDefaultSuffix("svg")
        dlg.fileSelected.connect(lambda path, p=panel, v=view: self._image_chosen(p, v, path))
        dlg.finished.connect(lambda _r, d=dlg: d.deleteLater())
        self.dialog = dlg
        dlg.open()

    def _image_chosen(self, panel, view: str, path: str) -> None:
        from .graph.export_image import export_image

        if not path:
            return
        self.win.settings.set("export/dir", os.path.dirname(path))
        try:
            w, h = export_image(panel.scene, path, title=f"{self.win.doc.name if self.win.doc else ''} — {view}")
        except (OSError, ValueError) as e:
            self.win.reporter.report("Cannot export the graph", str(e))
            return
        self.win.status(f"Exported the {view} graph → {os.path.basename(path)} ({w:,}×{h:,}) in {os.path.dirname(path)}")
