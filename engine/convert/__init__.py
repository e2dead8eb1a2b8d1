"""Conversion: converter registries, the conversion context, plug-ins, and the public
``convert()`` API."""
from __future__ import annotations

from .api import ConversionResult, ConvertOptions, convert
from .context import ConversionContext, Unsupported
from .layout import Link, OpLayout, layout_rule
from .output import script_path
from .registry import (ATEN, CUSTOM, NCNN, CustomLayer, Priority, Registry, RegistryError, aten_converter,
                       ncnn_custom_layer, ncnn_rule)

__all__ = ["ATEN", "CUSTOM", "NCNN", "ConversionContext", "ConversionResult", "ConvertOptions", "CustomLayer",
           "Link", "OpLayout", "Priority", "Registry", "RegistryError", "Unsupported", "aten_converter", "convert",
           "layout_rule", "ncnn_custom_layer",
           "ncnn_rule", "script_path"]
