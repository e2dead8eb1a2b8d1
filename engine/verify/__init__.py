"""Per-layer numerical comparison of a converted model with PyTorch: find the first ncnn layer
that diverges, and the ATen nodes, module and source line it came from.

Public API (torch and ncnn are imported only when :func:`verify` runs; :data:`INSTALL_COMMAND`
installs them, torch as its CPU build)::

    from engine.verify import verify, VerifyOptions
    result = verify("model.pt2", VerifyOptions(fp16=False), progress=cb, cancel=is_cancelled)
    result.ok                    # every model output within tolerance
    result.first_divergent       # LayerRecord of the first layer wrong by itself, or None
    for rec in result.layers:    # LayerRecord per ncnn layer, topological order
        rec.layer, rec.type, rec.aten_nodes, rec.status, rec.max_abs, rec.max_rel, rec.cosine
    result.to_dict()             # the ``pt2ncnn verify --json`` document

A ``cancel()`` returning True stops the run with :class:`Cancelled` (the engine's, also raised by
the conversion's pass manager).
"""
from .. import convert as _convert  # noqa: F401  (engine.passes must be imported through engine.convert)
from ..passes import Cancelled
from .api import DEFAULT_TOLERANCE, VerifyOptions, verify
from .errors import INSTALL_COMMAND, MissingDependency, VerifyError
from .metrics import ErrorStats, compare
from .result import BlobRecord, LayerRecord, OutputRecord, VerifyResult

__all__ = ["DEFAULT_TOLERANCE", "INSTALL_COMMAND", "BlobRecord", "Cancelled", "ErrorStats", "LayerRecord", "MissingDependency", "OutputRecord",
           "VerifyError", "VerifyOptions", "VerifyResult", "compare", "verify"]
