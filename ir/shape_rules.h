#pragma once
// Shape and dtype rules: what every op kind produces from its inputs and attributes.
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
 *  or attributes are inconsistent (rank mismatch, non-broadcastable shapes, axis out of range, ...). */
std::vector<TensorType> infer_output_types(const Graph &g, const Op &op);

/** Multidirectional (numpy) broadcast of two shapes; throws UserError mentioning `what` if incompatible. */
Shape broadcast_shapes(const Shape &a, const Shape &b, const std::string &what);

}  // namespace cleave
