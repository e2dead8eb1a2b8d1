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

from dataclasses import dataclass, field, replace
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


def _decoder(prefix: str, **config):
    """A decoder family whose model and config are ``transformers.<prefix>Model`` /
    ``<prefix>Config`` with :func:`_decoder_config`'s small sizes (and ``config``)."""
    @_seed
    def build(with_mask):
        import transformers as T
        return _text(getattr(T, f"{prefix}Model")(_decoder_config(getattr(T, f"{prefix}Config"), **config)), with_mask)
    return build


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


llama = _decoder("Llama")


mistral = _decoder("Mistral", sliding_window=8)


qwen2 = _decoder("Qwen2")


qwen3 = _decoder("Qwen3", head_dim=8)


phi3 = _decoder("Phi3")


gemma = _decoder("Gemma", head_dim=8)


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


@_seed
def opt(with_mask):
    import transformers as T
    cfg = T.OPTConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
                      max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=0, bos_token_id=1,
                      eos_token_id=2, use_cache=False)
    return _text(T.OPTModel(cfg), with_mask)


@_seed
def bloom(with_mask):
    import transformers as T
    cfg = T.BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4, use_cache=False, pad_token_id=0)
    return _text(T.BloomModel(cfg), with_mask)


FALCON = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
              use_cache=False, pad_token_id=0)


@_seed
def falcon(with_mask):
    import transformers as T
    return _text(T.FalconModel(T.FalconConfig(**FALCON)), with_mask)


@_seed
def falcon_alibi(with_mask):
    """Falcon's new decoder architecture (grouped KV heads) with ALiBi instead of rotary positions."""
    import transformers as T
    cfg = T.FalconConfig(**FALCON, num_kv_heads=2, new_decoder_architecture=True, alibi=True)
    return _text(T.FalconModel(cfg), with_mask)


@_seed
def gpt_j(with_mask):
    import transformers as T
    cfg = T.GPTJConfig(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
                       use_cache=False, bos_token_id=1, eos_token_id=2)
    return _text(T.GPTJModel(cfg), with_mask)


@_seed
def gpt_neox(with_mask):
    import transformers as T
    cfg = T.GPTNeoXConfig(**SMALL, max_position_embeddings=64, rotary_pct=0.25, use_cache=False, bos_token_id=1,
                          eos_token_id=2)
    return _text(T.GPTNeoXModel(cfg), with_mask)


@_seed
def gpt_bigcode(with_mask):
    import transformers as T
    cfg = T.GPTBigCodeConfig(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, multi_query=True,
                             use_cache=False)
    return _text(T.GPTBigCodeModel(cfg), with_mask)


@_seed
def codegen(with_mask):
    import transformers as T
    cfg = T.CodeGenConfig(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, n_ctx=64, rotary_dim=4,
                          use_cache=False)
    return _text(T.CodeGenModel(cfg), with_mask)


stablelm = _decoder("StableLm", partial_rotary_factor=0.25)


olmo = _decoder("Olmo")


olmo2 = _decoder("Olmo2")


phi = _decoder("Phi", partial_rotary_factor=0.5)


cohere = _decoder("Cohere")


granite = _decoder("Granite")


@_seed
def gemma2(with_mask):
    import transformers as T
    cfg = _decoder_config(T.Gemma2Config, head_dim=8, sliding_window=8, attn_logit_softcapping=50.0,
                          final_logit_softcapping=30.0)
    return _text(T.Gemma2Model(cfg), with_mask)


starcoder2 = _decoder("Starcoder2", sliding_window=8)


def _batched_experts(model):
    """Mixture-of-experts models with the experts as batched matmuls over the routed tokens' weights. transformers'
    default ("grouped_mm") exports through its own ``grouped_mm_fallback`` op (with histc/sort bookkeeping) and
    "eager" (a loop over the experts that were hit) does not export (a guard on a data-dependent count)."""
    model.set_experts_implementation("batched_mm")
    return model


def _moe(prefix: str, **config):
    """A mixture-of-experts decoder ``transformers.<prefix>Model`` with :func:`_decoder_config`'s
    small sizes (and ``config``), its experts batched (:func:`_batched_experts`)."""
    @_seed
    def build(with_mask):
        import transformers as T
        cfg = _decoder_config(getattr(T, f"{prefix}Config"), **config)
        return _text(_batched_experts(getattr(T, f"{prefix}Model")(cfg)), with_mask)
    return build


mixtral = _moe("Mixtral", num_local_experts=4, num_experts_per_tok=2)


@_seed
def qwen2_moe(with_mask):
    import transformers as T
    cfg = _decoder_config(T.Qwen2MoeConfig, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                          shared_expert_intermediate_size=32, decoder_sparse_step=1)
    return _text(_batched_experts(T.Qwen2MoeModel(cfg)), with_mask)


@_seed
def qwen3_moe(with_mask):
    import transformers as T
    cfg = _decoder_config(T.Qwen3MoeConfig, head_dim=8, num_experts=4, num_experts_per_tok=2,
                          moe_intermediate_size=16, decoder_sparse_step=1)
    return _text(_batched_experts(T.Qwen3MoeModel(cfg)), with_mask)


@_seed
def deepseek_v3(with_mask):
    import transformers as T
    cfg = _decoder_config(T.DeepseekV3Config, num_key_value_heads=4, moe_intermediate_size=16, n_shared_experts=1,
                          n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=1, q_lora_rank=16,
                          kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, n_group=1,
                          topk_group=1)
    return _text(_batched_experts(T.DeepseekV3Model(cfg)), with_mask)


@_seed
def mpnet(with_mask):
    import transformers as T
    return _text(T.MPNetModel(T.MPNetConfig(**SMALL, max_position_embeddings=66, pad_token_id=1)), with_mask)


