"""Built-in converter rules, one module per op family. Importing this package registers
them all with :data:`engine.convert.registry.ATEN` (ATen → pnnx) and
:data:`engine.convert.registry.NCNN` (pnnx → ncnn)."""
from __future__ import annotations

from . import structural  # noqa: F401  (registration side effects)

FAMILIES = [structural]
