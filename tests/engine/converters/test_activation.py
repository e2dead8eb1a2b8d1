"""Activations: every converter and parameter variant, both dialects, numerically against
PyTorch in the ncnn runtime (the core dialect exercises recompose_activations)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.harness import DIALECTS, Fn, check_module


def _x(*shape, scale=3.0):
    torch.manual_seed(0)
    return torch.randn(*shape) * scale


ONE_LAYER = [
    ("relu", nn.ReLU(), "ReLU"),
    ("relu_inplace", nn.ReLU(inplace=True), "ReLU"),
    ("relu6", nn.ReLU6(), "Clip"),
    ("hardtanh", nn.Hardtanh(-2.0, 1.5), "Clip"),
    ("hardtanh_inplace", nn.Hardtanh(inplace=True), "Clip"),
    ("clamp", Fn(lambda x: torch.clamp(x, -1.0, 2.0)), "Clip"),
    ("clamp_min0", Fn(lambda x: torch.clamp_min(x, 0)), "ReLU"),
    ("clamp_min", Fn(lambda x: x.clamp(min=-0.5)), "Clip"),
    ("clamp_max", Fn(lambda x: x.clamp(max=0.5)), "Clip"),
    ("clamp_int_bounds", Fn(lambda x: x.clamp(-1, 1)), "Clip"),
    ("leaky_relu", nn.LeakyReLU(), "ReLU"),
    ("leaky_relu_0.2", nn.LeakyReLU(0.2), "ReLU"),
    ("elu", nn.ELU(), "ELU"),
    ("elu_0.5", nn.ELU(0.5), "ELU"),
    ("selu", nn.SELU(), "SELU"),
    ("elu_scaled", Fn(lambda x: torch.ops.aten.elu(x, 0.5, 2.0)), "SELU"),
    ("celu", nn.CELU(), "CELU"),
    ("celu_0.7", nn.CELU(0.7), "CELU"),
    ("gelu", nn.GELU(), "GELU"),
    ("gelu_tanh", nn.GELU(approximate="tanh"), "GELU"),
    ("silu", nn.SiLU(), "Swish"),
    ("silu_handwritten", Fn(lambda x: x * torch.sigmoid(x)), "Swish"),
    ("mish", nn.Mish(), "Mish"),
    ("sigmoid", nn.Sigmoid(), "Sigmoid"),
    ("hardsigmoid", nn.Hardsigmoid(), "HardSigmoid"),
    ("hardsigmoid_handwritten", Fn(lambda x: F.relu6(x + 3.0) / 6.0), "HardSigmoid"),
    ("hardswish", nn.Hardswish(), "HardSwish"),
    ("hardswish_handwritten", Fn(lambda x: x * F.relu6(x + 3.0) / 6.0), "HardSwish"),
    ("hardswish_of_hardsigmoid", Fn(lambda x: x * F.hardsigmoid(x)), "HardSwish"),
    ("tanh", nn.Tanh(), "TanH"),
    ("softplus", nn.Softplus(), "Softplus"),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name,module,layer", ONE_LAYER, ids=[c[0] for c in ONE_LAYER])
def test_single_layer_activation(tmp_path, dialect, name, module, layer):
    r = check_module(module, [_x(1, 4, 5, 6)], tmp_path, dialect=dialect, expect_types=[layer])
    assert len(r.result.ncnn.ops) == 2, [op.type for op in r.result.ncnn.ops]  # Input + the activation


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape", [(1, 8), (1, 3, 10), (1, 2, 3, 4, 5)])
def test_activation_ranks(tmp_path, dialect, shape):
    check_module(nn.Sequential(nn.Hardswish(), nn.GELU(), nn.SiLU()), [_x(*shape)], tmp_path, dialect=dialect,
                 expect_types=["HardSwish", "GELU", "Swish"], forbid_types=["BinaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("beta", [2.0, 0.5])
def test_softplus_beta(tmp_path, dialect, beta):
    r = check_module(nn.Softplus(beta=beta, threshold=20.0), [_x(1, 4, 5, 6)], tmp_path, dialect=dialect,
                     expect_types=["Softplus", "BinaryOp"])
    assert [op.type for op in r.result.ncnn.ops].count("BinaryOp") == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("beta,threshold", [(1.0, 12.0), (2.0, 10.0)])
def test_softplus_threshold_within_fp32_tolerance_warns(tmp_path, dialect, beta, threshold):
    """ncnn's Softplus has no threshold: where that changes the result by less than fp32
    tolerance the model converts, with a warning naming the difference."""
    x = torch.linspace(-20, 20, 4 * 50).reshape(1, 4, 50)
    r = check_module(nn.Softplus(beta, threshold), [x], tmp_path, dialect=dialect, expect_types=["Softplus"])
    warnings = [d for d in r.result.diagnostics if d.severity == "warning"]
    assert len(warnings) == 1 and f"threshold={threshold}" in warnings[0].reason, warnings


def test_softplus_low_threshold_refused(tmp_path):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    pt2 = export_pt2(nn.Softplus(threshold=2.0), [_x(1, 4)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions(lint=True))
    assert not result.ok
    assert any("threshold=2.0" in d.reason for d in result.errors), result.errors


@pytest.mark.parametrize("dialect", DIALECTS)
def test_log_sigmoid(tmp_path, dialect):
    check_module(nn.LogSigmoid(), [_x(1, 4, 5, 6)], tmp_path, dialect=dialect, expect_types=["Sigmoid", "UnaryOp"],
                 forbid_types=["BinaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("num_parameters", [1, 4])
@pytest.mark.parametrize("fp16", [False, True])
def test_prelu(tmp_path, dialect, num_parameters, fp16):
    m = nn.PReLU(num_parameters)
    with torch.no_grad():
        m.weight.copy_(torch.linspace(-0.5, 0.7, num_parameters))
    r = check_module(m, [_x(1, 4, 5, 6)], tmp_path, dialect=dialect, fp16=fp16, expect_types=["PReLU"])
    assert len(r.result.ncnn.ops) == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape", [(1, 6), (1, 6, 7)])
def test_prelu_lower_ranks(tmp_path, dialect, shape):
    m = nn.PReLU(6)
    with torch.no_grad():
        m.weight.copy_(torch.linspace(-0.5, 0.7, 6))
    check_module(m, [_x(*shape)], tmp_path, dialect=dialect, expect_types=["PReLU"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_leaky_relu_handwritten_where(tmp_path, dialect):
    check_module(Fn(lambda x: torch.where(x > 0, x, x * 0.1)), [_x(1, 4, 5, 6)], tmp_path, dialect=dialect,
                 expect_types=["ReLU"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_activations_after_conv(tmp_path, dialect):
    """A conv → activation chain as CNNs have it (the activation may fuse into the conv)."""
    torch.manual_seed(1)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Hardswish(), nn.Conv2d(8, 8, 1), nn.Mish(),
                      nn.Conv2d(8, 4, 1), nn.SiLU())
    check_module(m, [_x(1, 3, 8, 8, scale=1.0)], tmp_path, dialect=dialect, forbid_types=["BinaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name,fn,layer", [
    ("one_element_bounds", lambda x: torch.clamp(x, torch.tensor(-1.0), torch.tensor([2.0])), "Clip"),
    ("tensor_bounds", lambda x: torch.clamp(x, -x.abs().mean((2, 3), keepdim=True), x.abs() * 0.5), "BinaryOp"),
    ("tensor_min_only", lambda x: torch.clamp_min(x, x.mean(1, keepdim=True)), "BinaryOp"),
    ("tensor_max_only", lambda x: torch.clamp_max(x, torch.full((1, 4, 1, 1), 0.5)), "BinaryOp"),
])
def test_clamp_tensor_bounds(tmp_path, dialect, name, fn, layer):
    check_module(Fn(fn), [_x(1, 4, 5, 6)], tmp_path, dialect=dialect, expect_types=[layer])


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = self.conv(x)
        y.add_(x).mul_(0.5)
        y.sigmoid_()
        return y.clamp_(0.1, 0.9)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_inplace_forms(tmp_path, dialect):
    check_module(InPlace(), [_x(1, 4, 5, 6)], tmp_path, dialect=dialect, expect_types=["Sigmoid", "Clip"])