@_seed
def xlm_roberta(with_mask):
    import transformers as T
    return _text(T.XLMRobertaModel(T.XLMRobertaConfig(**SMALL, max_position_embeddings=66, pad_token_id=1)),
                 with_mask)


@_seed
def deberta_v2(with_mask):
    import transformers as T
    cfg = T.DebertaV2Config(**SMALL, max_position_embeddings=64, relative_attention=True, position_buckets=16,
                            pos_att_type=["p2c", "c2p"], max_relative_positions=-1, pad_token_id=0)
    return _text(T.DebertaV2Model(cfg), with_mask)


@_seed
def mobilebert(with_mask):
    import transformers as T
    cfg = T.MobileBertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16,
                             max_position_embeddings=64, num_feedforward_networks=2)
    case = _text(T.MobileBertModel(cfg), with_mask)
    case.seq_range = (3, 32)  # its trigram embedding guards the length against 2
    return case


@_seed
def convbert(with_mask):
    import transformers as T
    cfg = T.ConvBertConfig(**SMALL, embedding_size=32, head_ratio=2, conv_kernel_size=3, num_groups=1,
                           max_position_embeddings=64)
    return _text(T.ConvBertModel(cfg), with_mask)


@_seed
def fnet(with_mask):
    import transformers as T
    cfg = T.FNetConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                       max_position_embeddings=64, use_tpu_fourier_optimizations=False)
    return _text(T.FNetModel(cfg), with_mask)


@_seed
def esm(with_mask):
    import transformers as T
    cfg = T.EsmConfig(**SMALL, max_position_embeddings=64, position_embedding_type="rotary", pad_token_id=1,
                      mask_token_id=2)
    return _text(T.EsmModel(cfg, add_pooling_layer=False), with_mask)


@_seed
def funnel(with_mask):
    import transformers as T
    cfg = T.FunnelConfig(vocab_size=VOCAB, d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1],
                         num_decoder_layers=1)
    case = _text(T.FunnelBaseModel(cfg), with_mask)
    return replace(case, seq_dims={}, make=None)  # static: the pooling specializes the length


#: the encoder-decoder text models: BART's config names, 2 + 2 layers
ENC_DEC = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
               pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, use_cache=False)


def _seq2seq(model, with_mask: bool) -> Case:
    """Encoder token ids (and mask) of the sequence length, and 4 decoder token ids whatever the length."""
    case = _text(model, with_mask, extra=lambda n: {"decoder_input_ids": token_ids(4, seed=2)})
    case.int_inputs += ("decoder_input_ids",)
    return case


def _enc_dec(prefix: str):
    """An encoder-decoder family: ``transformers.<prefix>Model`` of ``<prefix>Config(**ENC_DEC)``."""
    @_seed
    def build(with_mask):
        import transformers as T
        return _seq2seq(getattr(T, f"{prefix}Model")(getattr(T, f"{prefix}Config")(**ENC_DEC)), with_mask)
    return build


@_seed
def t5(with_mask):
    import transformers as T
    cfg = T.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=VOCAB,
                     relative_attention_num_buckets=8, relative_attention_max_distance=16, decoder_start_token_id=0,
                     use_cache=False)
    return _seq2seq(T.T5Model(cfg), with_mask)


bart = _enc_dec("Bart")


marian = _enc_dec("Marian")


pegasus = _enc_dec("Pegasus")


mbart = _enc_dec("MBart")


m2m100 = _enc_dec("M2M100")


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


def _detr_like(prefix: str, stages=("stage2",), **config) -> Case:
    """``transformers.<prefix>ForObjectDetection`` on a two-stage ResNet, one encoder and one
    decoder layer (``config`` overrides), on a 64×64 image."""
    import transformers as T
    backbone = T.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                              out_features=list(stages))
    c = dict(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False, d_model=32,
             encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_labels=5)
    c.update(config)
    return _image(getattr(T, f"{prefix}ForObjectDetection")(getattr(T, f"{prefix}Config")(**c)), 64)


@_seed
def detr(with_mask):
    return _detr_like("Detr")


