#include "frontend/transposed_weights.h"

#include <set>

namespace cleave {

std::map<int, std::string> find_transposed_weights(const onnx::GraphProto &g) {
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const auto &t : g.initializer()) initializers[t.name()] = &t;
  std::set<std::string> outputs;
  for (const auto &o : g.output()) outputs.insert(o.name());
  std::map<std::string, int> transposes;  // WT -> node index
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (n.op_type() != "Transpose" || !(n.domain().empty() || n.domain() == "ai.onnx") || n.input_size() != 1 ||
        n.output_size() != 1 || outputs.count(n.output(0)))
      continue;
    auto w = initializers.find(n.input(0));
    if (w == initializers.end() || w->second->dims_size() != 2 || w->second->data_type() != onnx::TensorProto::FLOAT)
      continue;
    bool swap = true;  // perm absent reverses the dims: [1, 0] for a matrix
    for (const auto &a : n.attribute())
      if (a.name() == "perm") swap = a.ints_size() == 2 && a.ints(0) == 1 && a.ints(1) == 0;
    if (swap) transposes[n.output(0)] = i;
  }
  // Every reader of WT must be a MatMul taking it as its right operand only.
  for (const auto &n : g.node())
    for (int k = 0; k < n.input_size(); ++k) {
      auto t = transposes.find(n.input(k));
      if (t == transposes.end()) continue;
      bool right_of_matmul = n.op_type() == "MatMul" && (n.domain().empty() || n.domain() == "ai.onnx") && k == 1 &&
                             n.input(0) != n.input(1);
      if (!right_of_matmul) transposes.erase(t);
    }
  std::map<int, std::string> found;
  for (const auto &[wt, i] : transposes) found[i] = g.node(i).input(0);
  return found;
}

}  // namespace cleave
