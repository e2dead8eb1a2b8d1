"""ATen graph → IR: :func:`build_graph` (conventions in :mod:`engine.build.builder`), and the
ATen schema table it fills omitted defaults from (:mod:`engine.build.schemas`)."""
from . import schemas
from .builder import build_graph

__all__ = ["build_graph", "schemas"]