def _lively(model):
    """PyTorch's default init for the convolutions and random BatchNorm statistics, so activations do not vanish
    through deep conv stacks (with HF's std=0.02 init MobileViT's output is exactly 0)."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d)):
                mod.reset_parameters()
            elif isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and mod.running_mean is not None:
                n = mod.num_features
                mod.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                if mod.weight is not None:
                    mod.weight.copy_(torch.rand(n, generator=g) + 0.5)
                    mod.bias.copy_(torch.randn(n, generator=g) * 0.1)
    return model


def _vision(prefix: str, size: int = 32, **config) -> Case:
    """``transformers.<prefix>Model(<prefix>Config(**config))`` on a ``size``² image."""
    import transformers as T
    return _image(_lively(getattr(T, f"{prefix}Model")(getattr(T, f"{prefix}Config")(**config))), size)


def _swin_like(prefix: str) -> Case:
    """``transformers.<prefix>Model``: two stages of one block, windows of 4 on a 32×32 image."""
    import transformers as T
    cfg = getattr(T, f"{prefix}Config")(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                        window_size=4)
    return _image(_lively(getattr(T, f"{prefix}Model")(cfg)))


@_seed
def swin(with_mask):
    return _swin_like("Swin")


@_seed
def focalnet(with_mask):
    import transformers as T
    cfg = T.FocalNetConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], focal_levels=[2, 2],
                           focal_windows=[3, 3])
    return _image(_lively(T.FocalNetModel(cfg)))


@_seed
def beit(with_mask):
    import transformers as T
    return _image(_lively(T.BeitModel(T.BeitConfig(**VISION, use_relative_position_bias=True))))


@_seed
def data2vec_vision(with_mask):
    import transformers as T
    cfg = T.Data2VecVisionConfig(**VISION, use_relative_position_bias=True)
    return _image(_lively(T.Data2VecVisionModel(cfg)))


@_seed
def dinov2(with_mask):
    import transformers as T
    cfg = T.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=32,
                         patch_size=8)
    return _image(_lively(T.Dinov2Model(cfg)))


@_seed
def yolos(with_mask):
    import transformers as T
    cfg = T.YolosConfig(**dict(VISION, image_size=[32, 32]), num_detection_tokens=5)
    return _image(_lively(T.YolosModel(cfg, add_pooling_layer=False)))


@_seed
def mobilevit(with_mask):
    import transformers as T
    cfg = T.MobileViTConfig(image_size=64, patch_size=2, hidden_sizes=[16, 24, 32],
                            neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32], num_attention_heads=2)
    return _image(_lively(T.MobileViTModel(cfg)), 64)


@_seed
def segformer(with_mask):
    import transformers as T
    cfg = T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                            patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                            decoder_hidden_size=32)
    return _image(_lively(T.SegformerModel(cfg)), 64)


@_seed
def pvt_v2(with_mask):
    import transformers as T
    cfg = T.PvtV2Config(image_size=64, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                        patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2])
    return _image(_lively(T.PvtV2Model(cfg)), 64)


@_seed
def convnext(with_mask):
    import transformers as T
    cfg = T.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, image_size=32)
    return _image(_lively(T.ConvNextModel(cfg)))


@_seed
def convnext_v2(with_mask):
    import transformers as T
    cfg = T.ConvNextV2Config(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)
    return _image(_lively(T.ConvNextV2Model(cfg)))


@_seed
def resnet(with_mask):
    import transformers as T
    cfg = T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])
    return _image(_lively(T.ResNetModel(cfg)))


@_seed
def regnet(with_mask):
    import transformers as T
    cfg = T.RegNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], groups_width=8)
    return _image(_lively(T.RegNetModel(cfg)))


@_seed
def efficientnet(with_mask):
    import transformers as T
    cfg = T.EfficientNetConfig(image_size=32, width_coefficient=0.25, depth_coefficient=0.2, hidden_dim=320)
    return _image(_lively(T.EfficientNetModel(cfg)))


@_seed
def mobilenet_v2(with_mask):
    import transformers as T
    return _image(_lively(T.MobileNetV2Model(T.MobileNetV2Config(image_size=32, depth_multiplier=0.25))))


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


def _wav2vec2_like(cls_cfg, cls_model, **kw):
    cfg = cls_cfg(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                  num_conv_pos_embedding_groups=4, vocab_size=VOCAB, **kw)
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
def wav2vec2_conformer(with_mask):
    import transformers as T
    return _wav2vec2_like(T.Wav2Vec2ConformerConfig, T.Wav2Vec2ConformerModel, conv_depthwise_kernel_size=3,
                          position_embeddings_type="relative")


@_seed
def wav2vec2_conformer_rotary(with_mask):
    import transformers as T
    return _wav2vec2_like(T.Wav2Vec2ConformerConfig, T.Wav2Vec2ConformerModel, conv_depthwise_kernel_size=3,
                          position_embeddings_type="rotary")


@_seed
def sew(with_mask):
    import transformers as T
    return _wav2vec2_like(T.SEWConfig, T.SEWModel, squeeze_factor=2)


@_seed
def wavlm(with_mask):
    import transformers as T
    return _wav2vec2_like(T.WavLMConfig, T.WavLMModel, num_buckets=16, max_bucket_distance=64)


@_seed
def data2vec_audio(with_mask):
    import transformers as T
    return _wav2vec2_like(T.Data2VecAudioConfig, T.Data2VecAudioModel, conv_pos_kernel_size=5)


@_seed
def whisper(with_mask):
    """The whole encoder-decoder: log-mel features and 4 decoder token ids."""
    import transformers as T
    c = {k: v for k, v in ENC_DEC.items() if k != "max_position_embeddings"}
    cfg = T.WhisperConfig(**c, num_mel_bins=16, max_source_positions=16, max_target_positions=16)
    x = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(1))
    case = _audio(T.WhisperModel(cfg), "input_features", x)
    case.inputs["decoder_input_ids"] = token_ids(4, seed=2)
    case.int_inputs = ("decoder_input_ids",)
    return case


@_seed
def speech2text_encoder(with_mask):
    import transformers as T
    cfg = T.Speech2TextConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=1,
                              encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                              decoder_ffn_dim=64, input_feat_per_channel=16, conv_channels=32,
                              max_source_positions=64, max_target_positions=64)
    x = torch.randn(1, 40, 16, generator=torch.Generator().manual_seed(1))
    return _audio(T.Speech2TextModel(cfg).get_encoder(), "input_features", x)


@_seed
def ast(with_mask):
    import transformers as T
    cfg = T.ASTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                      patch_size=16, frequency_stride=10, time_stride=10, max_length=64, num_mel_bins=32)
    x = torch.randn(1, 64, 32, generator=torch.Generator().manual_seed(1))
    return _audio(T.ASTModel(cfg), "input_values", x)


@_seed
def levit(with_mask):
    import timm
    return _image(timm.create_model("levit_128s", pretrained=False), 224, "x")


@_seed
def edgenext(with_mask):
    import timm
    return _image(timm.create_model("edgenext_xx_small", pretrained=False), 256, "x")


# ----------------------------------------------------------------------------- the 2026-12-05 sweep
# dense prediction (depth, super-resolution, pose, segmentation heads), newer backbones and text
# models, state-space and recurrent models, time series: families nobody had tried here


@_seed
def dpt(with_mask):
    import transformers as T
    cfg = T.DPTConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64, image_size=32,
                      patch_size=8, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 16, 16, 32],
                      fusion_hidden_size=16, head_in_index=-1)
    return _image(_lively(T.DPTForDepthEstimation(cfg)))


@_seed
def depth_anything(with_mask):
    import transformers as T
    backbone = T.Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, mlp_ratio=2, image_size=28,
                              patch_size=14, out_indices=[1, 2, 3, 4], reshape_hidden_states=False,
                              apply_layernorm=True)
    cfg = T.DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=32, patch_size=14,
                                neck_hidden_sizes=[8, 16, 16, 32], fusion_hidden_size=16, head_hidden_size=8)
    model = _lively(T.DepthAnythingForDepthEstimation(cfg))
    with torch.no_grad():  # the head ends in a ReLU, which a random head leaves at 0 everywhere
        model.head.conv3.bias.fill_(1.0)
    return _image(model, 28)


@_seed
def glpn(with_mask):
    import transformers as T
    cfg = T.GLPNConfig(num_encoder_blocks=4, depths=[1, 1, 1, 1], sr_ratios=[8, 4, 2, 1], hidden_sizes=[8, 16, 32, 64],
                       num_attention_heads=[1, 1, 2, 2], mlp_ratios=[2, 2, 2, 2], decoder_hidden_size=16,
                       head_in_index=-1)
    return _image(_lively(T.GLPNForDepthEstimation(cfg)), 64)


@_seed
def swin2sr(with_mask):
    import transformers as T
    cfg = T.Swin2SRConfig(image_size=16, patch_size=1, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
                          upscale=2, upsampler="pixelshuffle")
    return _image(_lively(T.Swin2SRForImageSuperResolution(cfg)), 16)


@_seed
def vitpose(with_mask):
    import transformers as T
    backbone = T.VitPoseBackboneConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                                       image_size=[64, 48], patch_size=[16, 16], out_indices=[2])
    model = _lively(T.VitPoseForPoseEstimation(T.VitPoseConfig(backbone_config=backbone, num_labels=5)))
    x = torch.randn(1, 3, 64, 48, generator=torch.Generator().manual_seed(1))
    return Case(model, {"pixel_values": x})


@_seed
def upernet(with_mask):
    import transformers as T
    backbone = T.ConvNextConfig(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                                out_features=["stage1", "stage2", "stage3", "stage4"])
    cfg = T.UperNetConfig(backbone_config=backbone, hidden_size=16, num_labels=3, use_auxiliary_head=False)
    return _image(_lively(T.UperNetForSemanticSegmentation(cfg)), 64)


@_seed
def sam_vision(with_mask):
    import transformers as T
    cfg = T.SamVisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_dim=64, image_size=64,
                            patch_size=8, output_channels=16, window_size=4, global_attn_indexes=[1])
    return _image(_lively(T.SamVisionModel(cfg)), 64)


@_seed
def hiera(with_mask):
    import transformers as T
    cfg = T.HieraConfig(embed_dim=16, image_size=[64, 64], patch_size=[7, 7], patch_stride=[4, 4],
                        patch_padding=[3, 3], depths=[1, 1, 1, 1], num_heads=[1, 2, 2, 4],
                        masked_unit_size=[8, 8], query_stride=[2, 2])
    return _image(_lively(T.HieraModel(cfg)), 64)


@_seed
def dinov2_registers(with_mask):
    import transformers as T
    cfg = T.Dinov2WithRegistersConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                                      image_size=32, patch_size=8, num_register_tokens=2)
    return _image(_lively(T.Dinov2WithRegistersModel(cfg)))


@_seed
def dinov3_vit(with_mask):
    import transformers as T
    cfg = T.DINOv3ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                            image_size=32, patch_size=8, num_register_tokens=2)
    return _image(_lively(T.DINOv3ViTModel(cfg)))


@_seed
def mobilevit_v2(with_mask):
    import transformers as T
    cfg = T.MobileViTV2Config(image_size=64, width_multiplier=0.25)
    return _image(_lively(T.MobileViTV2Model(cfg)), 64)


@_seed
def cvt(with_mask):
    import transformers as T
    three = lambda *v: list(v)  # noqa: E731  (one value per stage; HF indexes stage k's drop-path rates by k: depth k + 1 at least)
    cfg = T.CvtConfig(embed_dim=three(16, 32, 32), num_heads=three(1, 2, 2), depth=three(1, 2, 3),
                      patch_sizes=three(7, 3, 3), patch_stride=three(4, 2, 2), patch_padding=three(2, 1, 1),
                      cls_token=three(False, False, True))
    return _image(_lively(T.CvtModel(cfg)), 64)


@_seed
def poolformer(with_mask):
    import transformers as T
    cfg = T.PoolFormerConfig(hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1], image_size=64)
    return _image(_lively(T.PoolFormerModel(cfg)), 64)


@_seed
def bit(with_mask):
    import transformers as T
    cfg = T.BitConfig(embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1], layer_type="preactivation", num_groups=4)
    return _image(_lively(T.BitModel(cfg)), 64)


@_seed
def swiftformer(with_mask):
    return _vision("SwiftFormer", 64, depths=[1, 1, 1, 1], embed_dims=[16, 16, 32, 32])


@_seed
def textnet(with_mask):
    import transformers as T
    return _image(_lively(T.TextNetModel(T.TextNetConfig())), 64)


@_seed
def modernbert(with_mask):
    import transformers as T
    cfg = T.ModernBertConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                             num_attention_heads=4, global_attn_every_n_layers=3, local_attention=8,
                             max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                             cls_token_id=1, sep_token_id=2)
    return _text(T.ModernBertModel(cfg), with_mask)


@_seed
def roformer(with_mask):
    import transformers as T
    return _text(T.RoFormerModel(T.RoFormerConfig(**SMALL, max_position_embeddings=64)), with_mask)


@_seed
def squeezebert(with_mask):
    import transformers as T
    cfg = T.SqueezeBertConfig(**SMALL, embedding_size=32, max_position_embeddings=64, q_groups=2, k_groups=2,
                              v_groups=2, post_attention_groups=2, intermediate_groups=2, output_groups=2)
    return _text(T.SqueezeBertModel(cfg), with_mask)


gemma3 = _decoder("Gemma3Text", head_dim=8, sliding_window=8, layer_types=["sliding_attention", "full_attention"])


glm4 = _decoder("Glm4", head_dim=8)


olmo3 = _decoder("Olmo3", sliding_window=8, layer_types=["sliding_attention", "full_attention"])


@_seed
def lfm2(with_mask):
    import transformers as T
    cfg = T.Lfm2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, conv_L_cache=3,
                       layer_types=["conv", "full_attention"], use_cache=False, pad_token_id=0, bos_token_id=1,
                       eos_token_id=2)
    return _text(T.Lfm2Model(cfg), with_mask)


@_seed
def mamba(with_mask):
    import transformers as T
    cfg = T.MambaConfig(vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4,
                        use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    # its scan (no CUDA kernels here) is a Python loop over the tokens: static length only
    return Case(T.MambaModel(cfg), {"input_ids": token_ids(LENGTH)}, int_inputs=("input_ids",))


@_seed
def patchtst(with_mask):
    import transformers as T
    cfg = T.PatchTSTConfig(num_input_channels=3, context_length=32, patch_length=8, patch_stride=8, d_model=16,
                           num_hidden_layers=2, num_attention_heads=2, ffn_dim=32, prediction_length=8)
    x = torch.randn(1, 32, 3, generator=torch.Generator().manual_seed(1))
    return Case(T.PatchTSTForPrediction(cfg), {"past_values": x})


@_seed
def patchtsmixer(with_mask):
    import transformers as T
    cfg = T.PatchTSMixerConfig(num_input_channels=3, context_length=32, patch_length=8, patch_stride=8, d_model=16,
                               num_layers=2, prediction_length=8)
    x = torch.randn(1, 32, 3, generator=torch.Generator().manual_seed(1))
    return Case(T.PatchTSMixerForPrediction(cfg), {"past_values": x})


@_seed
def dac_encoder(with_mask):
    """The Descript audio codec's encoder: strided 1-D convolutions and Snake activations
    (``x + sin(αx)² / α``). (EnCodec's encoder does not export: its padding is computed from
    a tensor value.)"""
    import transformers as T
    cfg = T.DacConfig(encoder_hidden_size=8, downsampling_ratios=[2, 4], decoder_hidden_size=16, n_codebooks=2,
                      codebook_size=16, codebook_dim=4, hidden_size=32)
    x = torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(1))
    return _audio(T.DacModel(cfg).encoder, "hidden_state", x)


@_seed
def unispeech(with_mask):
    import transformers as T
    return _wav2vec2_like(T.UniSpeechConfig, T.UniSpeechModel)


@_seed
def moonshine_encoder(with_mask):
    import transformers as T
    cfg = T.MoonshineConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, encoder_num_hidden_layers=2,
                            decoder_num_hidden_layers=1, encoder_num_attention_heads=4,
                            decoder_num_attention_heads=4, max_position_embeddings=64, pad_token_id=0,
                            bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    x = torch.randn(1, 2000, generator=torch.Generator().manual_seed(1))
    return _audio(T.MoonshineModel(cfg).get_encoder(), "input_values", x)


@_seed
def segformer_seg(with_mask):
    import transformers as T
    cfg = T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                            patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                            decoder_hidden_size=32, num_labels=4)
    return _image(_lively(T.SegformerForSemanticSegmentation(cfg)), 64)


@_seed
def mask2former(with_mask):
    """Mask2Former on a small Swin: multi-scale deformable attention (``grid_sample`` of each
    level) in the pixel decoder, masked attention in the transformer decoder."""
    import transformers as T
    backbone = T.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2],
                            window_size=2, out_features=["stage1", "stage2", "stage3", "stage4"])
    cfg = T.Mask2FormerConfig(backbone_config=backbone, feature_size=32, mask_feature_size=32, hidden_dim=32,
                              encoder_feedforward_dim=32, encoder_layers=1, decoder_layers=2, num_attention_heads=2,
                              dim_feedforward=32, num_queries=5, num_labels=3)
    return _image(_lively(T.Mask2FormerModel(cfg)), 64)  # the head's loss needs scipy at init


@_seed
def maskformer(with_mask):
    import transformers as T
    backbone = T.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2],
                            window_size=2, out_features=["stage1", "stage2", "stage3", "stage4"])
    decoder = T.DetrConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=5)
    cfg = T.MaskFormerConfig(backbone_config=backbone, decoder_config=decoder, fpn_feature_size=32,
                             mask_feature_size=32, num_labels=3)
    return _image(_lively(T.MaskFormerModel(cfg)), 64)  # the head's loss needs scipy at init


@_seed
def owlvit_vision(with_mask):
    import transformers as T
    cfg = T.OwlViTVisionConfig(**{k: v for k, v in VISION.items()})
    return _image(T.OwlViTVisionModel(cfg))


@_seed
def vitmatte(with_mask):
    """ViTMatte: an image and its trimap (4 channels) through a ViTDet backbone and a
    detail-capture decoder."""
    import transformers as T
    backbone = T.VitDetConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=32,
                              patch_size=16, num_channels=4, out_features=["stage2"])
    cfg = T.VitMatteConfig(backbone_config=backbone, hidden_size=32, convstream_hidden_sizes=[8, 16, 16],
                           fusion_hidden_sizes=[16, 16, 8, 8])
    x = torch.randn(1, 4, 32, 32, generator=torch.Generator().manual_seed(1))
    return Case(_lively(T.VitMatteForImageMatting(cfg)), {"pixel_values": x})


@_seed
def mobilenet_v1(with_mask):
    import transformers as T
    return _image(_lively(T.MobileNetV1Model(T.MobileNetV1Config(image_size=32, depth_multiplier=0.25))))


@_seed
def levit_hf(with_mask):
    import transformers as T
    cfg = T.LevitConfig(image_size=64, hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3], depths=[1, 1, 1],
                        key_dim=[8, 8, 8])
    return _image(_lively(T.LevitModel(cfg)), 64)


@_seed
def pvt(with_mask):
    import transformers as T
    cfg = T.PvtConfig(image_size=64, num_encoder_blocks=2, depths=[1, 1], sequence_reduction_ratios=[2, 1],
                      hidden_sizes=[16, 32], patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2],
                      mlp_ratios=[2, 2])
    return _image(_lively(T.PvtModel(cfg)), 64)


@_seed
def ijepa(with_mask):
    import transformers as T
    return _image(T.IJepaModel(T.IJepaConfig(**VISION)))


@_seed
def canine(with_mask):
    """CANINE: character-level; hashes code points into several embeddings, downsamples the
    characters with a strided convolution and upsamples them back."""
    import transformers as T
    cfg = T.CanineConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                         max_position_embeddings=64, num_hash_buckets=97, num_hash_functions=2,
                         downsampling_rate=2, local_transformer_stride=8)
    case = _text(T.CanineModel(cfg), with_mask)
    case.make = None  # torch.export cannot keep its length dynamic (its downsampling's guards): static only
    return case


granite_moe = _moe("GraniteMoe", num_local_experts=4, num_experts_per_tok=2)


@_seed
def recurrent_gemma(with_mask):
    import transformers as T
    cfg = T.RecurrentGemmaConfig(num_hidden_layers=3, vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                 num_attention_heads=4, num_key_value_heads=1, lru_width=32, attention_window_size=8,
                                 conv1d_width=4, block_types=["recurrent", "recurrent", "attention"], use_cache=False,
                                 pad_token_id=0, bos_token_id=1, eos_token_id=2)
    case = _text(T.RecurrentGemmaModel(cfg), with_mask)
    case.make = None  # its recurrence runs a Python loop over the tokens: static length only
    return case


@_seed
def mamba2(with_mask):
    import transformers as T
    cfg = T.Mamba2Config(num_heads=4, head_dim=16, vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2,
                         expand=2, conv_kernel=4, n_groups=1, chunk_size=4, use_cache=False, pad_token_id=0,
                         bos_token_id=1, eos_token_id=2)
    return Case(T.Mamba2Model(cfg), {"input_ids": token_ids(LENGTH)}, int_inputs=("input_ids",))


@_seed
def falcon_mamba(with_mask):
    import transformers as T
    cfg = T.FalconMambaConfig(vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
                              conv_kernel=4, use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return Case(T.FalconMambaModel(cfg), {"input_ids": token_ids(LENGTH)}, int_inputs=("input_ids",))


@_seed
def conditional_detr(with_mask):
    return _detr_like("ConditionalDetr")


@_seed
def deformable_detr(with_mask):
    """Multi-scale deformable attention: ``grid_sample`` of each feature level at predicted
    offsets. (Two decoder layers: with one, transformers' weight tying of the box heads fails.)"""
    return _detr_like("DeformableDetr", ("stage1", "stage2"), num_feature_levels=2, encoder_n_points=2,
                      decoder_n_points=2, decoder_layers=2)


@_seed
def timesfm(with_mask):
    import transformers as T
    cfg = T.TimesFmConfig(patch_length=8, context_length=32, horizon_length=8, num_hidden_layers=2, hidden_size=32,
                          intermediate_size=64, head_dim=8, num_attention_heads=4, quantiles=[0.1, 0.5, 0.9])
    x = torch.randn(1, 32, generator=torch.Generator().manual_seed(1))
    inputs = {"past_values": x, "past_values_padding": torch.zeros(1, 32), "freq": torch.zeros(1, 1, dtype=torch.long)}
    return Case(T.TimesFmModel(cfg), inputs, int_inputs=("freq",))


@_seed
def swinv2(with_mask):
    return _swin_like("Swinv2")


@_seed
def dinov3_convnext(with_mask):
    return _vision("DINOv3ConvNext", 64, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1])


