#pragma once
// Functions torch exports decomposed, imported as the one op they compute, so training runs one kernel forward and
// one backward instead of several each, and keeps fewer intermediate results for the backward pass:
//   nn.LayerNorm below opset 17 (nine nodes) as LayerNormalization;
//   nn.GELU (five nodes: x * (1 + erf(x / sqrt 2)) * 0.5; ONNX has Gelu from opset 20) as Gelu.
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"

namespace cleave {

/** The nodes of one decomposed LayerNorm over the last k dims of x:
 *    m = ReduceMean(x, axes=[-k..-1], keepdims=1)   d = Sub(x, m)   v = ReduceMean(Pow(d, 2), same axes, keepdims=1)
 *    n = Div(d, Sqrt(Add(v, eps)))                   y = Mul(n, scale)   [y = Add(y, bias)]
 *  which is LayerNormalization(x, scale[, bias]) {axis=-k, epsilon=eps}: the biased variance, eps inside the
 *  square root. */
struct LayerNormChain {
  std::vector<int> nodes;  // node indices; nodes[0] is the ReduceMean of x
  std::string x, scale, bias, y;  // bias empty when the chain ends at the Mul
  int k = 0;
  double eps = 0;
  Shape normalized;  // scale's (and bias's) dims: must be x's last k dims
};

/** Every such chain of g, by the index of its first node. A chain qualifies when each intermediate result feeds
 *  the next node alone (and is not a graph output), the exponent 2 and eps are float constants (Constant nodes or
 *  initializers), and scale and bias are float initializers of rank k with the same dims. Whether those dims are
 *  x's last k (else the Mul broadcasts and the chain is something else) is for the importer to check: ONNX's shape
 *  inference loses the shapes of torch's attention blocks. */
std::map<int, LayerNormChain> find_layer_norms(const onnx::GraphProto &g);

/** The (unnamed) LayerNormalization node computing chain c. */
onnx::NodeProto layer_norm_node(const LayerNormChain &c);

/** The nodes of one decomposed exact GELU of x, as torch exports it:
 *    d = Div(x, sqrt 2)   e = Erf(d)   a = Add(e, 1)   m = Mul(x, a)   y = Mul(m, 0.5)
 *  (Add's and the Muls' operands in either order; Mul(x, 1/sqrt 2) for the Div). */
struct GeluChain {
  std::vector<int> nodes;  // node indices; nodes[0] is the Div (or Mul) of x
  std::string x, y;
};

/** Every such chain of g, by the index of its first node: each intermediate result feeds the next node alone (and is
 *  not a graph output), the constants are rank-0 floats (Constant nodes or initializers) within 1e-6 of theirs. */
std::map<int, GeluChain> find_gelus(const onnx::GraphProto &g);

/** The (unnamed) Gelu node (approximate "none") computing chain c. */
onnx::NodeProto gelu_node(const GeluChain &c);

}  // namespace cleave
