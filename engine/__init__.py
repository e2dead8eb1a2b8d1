"""pt2ncnn engine: read PyTorch ExportedProgram packages (``.pt2``) without torch and convert
them to ncnn.

Public reader API::

    import engine
    with engine.load("model.pt2") as pkg:      # engine.Package
        ep = pkg.model                          # engine.ExportedProgram
        ep.signature.user_inputs, ep.nodes, ep.tensor("conv.weight")

Every problem with an input file raises :class:`engine.PT2FormatError` (a :class:`PT2Error`).
"""
from engine.errors import PT2Error, PT2FormatError
from engine.reader.archive import MemberInfo
from engine.reader.package import ExportedProgram, Package, load

__all__ = ["load", "Package", "ExportedProgram", "MemberInfo", "PT2Error", "PT2FormatError"]