@_seed
def zoedepth(with_mask):
    """ZoeDepth: a DPT neck over a BEiT backbone and metric bins (attractors) on top."""
    import transformers as T
    backbone = T.BeitConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64,
                            image_size=32, patch_size=8, out_indices=[1, 2, 3, 4], use_relative_position_bias=True,
                            reshape_hidden_states=False)
    cfg = T.ZoeDepthConfig(backbone_config=backbone, neck_hidden_sizes=[8, 16, 16, 32], fusion_hidden_size=16,
                           bottleneck_features=16, bin_embedding_dim=16, num_relative_features=8,
                           patch_transformer_hidden_size=16, patch_transformer_intermediate_size=32,
                           patch_transformer_num_attention_heads=2, num_patch_transformer_layers=1,
                           bin_configurations=[{"n_bins": 8, "min_depth": 0.001, "max_depth": 10.0, "name": "nyu"}])
    return _image(_lively(T.ZoeDepthForDepthEstimation(cfg)))


@_seed
def aimv2_vision(with_mask):
    import transformers as T
    cfg = T.Aimv2VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                              image_size=32, patch_size=8)
    return _image(T.Aimv2VisionModel(cfg))


@_seed
def clap_audio(with_mask):
    """CLAP's audio tower (HTS-AT: Swin over a mel spectrogram, fused features off)."""
    import transformers as T
    cfg = T.ClapAudioConfig(window_size=4, num_mel_bins=32, spec_size=64, patch_size=4, patch_stride=(4, 4),
                            depths=[1, 1], num_attention_heads=[2, 2], patch_embeds_hidden_size=16, hidden_size=32,
                            projection_dim=16, enable_fusion=False)
    x = torch.randn(1, 1, 64, 32, generator=torch.Generator().manual_seed(1))
    return _audio(T.ClapAudioModel(cfg), "input_features", x)


