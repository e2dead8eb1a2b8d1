"""``pt2ncnn`` entry point: argument parsing, subcommand dispatch, error reporting.

Subcommands live in their own modules, ``engine/cli/<name>_cmd.py``, each defining::

    NAME = "inspect"                 # the subcommand
    HELP = "one-line description"
    def add_arguments(parser): ...   # argparse arguments
    def run(args) -> int: ...        # exit code

and are registered by adding the module name to :data:`COMMANDS`. The pnnx-style shorthand
``pt2ncnn MODEL.pt2 key=value ...`` is rewritten to ``pt2ncnn convert MODEL.pt2 key=value ...``
(:data:`SHORTHAND_COMMAND`) when that command is registered.

Exit codes: 0 success; 2 bad input or usage — one line ``error: <file>: <reason>`` on stderr, no
traceback (``--debug`` shows it); 1 an unexpected internal error.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys

from engine.collector import no_cyclic_gc
from engine.errors import PluginError, PT2Error, ScaffoldError

log = logging.getLogger(__name__)

#: Subcommand modules, in the order ``--help`` lists them. Add yours here.
COMMANDS = [
    "engine.cli.inspect_cmd",
    "engine.cli.convert_cmd",
    "engine.cli.coverage_cmd",
    "engine.cli.verify_cmd",
    "engine.cli.scaffold_cmd",
    "engine.cli.generate_cmd",
]
#: The subcommand the ``pt2ncnn MODEL.pt2 key=value ...`` shorthand routes to.
SHORTHAND_COMMAND = "convert"

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage (reported as ``error: <message>``, exit 2)."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that reports usage errors as one line instead of exiting."""

    def error(self, message: str):
        raise UsageError(message)


def add_converters_option(p: argparse.ArgumentParser) -> None:
    """The ``--converters PATH`` option of the commands that convert (repeatable)."""
    p.add_argument("--converters", metavar="FILE.py|DIR", action="append", default=[],
                   help="a converter plug-in file, or a folder of them (every *.py in it, by name); may be "
                        "repeated; plug-in rules override built-ins")


def _load_commands() -> dict:
    mods = {}
    for name in COMMANDS:
        mod = importlib.import_module(name)
        mods[mod.NAME] = mod
    return mods


def build_parser(commands: dict, command: str | None = None) -> argparse.ArgumentParser:
    """The ``pt2ncnn`` parser. ``command``: add only that command's arguments, the one a run will
    parse (None: every command's). Every command stays a choice with its help line, so
    ``pt2ncnn --help`` and the error for an unknown command read the same. The arguments of the
    commands not run were built for nothing: 3.3 M instructions of every run (argparse makes a
    help formatter for each argument to check it), and ``scaffold``'s imported its module."""
    parser = _Parser(prog="pt2ncnn", description="Inspect PyTorch ExportedProgram packages (.pt2) "
                                                 "and convert them to ncnn, without torch.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in commands.values():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show tracebacks and debug logging")
        if command is None or command == mod.NAME:
            mod.add_arguments(p)
    return parser


def _first_positional(argv: list[str]) -> str | None:
    """The command a (rewritten) command line names: its first argument that is not an option
    (``pt2ncnn``'s own options take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def rewrite_shorthand(argv: list[str], commands: dict) -> list[str]:
    """``MODEL.pt2 key=value ...`` → ``convert MODEL.pt2 key=value ...`` (the pnnx style)."""
    first = _first_positional(argv)
    if first is None or first in commands:
        return argv
    if first.endswith(".pt2") or "=" in first:
        if SHORTHAND_COMMAND not in commands:
            raise UsageError(f"'{SHORTHAND_COMMAND}' is not available in this build; "
                             f"try 'pt2ncnn inspect {first}'")
        i = argv.index(first)
        return argv[:i] + [SHORTHAND_COMMAND] + argv[i:]
    return argv


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def error_line(path: str | None, e: BaseException) -> str:
    """``error: <file>: <reason>`` on one line; the file is not repeated when the error's
    member already is the file."""
    text = _one_line(e)
    member = getattr(e, "member", None)
    if isinstance(e, (PluginError, ScaffoldError)):  # about a plug-in file, an op or a node: not the model
        return f"error: {text}"
    if path and member != path and not text.startswith(f"{path}:"):
        text = f"{path}: {text}"
    return f"error: {text}"


def _import_numpy_here() -> None:
    """Import numpy (every command reads tensors with it; loading the commands imports it) from
    this shallow frame rather than deep inside an import chain. CPython 3.11 maps a 16 KB chunk
    of frame stack each time the stack grows past a chunk's end and unmaps it on the way back;
    imported 40-odd frames deep, numpy's typing module crosses that boundary back and forth
    600–1,700 times: a few to 15 ms of CPU."""
    import numpy  # noqa: F401


def main(argv: list[str] | None = None, *, exiting: bool = False) -> int:
    """Run ``pt2ncnn`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code.
    Subcommands name their input file argument ``model`` so errors can name the file.
    ``exiting``: the process ends right after (the console script); a command may then skip
    clean-up that only matters to a caller that goes on (``args.exiting``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    args = None
    try:
        with no_cyclic_gc():  # the commands' modules make ~50k objects that live on
            if exiting:
                _import_numpy_here()
            commands = _load_commands()
            argv = rewrite_shorthand(argv, commands)
            parser = build_parser(commands, _first_positional(argv))
            if exiting:
                gc.freeze()  # no collection walks them, now (the count starts again) or later
        args = parser.parse_args(argv)
        args.exiting = exiting
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_BAD_INPUT
        return int(commands[args.command].run(args) or 0)
    except UsageError as e:
        print(f"error: {_one_line(e)} (see 'pt2ncnn --help')", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PT2Error as e:
        if debug:
            raise
        print(error_line(getattr(args, "model", None), e), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:
        if debug:
            raise
        print(f"error: internal error: {type(e).__name__}: {_one_line(e)} (rerun with --debug)",
              file=sys.stderr)
        return EXIT_INTERNAL


def entry() -> None:
    """The ``pt2ncnn`` console script: :func:`main`, then the process ends without tearing its
    heap down object by object (a tenth of a second after converting a large model; every file
    is closed by then, the streams are flushed here)."""
    # numpy's OpenBLAS starts a thread per core on import, and they spin: about 0.1 s of CPU
    # for nothing here, where no step multiplies large matrices (set it to override)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    rc = main(exiting=True)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more to say
        pass
    os._exit(rc)


if __name__ == "__main__":  # python -m engine.cli.main: run the package's module, whose
    # UsageError the commands raise (this file as __main__ would define a second class)
    from engine.cli.main import entry as _entry

    _entry()
