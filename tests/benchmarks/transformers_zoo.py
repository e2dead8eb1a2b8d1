"""Small transformer models for the breadth check (``check_transformers_convert.py``): Hugging Face
``transformers`` families built from their configs and two timm models, every one with seeded
random weights in ``eval()`` mode. Needs the benchmark virtualenv (transformers, timm); never
imported by the test suite.

Each entry of :data:`FAMILIES` builds a :class:`Case`: the module, its example inputs by name
(token ids, an ``attention_mask`` when the model takes one, pixels, audio), which input dims are
the sequence length (exported as ``torch.export.Dim``) and the lengths to run at besides the
exported one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

#: the exported sequence length and the two others the dynamic models also run at
LENGTH, OTHER_LENGTHS = 12, (5, 19)
VOCAB = 96


@dataclass
class Case:
    """One model to export: ``inputs`` in the order of ``forward``'s keyword names."""

    model: torch.nn.Module
    inputs: dict[str, torch.Tensor]
    #: input name → the dim that is the sequence length (None: static model)
    seq_dims: dict[str, int] = field(default_factory=dict)
    #: (min, max) of the dynamic length, and a function making inputs of another length
    seq_range: tuple[int, int] = (2, 32)
    make: Callable[[int], dict[str, torch.Tensor]] | None = None
    #: inputs that carry integer token ids (fed to ncnn as int32, see the README)
    int_inputs: tuple[str, ...] = ()


def token_ids(length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, VOCAB, (1, length), generator=torch.Generator().manual_seed(seed))


def padding_mask(length: int) -> torch.Tensor:
    """A mask that hides the last quarter of the tokens (right padding)."""
    mask = torch.ones(1, length, dtype=torch.long)
    mask[:, length - max(1, length // 4):] = 0
    return mask


def _text(model, with_mask: bool, *, extra=None) -> Case:
    def make(n: int) -> dict[str, torch.Tensor]:
        d = {"input_ids": token_ids(n)}
        if with_mask:
            d["attention_mask"] = padding_mask(n)
        if extra:
            d.update(extra(n))
        return d

    seq = {"input_ids": 1}
    if with_mask:
        seq["attention_mask"] = 1
    return Case(model, make(LENGTH), seq, (2, 32), make, ("input_ids",))


def _seed(fn):
    def build(*args, **kwargs):
        torch.manual_seed(0)
        return fn(*args, **kwargs)
    return build


SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=VOCAB)


def _decoder_config(cls, **kw):
    c = dict(SMALL, max_position_embeddings=64, num_key_value_heads=2, use_cache=False, pad_token_id=0,
             bos_token_id=1, eos_token_id=2)
    c.update(kw)
    return cls(**c)


@_seed
def bert(with_mask):
    import transformers as T
    return _text(T.BertModel(T.BertConfig(**SMALL, max_position_embeddings=64)), with_mask)


@_seed
def distilbert(with_mask):
    import transformers as T
    cfg = T.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64)
    return _text(T.DistilBertModel(cfg), with_mask)


@_seed
def roberta(with_mask):
    import transformers as T
    return _text(T.RobertaModel(T.RobertaConfig(**SMALL, max_position_embeddings=66, pad_token_id=1)), with_mask)


@_seed
def albert(with_mask):
    import transformers as T
    cfg = T.AlbertConfig(**SMALL, embedding_size=16, max_position_embeddings=64)
    return _text(T.AlbertModel(cfg), with_mask)


@_seed
def electra(with_mask):
    import transformers as T
    cfg = T.ElectraConfig(**SMALL, embedding_size=16, max_position_embeddings=64)
    return _text(T.ElectraModel(cfg), with_mask)


@_seed
def gpt2(with_mask):
    import transformers as T
    cfg = T.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, vocab_size=VOCAB, use_cache=False,
                       bos_token_id=1, eos_token_id=2)
    return _text(T.GPT2LMHeadModel(cfg), with_mask)


@_seed
def gpt_neo(with_mask):
    import transformers as T
    cfg = T.GPTNeoConfig(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
                         attention_types=[[["global", "local"], 1]], window_size=8, max_position_embeddings=64,
                         use_cache=False, bos_token_id=1, eos_token_id=2)
    return _text(T.GPTNeoModel(cfg), with_mask)


@_seed
def llama(with_mask):
    import transformers as T
    return _text(T.LlamaModel(_decoder_config(T.LlamaConfig)), with_mask)


@_seed
def mistral(with_mask):
    import transformers as T
    return _text(T.MistralModel(_decoder_config(T.MistralConfig, sliding_window=8)), with_mask)


@_seed
def qwen2(with_mask):
    import transformers as T
    return _text(T.Qwen2Model(_decoder_config(T.Qwen2Config)), with_mask)


@_seed
def qwen3(with_mask):
    import transformers as T
    return _text(T.Qwen3Model(_decoder_config(T.Qwen3Config, head_dim=8)), with_mask)