@_seed
def wav2vec2_bert(with_mask):
    import transformers as T
    cfg = T.Wav2Vec2BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                               feature_projection_input_dim=16, conv_depthwise_kernel_size=3,
                               position_embeddings_type="relative_key", left_max_position_embeddings=8,
                               right_max_position_embeddings=8, vocab_size=VOCAB)
    x = torch.randn(1, 20, 16, generator=torch.Generator().manual_seed(1))
    return _audio(T.Wav2Vec2BertModel(cfg), "input_features", x)


@_seed
def xlnet(with_mask):
    import transformers as T
    cfg = T.XLNetConfig(vocab_size=VOCAB, d_model=32, n_layer=2, n_head=4, d_inner=64, use_mems_eval=False)
    case = _text(T.XLNetModel(cfg), with_mask)
    case.make = None  # torch.export specializes its relative positions to the length: static only
    return case


@_seed
def mpt(with_mask):
    import transformers as T
    cfg = T.MptConfig(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=64,
                      use_cache=False)
    return _text(T.MptModel(cfg), with_mask)


@_seed
def rwkv(with_mask):
    import transformers as T
    cfg = T.RwkvConfig(vocab_size=VOCAB, context_length=64, hidden_size=32, num_hidden_layers=2,
                       attention_hidden_size=32, intermediate_size=64, use_cache=False)
    # its time mixing is a Python loop over the tokens (no CUDA kernel here): static length only
    return Case(T.RwkvModel(cfg), {"input_ids": token_ids(LENGTH)}, int_inputs=("input_ids",))


