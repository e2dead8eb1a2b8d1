"""Graph passes, one module per pass (``verb_noun``), run in the order of :data:`PIPELINE`.

The list is the whole conversion: ATen clean-up → ATen→pnnx lowering → pnnx-level fusions →
pnnx→ncnn lowering → ncnn-level fusions → Split insertion → blob naming.
"""
from __future__ import annotations

from . import (
    eliminate_dead_code,
    eliminate_flatten_innerproduct,
    eliminate_noop_reshape,
    fold_constants,
    fuse_binaryop_eltwise,
    fuse_channel_shuffle,
    fuse_conv_batchnorm,
    fuse_convolution_activation,
    fuse_layernorm_permute,
    fuse_linear_batchnorm,
    fuse_linear_reshape,
    fuse_multihead_attention,
    fuse_padding_convolution,
    fuse_pixel_shuffle,
    fuse_pooling1d,
    fuse_unrolled_rnn,
    infer_batch_axis,
    insert_split,
    legalize_global_pooling_layout,
    lower_aten_to_pnnx,
    lower_pnnx_to_ncnn,
    merge_adjacent_crops,
    merge_adjacent_pads,
    name_blobs,
    normalize_inplace,
    recompose_activations,
    recompose_attention,
    recompose_matmul,
    recompose_norms,
    record_pnnx_graph,
    remove_noops,
)
from .manager import Cancelled, PassContext, PassError, PassManager, PassRecord, dump_records, graph_pass

#: The conversion pipeline, in order.
PIPELINE = [
    normalize_inplace.run,
    remove_noops.run,
    fuse_unrolled_rnn.run,
    fold_constants.run,
    recompose_activations.run,
    recompose_norms.run,
    recompose_matmul.run,
    recompose_attention.run,
    fuse_multihead_attention.run,
    lower_aten_to_pnnx.run,
    eliminate_dead_code.run,
    fuse_conv_batchnorm.run,
    fuse_linear_reshape.run,
    fuse_layernorm_permute.run,
    fuse_linear_batchnorm.run,
    fuse_channel_shuffle.run,
    fuse_pixel_shuffle.run,
    fuse_pooling1d.run,
    merge_adjacent_pads.run,
    record_pnnx_graph.run,
    infer_batch_axis.run,
    lower_pnnx_to_ncnn.run,
    eliminate_dead_code.run,
    legalize_global_pooling_layout.run,
    eliminate_noop_reshape.run,
    merge_adjacent_crops.run,
    fuse_padding_convolution.run,
    fuse_convolution_activation.run,
    eliminate_flatten_innerproduct.run,
    fuse_binaryop_eltwise.run,
    insert_split.run,
    name_blobs.run,
]

__all__ = ["PIPELINE", "Cancelled", "PassContext", "PassError", "PassManager", "PassRecord", "dump_records",
           "graph_pass"]
