"""Typed errors raised by the engine.

Every problem with an input file surfaces as one :class:`PT2FormatError` whose message names
the place (a zip member, a JSON path, a node) and the reason, so the CLI and the GUI can show
one line instead of a traceback. :class:`PT2Error` is the common base class; catch it to handle
anything the engine reports on purpose.
"""
from __future__ import annotations


class PT2Error(Exception):
    """Base class of every error the engine raises on purpose."""


class PT2FormatError(PT2Error):
    """A ``.pt2`` package (or a part of it) cannot be read.

    ``member`` names where the problem is: the file path for container-level problems, a zip
    member (``m/models/model.json``), or a tensor / node name. ``reason`` says what is wrong.
    ``str(e) == f"{member}: {reason}"``.
    """

    def __init__(self, member: str, reason: str):
        self.member = str(member)
        self.reason = str(reason)
        super().__init__(f"{self.member}: {self.reason}")

    def __reduce__(self):  # keep picklable across processes (GUI workers)
        return (type(self), (self.member, self.reason))


class PluginError(PT2Error):
    """A converter plug-in file could not be loaded. ``line`` is the line of the plug-in at
    fault when known; ``str(e) == f"{path}:{line}: {reason}"`` (``f"{path}: {reason}"`` without
    a line)."""

    def __init__(self, path: str, reason: str, line: int | None = None):
        self.path = str(path)
        self.reason = str(reason)
        self.line = line
        super().__init__(f"{self.where}: {self.reason}")

    @property
    def where(self) -> str:
        """``path:line`` (or the path alone)."""
        return self.path if self.line is None else f"{self.path}:{self.line}"

    def __reduce__(self):
        return (type(self), (self.path, self.reason, self.line))


class ConversionError(PT2Error):
    """The conversion pipeline itself failed (a pass raised), as opposed to unsupported
    operators, which are reported as diagnostics. ``str(e)`` names the pass."""


class _PlacedError(PT2Error):
    """An error about a place (a file path, ``path:line``): ``str(e) == f"{place}: {reason}"``."""

    def __init__(self, place: str, reason: str):
        self.place = str(place)
        self.reason = str(reason)
        super().__init__(f"{self.place}: {self.reason}")

    def __reduce__(self):
        return (type(self), (self.place, self.reason))


class WriteError(_PlacedError):
    """Model files could not be written (permission denied, disk full, invalid graph...);
    nothing partial is left behind. ``path`` is the file concerned."""

    @property
    def path(self) -> str:
        return self.place


class ModelFileError(_PlacedError):
    """An ncnn / pnnx model file (``.param``, ``.bin``) cannot be read or does not match its
    layers. ``where`` is ``path`` or ``path:line``."""

    @property
    def where(self) -> str:
        return self.place


class ScaffoldError(_PlacedError):
    """A converter plug-in cannot be written as asked (an unknown overload, no such node, no
    decomposition for it); ``place`` names the overload, node or file."""