cohere2 = _decoder("Cohere2", sliding_window=8, layer_types=["sliding_attention", "full_attention"])


exaone4 = _decoder("Exaone4", sliding_window=8, layer_types=["sliding_attention", "full_attention"])


smollm3 = _decoder("SmolLM3", no_rope_layers=[1, 0])


@_seed
def data2vec_text(with_mask):
    import transformers as T
    return _text(T.Data2VecTextModel(T.Data2VecTextConfig(**SMALL, max_position_embeddings=64)), with_mask)


@_seed
def ernie(with_mask):
    import transformers as T
    return _text(T.ErnieModel(T.ErnieConfig(**SMALL, max_position_embeddings=64, use_task_id=False)), with_mask)


@_seed
def vitmae(with_mask):
    """ViT-MAE's encoder with its random masking made an input (``noise``): an ``argsort`` of it
    picks the visible patches."""
    import transformers as T
    model = T.ViTMAEModel(T.ViTMAEConfig(**VISION, mask_ratio=0.5))
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    noise = torch.rand(1, 16, generator=torch.Generator().manual_seed(2))
    return Case(model, {"pixel_values": x, "noise": noise})


def _tower(prefix: str, **config):
    """A ViT-style vision tower ``transformers.<prefix>Model(<prefix>Config(**VISION, **config))``."""
    @_seed
    def build(with_mask):
        import transformers as T
        return _image(getattr(T, f"{prefix}Model")(getattr(T, f"{prefix}Config")(**VISION, **config)))
    return build


