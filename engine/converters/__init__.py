"""Built-in converter rules, one module per op family (``conv.py``, ``activation.py``...).

Importing this package imports every family module, which registers its rules with
:data:`engine.convert.registry.ATEN` (ATen → pnnx) and :data:`engine.convert.registry.NCNN`
(pnnx → ncnn). Each module's docstring states what it converts.
"""
from __future__ import annotations

import importlib
import pkgutil

#: the family modules, in import (= registration) order
FAMILIES = [importlib.import_module(f"{__name__}.{m.name}")
            for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name) if not m.name.startswith("_")]
