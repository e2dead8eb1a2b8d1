"""``pt2ncnn-studio``: the application entry point.

::

    pt2ncnn-studio [MODEL.pt2]
    pt2ncnn-studio --screenshot OUT.png [MODEL.pt2] [--select NODE] [--pass N] [--panel NAME]
                   [--right pnnx|ncnn] [--tensor FQN] [--theme light|dark] [--size 1600x1000]
                   [--converters FILE.py] [--verify]

Without a model the last one opens (the bundled sample on the very first start), so the window
is never empty. ``--screenshot`` opens the model, converts it, renders the main window to a PNG
and exits 0 — or non-zero with a one-line message on stderr when the model cannot be opened or
converted. The other options set up the state shown (for the README's screenshots).

On Linux with an X display, a missing system library of Qt's xcb platform plugin is named in one
line (with the Debian packages to install) and the app exits 2, instead of Qt aborting
(:mod:`gui.platform_check`).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="pt2ncnn-studio", description="Inspect .pt2 ExportedPrograms and convert "
                                "them to ncnn.")
    p.add_argument("model", nargs="?", help="a .pt2 package to open")
    p.add_argument("--screenshot", metavar="OUT.png", help="render the window to a PNG and exit")
    p.add_argument("--size", default="1600x1000", help="window size for --screenshot (WxH)")
    p.add_argument("--select", metavar="NODE", help="select an ATen node (by name) before the screenshot")
    p.add_argument("--pass", dest="pass_index", metavar="N|NAME", help="select pass N (or the first pass named "
                   "NAME) before the screenshot")
    p.add_argument("--panel", metavar="NAME", help="raise a panel: problems, passes, tensors, signature, inspector")
    p.add_argument("--right", choices=("pnnx", "ncnn"), help="graph shown on the right")
    p.add_argument("--tensor", metavar="FQN", help="open a tensor in the weight viewer")
    p.add_argument("--search", metavar="TEXT", help="run a search")
    p.add_argument("--theme", choices=("system", "light", "dark"), help="colour scheme")
    p.add_argument("--hide-params", action="store_true", help="hide parameter nodes")
    p.add_argument("--verify", action="store_true", help="verify against PyTorch before the screenshot "
                   "(needs torch and ncnn)")
    p.add_argument("--converters", metavar="FILE.py|DIR", action="append", default=[],
                   help="converter plug-in file(s), or folders of them, for the conversion")
    p.add_argument("--settings", metavar="FILE.ini", help="keep settings in this file")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    return p.parse_args(argv)


def _initial_model(settings, explicit: str | None) -> str:
    from .document import default_sample

    if explicit:
        return explicit
    if settings.first_run:
        settings.mark_first_run_done()
        return str(default_sample())
    for path in settings.recent_files():
        if Path(path).exists():
            return path
    return str(default_sample())


def main(argv: list[str] | None = None) -> int:
    # numpy's OpenBLAS starts a thread per core on import, and they spin: about 0.1 s of CPU for
    # nothing, as no step here multiplies large matrices (set it to override); as in the CLI
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    headless = sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if headless:
        # no screen to show a window on (an SSH session, a CI box): render instead of aborting
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        if not args.screenshot:
            args.screenshot = "pt2ncnn-studio.png"
            print("pt2ncnn-studio: no display found (DISPLAY/WAYLAND_DISPLAY unset); rendering the window to "
                  f"{args.screenshot} instead. Run it on a desktop to use it interactively.", file=sys.stderr)

    from .platform_check import platform_problem

    problem = platform_problem(os.environ)  # before Qt, which would abort the process
    if problem:
        print(problem, file=sys.stderr)
        return 2

    from PySide6.QtWidgets import QApplication

    from . import theme  # noqa: F401  (imports gui: applies the binding work-around first)
    from .errors import ErrorReporter
    from .main_window import ICON, MainWindow
    from .settings import Settings

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("pt2ncnn Studio")
    app.setOrganizationName("pt2ncnn")
    app.setDesktopFileName("pt2ncnn-studio")
    app.setStyle("Fusion")
    if ICON.exists():
        from PySide6.QtGui import QIcon

        app.setWindowIcon(QIcon(str(ICON)))

    if args.settings:
        settings = Settings.at(args.settings)
    elif args.screenshot:  # a clean, default layout: never the user's own state
        settings = Settings.at(Path(tempfile.mkdtemp(prefix="pt2ncnn-studio-")) / "settings.ini")
        settings.mark_first_run_done()
    else:
        settings = Settings()
    theme.apply_scheme(args.theme or settings.get("view/theme", "system", str))
    if args.hide_params:
        settings.set("view/hide_params", True)
    if args.right:
        settings.set("view/right", args.right)

    reporter = ErrorReporter(headless=bool(args.screenshot))
    reporter.install_hooks()
    win = MainWindow(settings, reporter=reporter, restore_state=not args.screenshot)
    reporter.parent_widget = lambda: win
    if args.screenshot:
        return screenshot(win, args)
    win.show()
    win.open_file(_initial_model(settings, args.model))
    code = app.exec()
    reporter.uninstall_hooks()
    leave(code)  # the window saved its state: skip the interpreter's teardown (seconds with torch loaded)
    return code


def leave(code: int) -> None:
    """End the process now: flush what is buffered, then ``os._exit`` — no module teardown and
    no garbage collection of the whole heap, which take seconds once torch was imported (Verify)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed or missing stream
            pass
    os._exit(code)