#: BLIP's default init (std 1e-10) leaves every output near 0: fp16 weights would round them away
blip_vision = _tower("BlipVision", initializer_range=0.02)


git_vision = _tower("GitVision")


@_seed
def vitdet(with_mask):
    import transformers as T
    cfg = T.VitDetConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=32,
                         patch_size=8, window_size=2, window_block_indices=[0], use_relative_position_embeddings=True)
    return _image(_lively(T.VitDetModel(cfg)))


@_seed
def layoutlm(with_mask):
    """LayoutLM: token ids and each token's box (x0, y0, x1, y1 in 0–1000, as ids of its
    position embeddings)."""
    import transformers as T
    model = T.LayoutLMModel(T.LayoutLMConfig(**SMALL, max_position_embeddings=64, max_2d_position_embeddings=1024))
    g = torch.Generator().manual_seed(3)
    corner = torch.randint(0, 500, (1, LENGTH, 2), generator=g)
    bbox = torch.cat([corner, corner + torch.randint(1, 500, (1, LENGTH, 2), generator=g)], -1)
    return Case(model, {"input_ids": token_ids(LENGTH), "bbox": bbox}, int_inputs=("input_ids", "bbox"))


@_seed
def bigbird(with_mask):
    import transformers as T
    cfg = T.BigBirdConfig(**SMALL, max_position_embeddings=128, attention_type="original_full")
    return _text(T.BigBirdModel(cfg), with_mask)


def _hybrid(prefix: str, **config):
    """A decoder of Mamba and attention layers, ``transformers.<prefix>Model``, static length
    (its scans are Python loops over the tokens here)."""
    @_seed
    def build(with_mask):
        import transformers as T
        model = getattr(T, f"{prefix}Model")(_decoder_config(getattr(T, f"{prefix}Config"), **config))
        if getattr(model.config, "num_experts", 1) > 1:
            model = _batched_experts(model)
        return Case(model, {"input_ids": token_ids(LENGTH)}, int_inputs=("input_ids",))
    return build


jamba = _hybrid("Jamba", num_experts=2, num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1,
                attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2,
                mamba_dt_rank=4)


bamba = _hybrid("Bamba", attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=8,
                mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=4)


olmoe = _moe("Olmoe", num_experts=4, num_experts_per_tok=2)


diffllama = _decoder("DiffLlama")


helium = _decoder("Helium", head_dim=8)


nemotron = _decoder("Nemotron", head_dim=8)


