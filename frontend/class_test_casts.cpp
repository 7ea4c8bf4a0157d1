#include "frontend/class_test_casts.h"

#include <set>

#include "frontend/node_attrs.h"

namespace cleave {
namespace {

bool default_domain(const onnx::NodeProto &n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

}  // namespace

std::map<int, std::string> find_class_test_casts(const onnx::GraphProto &g) {
  std::set<std::string> excluded;
  for (const auto &o : g.output()) excluded.insert(o.name());
  subgraph_reads(g, false, excluded);
  std::map<std::string, int> casts;  // result -> node index
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (n.op_type() == "Cast" && default_domain(n) && n.input_size() == 1 && n.output_size() == 1 &&
        !excluded.count(n.output(0)))
      casts[n.output(0)] = i;
  }
  for (const auto &n : g.node()) {
    bool class_test = (n.op_type() == "IsNaN" || n.op_type() == "IsInf") && default_domain(n);
    for (int k = 0; k < n.input_size(); ++k)
      if (!class_test || k > 0) casts.erase(n.input(k));
  }
  std::map<int, std::string> found;
  for (const auto &[result, i] : casts) found[i] = g.node(i).input(0);
  return found;
}

}  // namespace cleave
