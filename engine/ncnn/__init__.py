"""The ncnn layer vocabulary: the layer table (:mod:`.layers`, generated into
:mod:`.layer_table` by :mod:`.gen_layer_table`), named enum values (:mod:`.enums`) and the small
expression language the table uses (:mod:`.expr`)."""
from .enums import ActivationType, BinaryOpType, EltwiseOp, InterpResizeType, PoolingType, ReductionOp, UnaryOpType, activation
from .layers import (LayerSpec, LayerSpecError, LoadedWeight, ParamSpec, WeightSpec, check_params, expected_weights,
                     get_spec, layer_types, make_params, param_id, param_values, resolve_params, weight_spec)

__all__ = ["ActivationType", "BinaryOpType", "EltwiseOp", "InterpResizeType", "LayerSpec", "LayerSpecError",
           "LoadedWeight", "ParamSpec", "PoolingType", "ReductionOp", "UnaryOpType", "WeightSpec", "activation",
           "check_params", "expected_weights", "get_spec", "layer_types", "make_params", "param_id", "param_values",
           "resolve_params", "weight_spec"]