persimmon = _decoder("Persimmon")


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
    # decoder-only text models
    "OPT": (opt, True), "BLOOM": (bloom, True), "Falcon": (falcon, True), "Falcon ALiBi": (falcon_alibi, True),
    "GPT-J": (gpt_j, True), "GPT-NeoX": (gpt_neox, True), "GPTBigCode": (gpt_bigcode, True),
    "CodeGen": (codegen, True), "StableLM": (stablelm, True), "OLMo": (olmo, True), "OLMo2": (olmo2, True),
    "Phi": (phi, True), "Cohere": (cohere, True), "Granite": (granite, True), "Gemma2": (gemma2, True),
    "Starcoder2": (starcoder2, True),
    # mixture of experts
    "Mixtral": (mixtral, False), "Qwen2-MoE": (qwen2_moe, False), "Qwen3-MoE": (qwen3_moe, False),
    "DeepSeek-V3": (deepseek_v3, False),
    # encoder-only text models
    "MPNet": (mpnet, True), "XLM-RoBERTa": (xlm_roberta, True), "DeBERTa-v2": (deberta_v2, False),
    "MobileBERT": (mobilebert, True), "ConvBERT": (convbert, True), "FNet": (fnet, False), "ESM": (esm, True),
    "Funnel": (funnel, True),
    # encoder-decoder text models
    "T5 encoder-decoder": (t5, True), "BART encoder-decoder": (bart, True), "Marian": (marian, True),
    "Pegasus": (pegasus, True), "MBart": (mbart, True), "M2M100": (m2m100, True),
    # speech
    "Whisper encoder-decoder": (whisper, False), "Speech2Text encoder": (speech2text_encoder, False),
    "Wav2Vec2-Conformer": (wav2vec2_conformer, False),
    "Wav2Vec2-Conformer rotary": (wav2vec2_conformer_rotary, False), "SEW": (sew, False), "WavLM": (wavlm, False),
    "Data2VecAudio": (data2vec_audio, False), "AST": (ast, False),
    # vision
    "Swin": (swin, False), "FocalNet": (focalnet, False), "BEiT": (beit, False),
    "Data2VecVision": (data2vec_vision, False), "Dinov2": (dinov2, False), "YOLOS": (yolos, False),
    "MobileViT": (mobilevit, False), "SegFormer": (segformer, False), "PVTv2": (pvt_v2, False),
    "ConvNeXt": (convnext, False), "ConvNeXtV2": (convnext_v2, False), "ResNet": (resnet, False),
    "RegNet": (regnet, False), "EfficientNet": (efficientnet, False), "MobileNetV2": (mobilenet_v2, False),
    # the 2026-12-05 sweep: dense prediction, newer backbones and text models, state-space, time series
    "DPT depth": (dpt, False), "Depth Anything": (depth_anything, False), "GLPN depth": (glpn, False),
    "Swin2SR": (swin2sr, False), "ViTPose": (vitpose, False), "UperNet": (upernet, False),
    "SAM vision": (sam_vision, False), "Hiera": (hiera, False), "Dinov2 registers": (dinov2_registers, False),
    "DINOv3 ViT": (dinov3_vit, False), "MobileViTV2": (mobilevit_v2, False), "CvT": (cvt, False),
    "PoolFormer": (poolformer, False), "BiT": (bit, False), "SwiftFormer": (swiftformer, False),
    "TextNet": (textnet, False), "ModernBERT": (modernbert, True), "RoFormer": (roformer, True),
    "SqueezeBERT": (squeezebert, True), "Gemma3": (gemma3, True), "GLM-4": (glm4, True), "OLMo3": (olmo3, True),
    "LFM2": (lfm2, True), "Mamba": (mamba, False), "PatchTST": (patchtst, False),
    "PatchTSMixer": (patchtsmixer, False), "DAC encoder": (dac_encoder, False), "UniSpeech": (unispeech, False),
    "Moonshine encoder": (moonshine_encoder, False),
    "SegFormer segmentation": (segformer_seg, False), "Mask2Former": (mask2former, False),
    "MaskFormer": (maskformer, False), "OWL-ViT vision": (owlvit_vision, False), "ViTMatte": (vitmatte, False),
    "MobileNetV1": (mobilenet_v1, False), "LeViT": (levit_hf, False), "PVT": (pvt, False), "I-JEPA": (ijepa, False),
    "CANINE": (canine, True), "Granite-MoE": (granite_moe, True),
    "RecurrentGemma": (recurrent_gemma, True), "Mamba2": (mamba2, False), "FalconMamba": (falcon_mamba, False),
    "Conditional DETR": (conditional_detr, False), "Deformable DETR": (deformable_detr, False),
    "TimesFM": (timesfm, False),
    "Swinv2": (swinv2, False), "DINOv3 ConvNeXt": (dinov3_convnext, False), "ZoeDepth": (zoedepth, False),
    "AIMv2 vision": (aimv2_vision, False), "CLAP audio": (clap_audio, False), "Wav2Vec2-BERT": (wav2vec2_bert, False),
    "XLNet": (xlnet, True), "MPT": (mpt, True), "RWKV": (rwkv, False), "Cohere2": (cohere2, True),
    "EXAONE 4": (exaone4, True), "SmolLM3": (smollm3, True), "Data2VecText": (data2vec_text, True),
    "ERNIE": (ernie, True),
    "ViT-MAE": (vitmae, False), "BLIP vision": (blip_vision, False), "GIT vision": (git_vision, False),
    "ViTDet": (vitdet, False), "LayoutLM": (layoutlm, False),
    "BigBird": (bigbird, True), "Jamba": (jamba, False), "Bamba": (bamba, False), "OLMoE": (olmoe, True),
    "DiffLlama": (diffllama, True), "Helium": (helium, True), "Nemotron": (nemotron, True),
    "Persimmon": (persimmon, True),
}