@_seed
def phi3(with_mask):
    import transformers as T
    return _text(T.Phi3Model(_decoder_config(T.Phi3Config)), with_mask)


@_seed
def gemma(with_mask):
    import transformers as T
    return _text(T.GemmaModel(_decoder_config(T.GemmaConfig, head_dim=8)), with_mask)


@_seed
def t5_encoder(with_mask):
    import transformers as T
    cfg = T.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=VOCAB,
                     relative_attention_num_buckets=8, relative_attention_max_distance=16)
    return _text(T.T5EncoderModel(cfg), with_mask)


@_seed
def bart_encoder(with_mask):
    import transformers as T
    cfg = T.BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
                       decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    return _text(T.BartModel(cfg).get_encoder(), with_mask)


@_seed
def clip_text(with_mask):
    import transformers as T
    cfg = T.CLIPTextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, max_position_embeddings=64, eos_token_id=2)
    return _text(T.CLIPTextModel(cfg), with_mask)


@_seed
def siglip_text(with_mask):
    import transformers as T
    cfg = T.SiglipTextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, max_position_embeddings=64)
    return _text(T.SiglipTextModel(cfg), with_mask)


def _image(model, size: int = 32, name: str = "pixel_values") -> Case:
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))
    return Case(model, {name: x})


VISION = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
              patch_size=8)


@_seed
def vit(with_mask):
    import transformers as T
    return _image(T.ViTModel(T.ViTConfig(**VISION)))


@_seed
def deit(with_mask):
    import transformers as T
    return _image(T.DeiTModel(T.DeiTConfig(**VISION)))


@_seed
def clip_vision(with_mask):
    import transformers as T
    return _image(T.CLIPVisionModel(T.CLIPVisionConfig(**VISION)))


@_seed
def siglip_vision(with_mask):
    import transformers as T
    return _image(T.SiglipVisionModel(T.SiglipVisionConfig(**VISION)))


@_seed
def detr(with_mask):
    import transformers as T
    backbone = T.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                              out_features=["stage2"])
    cfg = T.DetrConfig(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False, d_model=32,
                       encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                       encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_labels=5)
    return _image(T.DetrForObjectDetection(cfg), 64)


def _audio(model, name: str, x: torch.Tensor) -> Case:
    return Case(model, {name: x})


@_seed
def whisper_encoder(with_mask):
    import transformers as T
    cfg = T.WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
                          max_source_positions=16, max_target_positions=16, pad_token_id=0, bos_token_id=1,
                          eos_token_id=2, decoder_start_token_id=1)
    x = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(1))
    return _audio(T.WhisperModel(cfg).get_encoder(), "input_features", x)


def _wav2vec2_like(cls_cfg, cls_model):
    cfg = cls_cfg(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                  num_conv_pos_embedding_groups=4, vocab_size=VOCAB)
    x = torch.randn(1, 400, generator=torch.Generator().manual_seed(1))
    return _audio(cls_model(cfg), "input_values", x)


@_seed
def wav2vec2(with_mask):
    import transformers as T
    return _wav2vec2_like(T.Wav2Vec2Config, T.Wav2Vec2Model)


@_seed
def hubert(with_mask):
    import transformers as T
    return _wav2vec2_like(T.HubertConfig, T.HubertModel)


@_seed
def levit(with_mask):
    import timm
    return _image(timm.create_model("levit_128s", pretrained=False), 224, "x")


@_seed
def edgenext(with_mask):
    import timm
    return _image(timm.create_model("edgenext_xx_small", pretrained=False), 256, "x")


#: family → (builder(with_mask), whether it takes an attention_mask)
FAMILIES: dict[str, tuple[Callable[[bool], Case], bool]] = {
    "BERT": (bert, True), "DistilBERT": (distilbert, True), "RoBERTa": (roberta, True), "ALBERT": (albert, True),
    "ELECTRA": (electra, True), "GPT-2": (gpt2, True), "GPT-Neo": (gpt_neo, True), "LLaMA": (llama, True),
    "Mistral": (mistral, True), "Qwen2": (qwen2, True), "Qwen3": (qwen3, True), "Phi-3": (phi3, True),
    "Gemma": (gemma, True), "T5 encoder": (t5_encoder, True), "BART encoder": (bart_encoder, True),
    "Whisper encoder": (whisper_encoder, False), "Wav2Vec2": (wav2vec2, False), "HuBERT": (hubert, False),
    "ViT": (vit, False), "DeiT": (deit, False), "CLIP text": (clip_text, True), "CLIP vision": (clip_vision, False),
    "SigLIP text": (siglip_text, False), "SigLIP vision": (siglip_vision, False), "DETR": (detr, False),
    "timm LeViT": (levit, False), "timm EdgeNeXt": (edgenext, False),
}
