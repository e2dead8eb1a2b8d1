"""Kept for the converter tests that still import ``Fn`` from here (matmul, layer_norm,
attention): the one ``Fn`` lives in :mod:`tests.harness`; import it from there."""
from tests.harness import Fn

__all__ = ["Fn"]
