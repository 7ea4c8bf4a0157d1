#include "frontend/transposed_weights.h"

#include <set>

#include "frontend/node_attrs.h"

namespace cleave {
namespace {

/** Whether `perm` (size r >= 2) keeps every dim but swaps the last two. */
bool swaps_last_two(const google::protobuf::RepeatedField<int64_t> &perm) {
  int r = perm.size();
  if (r < 2 || perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return false;
  for (int d = 0; d + 2 < r; ++d)
    if (perm[d] != d) return false;
  return true;
}

}  // namespace

std::map<int, std::string> find_transposed_operands(const onnx::ModelProto &m, const onnx::GraphProto &g) {
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const auto &t : g.initializer()) initializers[t.name()] = &t;
  std::set<std::string> kept;  // graph outputs and what subgraphs and training-info graphs read
  for (const auto &o : g.output()) kept.insert(o.name());
  for (const auto &info : m.training_info()) {
    subgraph_reads(info.algorithm(), true, kept);
    subgraph_reads(info.initialization(), true, kept);
  }
  subgraph_reads(g, false, kept);
  std::map<std::string, int> transposes;  // XT -> node index
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (!is_onnx_op(n, "Transpose") || n.input_size() != 1 || n.output_size() != 1 || kept.count(n.output(0)))
      continue;
    bool swap = false;
    bool has_perm = false;
    for (const auto &a : n.attribute())
      if (a.name() == "perm") {
        has_perm = true;
        swap = swaps_last_two(a.ints());
      }
    if (!has_perm) {  // perm absent reverses the dims: a swap for a matrix
      auto w = initializers.find(n.input(0));
      swap = w != initializers.end() && w->second->dims_size() == 2;
    }
    if (swap) transposes[n.output(0)] = i;
  }
  // Every reader of XT must be a MatMul.
  for (const auto &n : g.node())
    for (int k = 0; k < n.input_size(); ++k) {
      auto t = transposes.find(n.input(k));
      if (t != transposes.end() && !is_onnx_op(n, "MatMul")) transposes.erase(t);
    }
  std::map<int, std::string> found;
  for (const auto &[xt, i] : transposes) found[i] = g.node(i).input(0);
  return found;
}

}  // namespace cleave
