#pragma once
// Shape and dtype rules: what every op kind produces from its inputs and attributes.
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cleave {

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  bool operator==(const TensorType &) const = default;
};

/** The dtype and shape of each output of `op` (one entry per op.outputs slot, absent ones included), computed from
 *  its inputs' types and its attributes. Throws UserError naming the op (`op "Conv_3" (Conv): ...`) when the inputs
 *  or attributes are inconsistent (rank mismatch, non-broadcastable shapes, axis out of range, ...).
 *  Where an output's shape is not derivable from the inputs (ConvGradData's dX, SliceGrad's dX, ...), the rule checks
 *  what it can against the shape already declared on the output tensor and returns that. */
std::vector<TensorType> infer_output_types(const Graph &g, const Op &op);

/** Multidirectional (numpy) broadcast of two shapes; throws UserError mentioning `what` if incompatible. */
Shape broadcast_shapes(const Shape &a, const Shape &b, const std::string &what);

/** Spatial geometry of a Conv/pool-like op over `spatial` dims, attributes defaulted as ONNX does
 *  (strides/dilations 1, pads 0, ceil_mode 0). `kernel` comes from kernel_shape or from W's trailing dims. */
struct WindowGeometry {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: all begins, then all ends
  bool ceil_mode = false;
};
/** Reads strides/pads/dilations/ceil_mode of `op` for a window `kernel`; UserError naming the op on bad lengths. */
WindowGeometry window_geometry(const Op &op, const std::vector<int64_t> &kernel);
/** Output size of one windowed dim (ONNX/torch: with ceil_mode, a window starting in the right padding is dropped). */
int64_t window_output_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end,
                          int64_t dilation, bool ceil_mode);

/** One sliced dim, resolved against the input shape: output index i reads input index start + i * step. */
struct SliceDim {
  int64_t start = 0, step = 1, size = 0;
};
/** Every dim of Slice/SliceGrad's input `in` resolved (dims not in axes: start 0, step 1, full size). Attributes are
 *  the IR's normalised ones (no from-the-end negatives); starts/ends are clamped to [0, dim] for a positive step and
 *  [-1, dim - 1] for a negative one (-1 = before the first element).
 *  UserError naming the op on inconsistent attributes. */
std::vector<SliceDim> resolve_slice(const Op &op, const Shape &in);

}  // namespace cleave
