"""The torchvision models of the conversion benchmark (``bench_convert.py``) and how each is
built: random initial weights (``weights=None``, nothing downloaded), a fixed seed, no layer
left at an init that hides errors (zero heads, 1e-6 layer scales), BatchNorm running
statistics calibrated on a few random batches in train mode (so BatchNorm folding is exercised
with non-trivial statistics), then eval mode.

Only the builders import torch/torchvision, lazily: the orchestrator imports this module for
the names alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

INPUT_SHAPE = (1, 3, 224, 224)


@dataclass(frozen=True)
class ZooModel:
    name: str  #: torchvision builder name, also the benchmark's model key
    title: str  #: display name in the table
    group: str  #: "cnn" (issue 3) or "transformer" (issue 4)
    kwargs: dict = field(default_factory=dict)  #: extra builder arguments


_MODELS = [
    ZooModel("resnet18", "ResNet-18", "cnn"),
    ZooModel("mobilenet_v2", "MobileNetV2", "cnn"),
    ZooModel("mobilenet_v3_small", "MobileNetV3-Small", "cnn"),
    ZooModel("squeezenet1_1", "SqueezeNet 1.1", "cnn"),
    ZooModel("shufflenet_v2_x1_0", "ShuffleNetV2 x1.0", "cnn"),
    ZooModel("efficientnet_b0", "EfficientNet-B0", "cnn"),
    ZooModel("regnet_y_400mf", "RegNetY-400MF", "cnn"),
    ZooModel("mnasnet0_5", "MNASNet 0.5", "cnn"),
    ZooModel("googlenet", "GoogLeNet", "cnn", {"aux_logits": False, "init_weights": True}),
    ZooModel("densenet121", "DenseNet-121", "cnn"),
    ZooModel("alexnet", "AlexNet", "cnn"),
    ZooModel("vgg11_bn", "VGG-11-BN", "cnn"),
    ZooModel("resnext50_32x4d", "ResNeXt-50 32x4d", "cnn"),
    ZooModel("vit_b_16", "ViT-B/16", "transformer"),
    ZooModel("swin_t", "Swin-T", "transformer"),
    ZooModel("convnext_tiny", "ConvNeXt-Tiny", "transformer"),
    ZooModel("maxvit_t", "MaxViT-T", "transformer"),
    ZooModel("efficientnet_v2_s", "EfficientNetV2-S", "transformer"),
]

ZOO: dict[str, ZooModel] = {m.name: m for m in _MODELS}
GROUPS = {g: [m.name for m in _MODELS if m.group == g] for g in ("cnn", "transformer")}


def calibrate_batchnorm(model, *, batches: int = 3, batch_size: int = 4, shape=INPUT_SHAPE, inputs: int = 1) -> None:
    """Give every BatchNorm layer running statistics of real activations: a cumulative
    average over ``batches`` random batches in train mode (no gradients); ``inputs``: how many
    such tensors the model takes (an optical-flow model: two images)."""
    import torch

    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    saved = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(*(torch.randn(batch_size, *shape[1:]) for _ in range(inputs)))
    for m, mom in zip(norms, saved):
        m.momentum = mom


def make_numerics_meaningful(model) -> None:
    """Random-init choices that would hide conversion errors: a zero-initialised layer (ViT's
    classifier head: its output would be all zeros) gets N(0, 0.02) weights, and ConvNeXt's
    1e-6 layer scales (blocks that are almost identities) become U(0.5, 1)."""
    import torch

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) and not m.weight.any():
                torch.nn.init.normal_(m.weight, std=0.02)
                if m.bias is not None:
                    torch.nn.init.normal_(m.bias, std=0.02)
        for pname, p in model.named_parameters():
            if pname.endswith("layer_scale"):
                p.uniform_(0.5, 1.0)


def build(name: str, seed: int = 0):
    """The eval-mode model ``name`` with seeded random weights and calibrated BatchNorm."""
    import torch
    import torchvision

    spec = ZOO[name]
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None, **spec.kwargs)
    make_numerics_meaningful(model)
    calibrate_batchnorm(model)
    return model.eval()


def example_input(seed: int = 0):
    """The benchmark input: a seeded standard-normal ``INPUT_SHAPE`` tensor."""
    import torch

    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(*INPUT_SHAPE, generator=g)


#: builder arguments a torchvision classifier needs to export as a plain classifier
CLASSIFIER_KWARGS = {"googlenet": {"aux_logits": False, "init_weights": True},
                     "inception_v3": {"aux_logits": False, "init_weights": True}}


#: the input shape of torchvision's models, per family (optical flow: each of the two images)
INPUT_SHAPES = {"classification": lambda name: (1, 3, 299, 299) if name == "inception_v3" else (1, 3, 224, 224),
                "video": lambda name: (1, 3, 16, 112, 112) if name in ("r3d_18", "mc3_18", "r2plus1d_18")
                else (1, 3, 16, 224, 224),
                "optical_flow": lambda name: (1, 3, 128, 128),
                "segmentation": lambda name: (1, 3, 224, 224)}

#: timm image classifiers, the smallest variant of (almost) every architecture module of timm
#: 1.0.31 (none trained here: ``pretrained=False``); each runs at its own default input size
TIMM_MODELS = (
    "botnet26t_256", "halonet26t", "repvgg_a0", "gernet_s", "mobileone_s0", "cait_xxs24_224",
    "coat_lite_mini", "coat_tiny", "convit_tiny", "convmixer_768_32", "convnext_atto", "crossvit_tiny_240",
    "darknet17", "cspnext_tiny", "davit_tiny", "deit_tiny_patch16_224", "deit3_small_patch16_224", "dla34",
    "dpn48b", "efficientformer_l1", "efficientformerv2_s0", "mixnet_s", "tinynet_e", "efficientvit_b0",
    "efficientvit_m0", "eva02_tiny_patch14_224", "fasternet_t0", "fastvit_t8", "focalnet_tiny_srf",
    "gcvit_xxtiny", "ghostnet_050", "ghostnetv2_100", "hardcorenas_a", "hgnetv2_b0", "hgnet_tiny",
    "hiera_tiny_224", "hrnet_w18_small", "inception_next_atto", "inception_v4", "lcnetv2_small",
    "lowformer_b0", "mambaout_femto", "coatnet_nano_rw_224", "maxvit_nano_rw_256", "poolformer_s12",
    "caformer_s18", "convformer_s18", "gmlp_ti16_224", "resmlp_12_224", "mixer_s16_224", "lcnet_050",
    "fbnetv3_b", "mobilenetv4_conv_small", "mobilenetv4_hybrid_medium", "mobilevit_xxs",
    "mobilevitv2_050", "mvitv2_tiny", "nest_tiny", "nextvit_small", "nf_regnet_b0", "eca_nfnet_l0",
    "pit_ti_224", "pvt_v2_b0", "rdnet_tiny", "regnetx_002", "regnetz_005", "repghostnet_050",
    "repvit_m0_9", "res2net50_14w_8s", "resnest14d", "resnet10t", "seresnext26d_32x4d", "ecaresnet26t",
    "resnetblur18", "resnetv2_50x1_bit", "rexnet_100", "selecsls42b", "sequencer2d_s", "shvit_s1",
    "skresnet18", "starnet_s050", "swiftformer_xs", "swin_s3_tiny_224", "swinv2_tiny_window8_256",
    "swinv2_cr_tiny_224", "tiny_vit_5m_224", "tnt_s_patch16_224", "tresnet_m", "twins_svt_small",
    "twins_pcpvt_small", "visformer_tiny", "vit_tiny_patch16_224", "vit_tiny_r_s16_p8_224",
    "vit_relpos_small_patch16_224", "samvit_base_patch16_224", "vitamin_small_224", "volo_d1_224",
    "ese_vovnet19b_dw", "xception41", "xcit_nano_12_p16_224", "iformer_t", "efficientvim_m1",
    "starnet_s1", "csatv2",
)


def _unhide_timm_init(model) -> None:
    """timm's inits that would hide conversion errors: a parameter left all zero or all
    near-zero by ``zero_init_last`` (a residual branch's last BatchNorm scale), a 1e-5 layer
    scale (``gamma``, ``ls1``) — both make blocks identities — or a zero head, get random values:
    U(0.5, 1) for a scale vector, N(0, 0.02) for a matrix. Biases stay as they are."""
    import torch

    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("bias") or p.numel() == 0 or p.abs().max() > 1e-4:
                continue
            p.uniform_(0.5, 1.0) if p.dim() == 1 else p.normal_(0.0, 0.02)


def _timm(name: str):
    """``(model, x)``: timm model ``name``, seeded random weights with nothing left at an init
    that hides errors, BatchNorm calibrated at its default input size, and a seeded input."""
    import timm
    import torch

    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False)
    shape = (1, *model.pretrained_cfg["input_size"])
    _unhide_timm_init(model)
    make_numerics_meaningful(model)
    calibrate_batchnorm(model, shape=shape, batch_size=2)
    g = torch.Generator().manual_seed(1)
    return model.eval(), torch.randn(*shape, generator=g)


#: Ultralytics models, built from the configs the package ships (``ultralytics.cfg.models``) at
#: scale n: every YOLO generation and task (detect, segment, pose, oriented boxes, classify),
#: and RT-DETR; name → task
ULTRALYTICS_MODELS = {
    "yolov3-tinyu": "detect", "yolov5nu": "detect", "yolov6n": "detect", "yolov8n": "detect",
    "yolov8n-p2": "detect", "yolov8n-p6": "detect", "yolov8n-ghost": "detect", "yolov8n-seg": "segment",
    "yolov8n-pose": "pose", "yolov8n-obb": "obb", "yolov8n-cls": "classify", "yolov9t": "detect",
    "yolov10n": "detect", "yolo11n": "detect", "yolo11n-seg": "segment", "yolo11n-pose": "pose",
    "yolo11n-obb": "obb", "yolo11n-cls": "classify", "yolo12n": "detect", "yolo12n-seg": "segment",
    "yolo26n": "detect", "yolo26n-seg": "segment", "yolo26n-pose": "pose", "yolo26n-obb": "obb",
    "yolo26n-cls": "classify", "rtdetr-l": "rtdetr",
}
#: their input: 320×320 (a multiple of the P6 models' stride 64), classifiers 224×224
ULTRALYTICS_SIZE = {"classify": 224}


def _ultralytics(name: str):
    """``(model, x)``: Ultralytics model ``name`` of :data:`ULTRALYTICS_MODELS` built from its
    config (seeded random weights, no download), BatchNorm calibrated, eval mode (the
    inference head: decoded boxes, masks' coefficients and prototypes, keypoints...)."""
    import torch
    from ultralytics.nn import tasks

    task = ULTRALYTICS_MODELS[name]
    cls = {"detect": tasks.DetectionModel, "segment": tasks.SegmentationModel, "pose": tasks.PoseModel,
           "obb": tasks.OBBModel, "classify": tasks.ClassificationModel, "rtdetr": tasks.RTDETRDetectionModel}[task]
    size = ULTRALYTICS_SIZE.get(task, 320)
    torch.manual_seed(0)
    model = cls(f"{name}.yaml", verbose=False)
    make_numerics_meaningful(model)
    calibrate_batchnorm(model, shape=(1, 3, size, size), batch_size=2)
    g = torch.Generator().manual_seed(1)
    return model.eval(), torch.rand(1, 3, size, size, generator=g)


#: diffusers models in small (two resolution levels, 32/64 channels), seeded random weights
DIFFUSERS_MODELS = ("unet2d", "unet2d_condition", "vae_encoder", "vae_decoder")


def _diffusers(name: str):
    """``(model, inputs)``: a diffusers model of :data:`DIFFUSERS_MODELS` as a plain function of
    tensors: the denoising UNet ``(sample, timestep) -> noise`` (with attention blocks), the
    text-conditioned UNet of Stable Diffusion ``(latents, timestep, text states) -> noise``
    (cross-attention, GEGLU), the VAE encoder ``image -> latent mean`` and decoder ``latents ->
    image`` (GroupNorm, mid-block attention)."""
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel, UNet2DModel

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    small = {"block_out_channels": (32, 64), "layers_per_block": 1, "norm_num_groups": 8}
    if name == "unet2d":
        net = UNet2DModel(sample_size=32, in_channels=3, out_channels=3, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                          up_block_types=("AttnUpBlock2D", "UpBlock2D"), **small)
        fn, inputs = (lambda m, x, t: m(x, t).sample), (torch.randn(1, 3, 32, 32, generator=g), torch.tensor([10.0]))
    elif name == "unet2d_condition":
        net = UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, cross_attention_dim=32,
                                   attention_head_dim=8, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                   up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), **small)
        fn = lambda m, x, t, c: m(x, t, encoder_hidden_states=c).sample  # noqa: E731
        inputs = (torch.randn(1, 4, 16, 16, generator=g), torch.tensor([10.0]), torch.randn(1, 7, 32, generator=g))
    else:
        net = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, down_block_types=("DownEncoderBlock2D",) * 2,
                            up_block_types=("UpDecoderBlock2D",) * 2, **small)
        if name == "vae_encoder":
            fn, inputs = (lambda m, x: m.encode(x).latent_dist.mean), (torch.randn(1, 3, 32, 32, generator=g),)
        else:
            fn, inputs = (lambda m, z: m.decode(z).sample), (torch.randn(1, 4, 16, 16, generator=g),)
    make_numerics_meaningful(net)

    class Call(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, *args):
            return fn(self.net, *args)

    return Call(net).eval(), inputs


