#pragma once
// torch exports nn.LayerNorm below opset 17 as nine nodes; Cleave imports them as the one LayerNormalization op,
// so training runs one kernel forward and one backward instead of nine and about twenty.
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

}  // namespace cleave