def screenshot(win, args: argparse.Namespace) -> int:
    """Open, convert, set up the requested state, render to ``args.screenshot``."""
    from .document import default_sample

    model = args.model or str(default_sample())
    try:
        w, h = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        print(f"--size {args.size}: expected WIDTHxHEIGHT", file=sys.stderr)
        return 2
    win.resize(w, h)
    win.show()
    if not Path(model).exists():
        print(f"{model}: file not found", file=sys.stderr)
        return 1
    win.open_file(model)
    win.wait_settled()
    if win.doc is None:
        return 1  # the reporter printed the reader's message
    if args.converters:
        from dataclasses import replace

        win.convert(replace(win.convert_options(), converters=list(args.converters)))
        win.wait_settled()
    if win.doc.conversion is None:
        win.convert()
        win.wait_settled()
        if win.doc.conversion is None:
            return 1
    if args.verify:
        win.verifier.verify()
        win.wait_settled()
        if win.verify_panel.isHidden():
            win.docks["verify"].show()
        win.docks["verify"].raise_()
    if args.pass_index is not None:
        index = args.pass_index
        if not str(index).isdigit():
            names = [r.name for r in win.doc.conversion.result.records]
            index = names.index(index) if index in names else -1
        if not win.passes.select_pass(int(index)):
            print(f"--pass {args.pass_index}: no such pass", file=sys.stderr)
            return 2
        win.docks["passes"].raise_()
        win.wait_settled()
    if args.select:
        if win.aten_panel.graph is None or win.aten_panel.graph.node(args.select) is None:
            print(f"--select {args.select}: no such ATen node", file=sys.stderr)
            return 2
        win.sync.select("aten", [args.select])
    if args.tensor:
        win.docks["tensors"].raise_()
        if not win.tensors.select_name(args.tensor):
            print(f"--tensor {args.tensor}: no such tensor", file=sys.stderr)
            return 2
        win.wait_settled()
    if args.search:
        win.find()
        win.search.edit.setText(args.search)
        win.search.run()
        win.search.next()
    if args.panel:
        dock = win.docks.get(args.panel)
        if dock is None:
            print(f"--panel {args.panel}: one of {', '.join(win.docks)}", file=sys.stderr)
            return 2
        dock.show()
        dock.raise_()
    win.wait_settled()
    from PySide6.QtCore import QCoreApplication

    for _ in range(5):
        QCoreApplication.processEvents()
    out = Path(args.screenshot)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not win.grab().save(str(out)):
        print(f"{out}: could not write the PNG", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    win.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
