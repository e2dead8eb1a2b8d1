"""The README's screenshots of writing a converter in Studio (needs torch and ncnn)::

    QT_QPA_PLATFORM=offscreen python docs/make_plugin_screenshots.py [OUTDIR]

One run of the loop the README walks through, on a small model exported now (conv → hypot →
relu; nothing converts ``aten.hypot.default``): Problems ▸ Write a converter… (the template
dialog over the window), the plug-in in the built-in editor with its body written, and the
model converted with it, the rule checked against PyTorch in the Plug-ins panel.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import torch  # noqa: E402
from PySide6.QtCore import QCoreApplication, QPoint  # noqa: E402
from PySide6.QtGui import QPainter  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

import gui  # noqa: E402,F401
from gui.main_window import MainWindow  # noqa: E402
from gui.settings import Settings  # noqa: E402

BODY = '    return ctx.emit("pnnx.Expression", [x, other], params={"expr": "sqrt(add(mul(@0,@0),mul(@1,@1)))"})'


class HypotNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        return self.head(torch.relu(torch.hypot(y, 2 * y + 1)))


def settle(win: MainWindow) -> None:
    win.wait_settled()
    for _ in range(5):
        QCoreApplication.processEvents()


def save(widget_grab, path: Path) -> None:
    if not widget_grab.save(str(path)):
        raise SystemExit(f"{path}: could not write the PNG")
    print(f"wrote {path}")


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="pt2ncnn-plugins-"))
    pt2 = work / "hypot_net.pt2"
    with torch.no_grad():
        torch.export.save(torch.export.export(HypotNet().eval(), (torch.randn(1, 3, 16, 16),)), str(pt2))
    app = QApplication.instance() or QApplication([])
    app.setStyle("Fusion")
    settings = Settings.at(work / "studio.ini")
    settings.mark_first_run_done()
    settings.set("plugins/dir", str(work / "converters"))
    settings.set("view/hide_params", True)
    win = MainWindow(settings, restore_state=False)
    win.resize(1600, 1000)
    win.show()
    win.open_file(pt2)
    settle(win)

    # 1. Problems ▸ Write a converter… on the hypot row: the template dialog
    node = next(op.name for op in win.doc.aten.ops if op.type == "aten.hypot.default")
    win.sync.select("aten", [node])
    win.docks["problems"].raise_()
    win.problems.table.setCurrentIndex(win.problems.model.index(0, 3))
    win.problems.write_action.trigger()
    dlg = win.plugins.dialog
    settle(win)
    picture = win.grab()
    painter = QPainter(picture)
    shot = dlg.grab()
    painter.drawPixmap(QPoint((picture.width() - shot.width()) // 2, 180), shot)
    painter.end()
    save(picture, out / "studio-plugin-write.png")

    # 2. the file in the built-in editor, its body written and saved
    dlg.write_button.click()
    settle(win)
    path = dlg.path.text()
    editor = win.plugins.editors[path]
    text = editor.text.toPlainText()
    placeholder = next(ln for ln in text.splitlines() if "write me" in ln)
    editor.text.setPlainText(text.replace(placeholder, BODY))
    editor.resize(1000, 760)
    editor.save_button.click()
    editor.go_to(next(k for k, ln in enumerate(editor.text.toPlainText().splitlines(), 1) if "def hypot" in ln))
    win.wait_settled()
    QCoreApplication.processEvents()
    before = win.doc.conversion
    deadline = time.monotonic() + 60
    while win.doc.conversion is before and time.monotonic() < deadline:  # the watcher's debounce, the conversion
        QCoreApplication.processEvents()
        time.sleep(0.02)
    settle(win)
    save(editor.grab(), out / "studio-plugin-editor.png")
    editor.close()

    # 3. converted with it; Verify rule in the Plug-ins panel
    if not win.doc.conversion.result.ok:
        raise SystemExit(f"not converted: {win.doc.conversion.result.errors}")
    win.show_right("ncnn")
    settle(win)
    tag = f"{path}::hypot_default"
    win.docks["plugins"].show()
    win.docks["plugins"].raise_()
    win.plugins_panel.select(tag)
    win.plugins.verify_rule(tag)
    settle(win)
    win.sync.select("aten", [node])
    win.docks["plugins"].raise_()
    win.plugins_panel.select(None, path)  # the rule's row unselected: its verdict in its own colour
    settle(win)
    save(win.grab(), out / "studio-plugin-panel.png")
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"))
