"""pt2ncnn engine: read PyTorch ExportedProgram packages (``.pt2``) without torch and convert
them to ncnn.

Public API::

    import engine
    with engine.load("model.pt2") as pkg:      # engine.Package
        ep = pkg.model                          # engine.ExportedProgram
        ep.signature.user_inputs, ep.nodes, ep.tensor("conv.weight")

    from engine.convert import convert, ConvertOptions
    result = convert("model.pt2", ConvertOptions(fp16=True))
    result.ok, result.diagnostics, result.records          # problems, pass snapshots/diffs
    result.write_all("out/", "model")                      # .ncnn.param/.bin + .pnnx.param/.bin

    from engine.verify import verify                       # needs torch + ncnn (the verify extra)
    report = verify("model.pt2")

Every problem with an input file raises :class:`engine.PT2FormatError` (a :class:`PT2Error`).
The conversion and verification parts are imported on first use, so ``import engine`` stays
cheap for inspection.
"""
from engine.collector import no_cyclic_gc

with no_cyclic_gc():  # the reader's modules (and numpy) make ~30k objects that live on: 16 needless collections
    from engine.errors import PT2Error, PT2FormatError
    from engine.reader.archive import MemberInfo
    from engine.reader.package import ExportedProgram, Package, load

#: names re-exported from subpackages on first use (``engine.convert`` and ``engine.verify``
#: are the subpackages themselves: ``from engine.convert import convert``)
_LAZY = {
    "ConvertOptions": ("engine.convert", "ConvertOptions"),
    "ConversionResult": ("engine.convert", "ConversionResult"),
    "VerifyOptions": ("engine.verify", "VerifyOptions"),
    "build_graph": ("engine.build", "build_graph"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


__all__ = ["load", "Package", "ExportedProgram", "MemberInfo", "PT2Error", "PT2FormatError", *_LAZY]