#: RAFT's refinement steps in the exported graph (torchvision's default, unrolled)
FLOW_UPDATES = 12


def _final_flow(model):
    """An optical-flow model as ``(image1, image2) -> flow``: RAFT's last refinement of
    :data:`FLOW_UPDATES` (it returns every step's)."""
    import torch

    class FinalFlow(torch.nn.Module):
        def __init__(self, raft):
            super().__init__()
            self.raft = raft

        def forward(self, image1, image2):
            return self.raft(image1, image2, num_flow_updates=FLOW_UPDATES)[-1]

    return FinalFlow(model)


def _segment_map(model):
    """A segmentation model as ``image -> per-pixel class scores`` (torchvision returns a dict)."""
    import torch

    class SegmentMap(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x)["out"]

    return SegmentMap(model)


def classifier(name: str, family: str = "classification"):
    """``(model, x)``: torchvision classifier ``name`` (any of ``torchvision.models.list_models``,
    or of ``torchvision.models.video`` for the ``video`` family) built like :func:`build` (seed 0,
    meaningful numerics, calibrated BatchNorm, eval mode) and its seeded input: 1×3×224×224
    (299 for Inception-v3); video: a 1×3×16×112×112 clip (16×224×224 for S3D, MViT, Swin3D).
    ``optical_flow``: RAFT as :func:`_final_flow`, and ``x`` a tuple of two 1×3×128×128 images;
    ``segmentation``: the model as :func:`_segment_map` (no auxiliary head), a 1×3×224×224 image;
    ``timm``: a model of :data:`TIMM_MODELS`, built by :func:`_timm`; ``ultralytics``: one of
    :data:`ULTRALYTICS_MODELS`, built by :func:`_ultralytics`; ``diffusers``: one of
    :data:`DIFFUSERS_MODELS`, built by :func:`_diffusers` (a tuple of inputs)."""
    if family == "timm":
        return _timm(name)
    if family == "ultralytics":
        return _ultralytics(name)
    if family == "diffusers":
        return _diffusers(name)
    import torch
    import torchvision

    shape = INPUT_SHAPES[family](name)
    flow = family == "optical_flow"
    kwargs = dict(CLASSIFIER_KWARGS.get(name, {}))
    if family == "segmentation":
        kwargs["weights_backbone"] = None
        if not name.startswith("lraspp"):
            kwargs["aux_loss"] = False
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None, **kwargs)
    make_numerics_meaningful(model)
    calibrate_batchnorm(model, shape=shape, batch_size=2 if family != "classification" else 4, inputs=1 + flow)
    model.eval()
    g = torch.Generator().manual_seed(1)
    if flow:
        return _final_flow(model).eval(), tuple(torch.rand(*shape, generator=g) for _ in range(2))
    if family == "segmentation":
        return _segment_map(model).eval(), torch.randn(*shape, generator=g)
    return model, torch.randn(*shape, generator=g)
