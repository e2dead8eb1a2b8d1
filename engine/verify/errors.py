"""Errors of the verify feature (all :class:`engine.errors.PT2Error`, so the CLI prints one
line and exits 2)."""
from __future__ import annotations

from ..errors import PT2Error


class VerifyError(PT2Error):
    """Verification cannot run on this input (conversion incomplete, an input file that does not
    fit the model, a program PyTorch cannot run...). ``str(e)`` names the file / input / layer
    and the reason."""


#: How to install what verify needs: ncnn, and torch's CPU build (a plain ``pip install torch``
#: on Linux pulls the multi-GB CUDA build). The tests use the same pinned torch.
INSTALL_COMMAND = "pip install ncnn torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu"


class MissingDependency(VerifyError):
    """torch or ncnn is not installed."""

    def __init__(self, package: str):
        self.package = package
        super().__init__(f"verify needs {package}, which is not installed (install ncnn and the CPU build of "
                         f"torch: {INSTALL_COMMAND})")

    def __reduce__(self):
        return (type(self), (self.package,))


def require(module: str):
    """Import ``module`` (``torch`` or ``ncnn``) or raise :class:`MissingDependency`."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(module) from None


def cancelled_type() -> type:
    """The engine's ``Cancelled`` exception (the GUI's task runner recognizes it)."""
    from .. import convert  # noqa: F401  (engine.passes must be imported through engine.convert)
    from ..passes import Cancelled

    return Cancelled


def check_cancel(cancel, where: str) -> None:
    """Raise ``Cancelled`` when the ``cancel`` callback says so."""
    if cancel is not None and cancel():
        raise cancelled_type()(f"verify cancelled {where}")
