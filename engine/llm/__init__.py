"""Decoder-only language models: exporting prefill + decode programs into one ``.pt2``
(:func:`export_decoder`, needs torch) and running greedy generation in ncnn
(:mod:`engine.llm.generate`). torch is imported only by the export functions."""
from .cache import CacheLayoutError, check_cache
from .export import export_decoder, export_programs, save_programs
from .manifest import DecoderManifest, read_manifest

__all__ = ["CacheLayoutError", "check_cache", "export_decoder", "export_programs", "save_programs", "DecoderManifest", "read_manifest"]
