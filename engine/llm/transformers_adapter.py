"""A Hugging Face causal LM in the flat calling convention of :func:`engine.llm.export_decoder`.

``flat_cache_lm(model)`` wraps a ``transformers`` ``*ForCausalLM`` so that
``wrapper(input_ids, *past) -> (logits, k0, v0, k1, v1, ...)``: the past tensors fill a
``DynamicCache`` layer by layer, the model runs with ``use_cache=True``, and the updated cache
comes back flat. torch and transformers are imported when it is called.
"""
from __future__ import annotations


def flat_cache_lm(model):
    """The wrapper module of ``model`` (a ``transformers`` causal LM, put in ``eval()`` mode)."""
    import inspect

    import torch
    from transformers import DynamicCache

    class FlatCacheLM(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm.eval()
            # transformers ≥ 5.24 names it ``cache``; earlier versions ``past_key_values``
            self.cache_arg = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"

        def forward(self, input_ids, *past):
            cache = DynamicCache(config=self.lm.config)
            for i in range(len(past) // 2):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.lm(input_ids=input_ids, use_cache=True, **{self.cache_arg: cache})
            flat = [t for layer in cache.layers for t in (layer.keys, layer.values)]  # updated in place
            return (out.logits, *flat)

    return FlatCacheLM(model)
