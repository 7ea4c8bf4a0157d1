#include "frontend/fuse_decomposed.h"

#include <cmath>
#include <optional>
#include <set>

#include "frontend/node_attrs.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

bool is_onnx_op(const onnx::NodeProto &n, const char *op) {
  return n.op_type() == op && is_onnx_domain(n.domain()) && n.output_size() == 1;
}

const onnx::AttributeProto *find_attr(const onnx::NodeProto &n, const std::string &name) {
  for (const auto &a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

/** k when `n` is ReduceMean(x) over the last k axes written [-k, ..., -1] with keepdims 1, else 0. */
int trailing_mean_axes(const onnx::NodeProto &n) {
  if (!is_onnx_op(n, "ReduceMean") || n.input_size() != 1) return 0;
  const onnx::AttributeProto *keep = find_attr(n, "keepdims");
  if (keep && keep->i() != 1) return 0;
  const onnx::AttributeProto *axes = find_attr(n, "axes");
  if (!axes || axes->ints_size() == 0) return 0;
  int k = axes->ints_size();
  for (int i = 0; i < k; ++i)
    if (axes->ints(i) != i - k) return 0;
  return k;
}

class Chains {
 public:
  explicit Chains(const onnx::GraphProto &g) : g_(g) {
    for (int i = 0; i < g.node_size(); ++i) {
      for (const std::string &in : g.node(i).input()) consumers_[in].push_back(i);
      for (const std::string &out : g.node(i).output()) producer_[out] = i;
    }
    for (const auto &out : g.output()) graph_outputs_.insert(out.name());
    for (int i = 0; i < g.initializer_size(); ++i) initializer_[g.initializer(i).name()] = i;
  }

  /** The chain starting at node i (a ReduceMean of x), if it is one. */
  std::optional<LayerNormChain> match(int i) const {
    const onnx::NodeProto &mean = g_.node(i);
    LayerNormChain mt;
    mt.k = trailing_mean_axes(mean);
    if (mt.k == 0) return std::nullopt;
    mt.x = mean.input(0);
    mt.nodes.push_back(i);
    auto next = [&](const std::string &value, const char *op) { return sole_reader(value, op, mt.nodes); };
    const onnx::NodeProto *sub = next(mean.output(0), "Sub");
    if (!sub || sub->input_size() != 2 || sub->input(0) != mt.x || sub->input(1) != mean.output(0)) return std::nullopt;
    // d = x - mean feeds exactly the Pow and the Div.
    const std::string &d = sub->output(0);
    auto dc = consumers_.find(d);
    if (graph_outputs_.count(d) || dc == consumers_.end() || dc->second.size() != 2) return std::nullopt;
    int pow_i = dc->second[0], div_i = dc->second[1];
    if (is_onnx_op(g_.node(div_i), "Pow")) std::swap(pow_i, div_i);
    const onnx::NodeProto &pow = g_.node(pow_i), &div = g_.node(div_i);
    if (!is_onnx_op(pow, "Pow") || !is_onnx_op(div, "Div") || pow.input_size() != 2 || pow.input(0) != d ||
        div.input_size() != 2 || div.input(0) != d || scalar(pow.input(1)) != 2.0)
      return std::nullopt;
    mt.nodes.push_back(pow_i);
    const onnx::NodeProto *var = next(pow.output(0), "ReduceMean");
    if (!var || trailing_mean_axes(*var) != mt.k) return std::nullopt;
    const onnx::NodeProto *add = next(var->output(0), "Add");
    if (!add || add->input_size() != 2) return std::nullopt;
    std::optional<double> eps = scalar(add->input(add->input(0) == var->output(0) ? 1 : 0));
    if (!eps || !(*eps >= 0)) return std::nullopt;
    mt.eps = *eps;
    const onnx::NodeProto *sqrt = next(add->output(0), "Sqrt");
    if (!sqrt) return std::nullopt;
    if (!next(sqrt->output(0), "Div") || mt.nodes.back() != div_i || div.input(1) != sqrt->output(0))
      return std::nullopt;
    const onnx::NodeProto *mul = next(div.output(0), "Mul");
    if (!mul || mul->input_size() != 2) return std::nullopt;
    mt.scale = mul->input(mul->input(0) == div.output(0) ? 1 : 0);
    mt.normalized = float_initializer(mt.scale, mt.k);
    if (mt.normalized.empty()) return std::nullopt;
    mt.y = mul->output(0);
    // An Add of a float initializer of the normalized shape right after is the bias.
    auto mc = consumers_.find(mt.y);
    if (!graph_outputs_.count(mt.y) && mc != consumers_.end() && mc->second.size() == 1) {
      const onnx::NodeProto &bias = g_.node(mc->second[0]);
      if (is_onnx_op(bias, "Add") && bias.input_size() == 2) {
        std::string b = bias.input(bias.input(0) == mt.y ? 1 : 0);
        if (b != mt.y && float_initializer(b, mt.k) == mt.normalized) {
          mt.bias = b;
          mt.y = bias.output(0);
          mt.nodes.push_back(mc->second[0]);
        }
      }
    }
    return mt;
  }

  /** The GELU chain starting at node i (the Div or Mul of x), if it is one. */
  std::optional<GeluChain> match_gelu(int i) const {
    const onnx::NodeProto &first = g_.node(i);
    GeluChain c;
    if (first.input_size() != 2) return std::nullopt;
    c.x = first.input(0);
    if (is_onnx_op(first, "Div")) {
      if (!near(scalar(first.input(1), true), std::sqrt(2.0))) return std::nullopt;
    } else if (is_onnx_op(first, "Mul")) {
      if (!near(scalar(first.input(1), true), std::sqrt(0.5))) {
        c.x = first.input(1);
        if (!near(scalar(first.input(0), true), std::sqrt(0.5))) return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
    c.nodes.push_back(i);
    // Each step after Erf is a two-input node (other() reads both inputs).
    auto next = [&](const std::string &value, const char *op) -> const onnx::NodeProto * {
      const onnx::NodeProto *n = sole_reader(value, op, c.nodes);
      return n && (op == std::string("Erf") || n->input_size() == 2) ? n : nullptr;
    };
    // The operand of a two-input node other than `value`.
    auto other = [](const onnx::NodeProto &n, const std::string &value) {
      return n.input(0) == value ? n.input(1) : n.input(0);
    };
    const onnx::NodeProto *erf = next(first.output(0), "Erf");
    if (!erf) return std::nullopt;
    const onnx::NodeProto *add = next(erf->output(0), "Add");
    if (!add || !near(scalar(other(*add, erf->output(0)), true), 1.0)) return std::nullopt;
    const onnx::NodeProto *mul = next(add->output(0), "Mul");
    if (!mul || other(*mul, add->output(0)) != c.x) return std::nullopt;
    const onnx::NodeProto *half = next(mul->output(0), "Mul");
    if (!half || !near(scalar(other(*half, mul->output(0)), true), 0.5)) return std::nullopt;
    c.y = half->output(0);
    return c;
  }

 private:
  /** The one reader of `value` when it is a node of op `op` and `value` is not a graph output (a chain's next step),
   *  appended to `nodes`; else null. */
  const onnx::NodeProto *sole_reader(const std::string &value, const char *op, std::vector<int> &nodes) const {
    auto it = consumers_.find(value);
    if (graph_outputs_.count(value) || it == consumers_.end() || it->second.size() != 1) return nullptr;
    const onnx::NodeProto &n = g_.node(it->second[0]);
    if (!is_onnx_op(n, op)) return nullptr;
    nodes.push_back(it->second[0]);
    return &n;
  }

  static bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * want; }

  /** The value of a one-element float constant (a Constant node's value/value_float, or an initializer); with
   *  `rank0`, only of a rank-0 one (a constant of shape [1, 1] would broadcast the result to more dims). */
  std::optional<double> scalar(const std::string &name, bool rank0 = false) const {
    const onnx::TensorProto *tp = nullptr;
    auto p = producer_.find(name);
    if (p != producer_.end()) {
      const onnx::NodeProto &c = g_.node(p->second);
      if (!is_onnx_op(c, "Constant") || c.attribute_size() != 1) return std::nullopt;
      const onnx::AttributeProto &a = c.attribute(0);
      if (a.name() == "value_float") return a.f();
      if (a.name() != "value") return std::nullopt;
      tp = &a.t();
    } else {
      auto it = initializer_.find(name);
      if (it == initializer_.end()) return std::nullopt;
      tp = &g_.initializer(it->second);
    }
    if (tp->data_type() != onnx::TensorProto::FLOAT && tp->data_type() != onnx::TensorProto::DOUBLE)
      return std::nullopt;
    if (rank0 && tp->dims_size() != 0) return std::nullopt;
    try {
      Tensor t = tensor_from_proto(*tp, "", "constant \"" + name + "\"");
      std::vector<double> v = data_as_doubles(t);
      if (v.size() == 1) return v[0];
    } catch (const UserError &) {  // external or malformed data: not a chain we rewrite
    }
    return std::nullopt;
  }

  /** The dims of `name` when it is a float initializer of rank k, else an empty shape. */
  Shape float_initializer(const std::string &name, int k) const {
    auto it = initializer_.find(name);
    if (it == initializer_.end() || producer_.count(name)) return {};
    const onnx::TensorProto &tp = g_.initializer(it->second);
    if (tp.data_type() != onnx::TensorProto::FLOAT || tp.dims_size() != k) return {};
    return Shape(tp.dims().begin(), tp.dims().end());
  }

  const onnx::GraphProto &g_;
  std::map<std::string, std::vector<int>> consumers_;
  std::map<std::string, int> producer_, initializer_;
  std::set<std::string> graph_outputs_;
};

/** Every chain `match` finds in g, by the index of its first node; a chain sharing a node with an earlier one is
 *  left out. */
template <typename Chain>
std::map<int, Chain> find_chains(const onnx::GraphProto &g, std::optional<Chain> (Chains::*match)(int) const) {
  Chains chains(g);
  std::map<int, Chain> found;
  std::set<int> taken;
  for (int i = 0; i < g.node_size(); ++i) {
    std::optional<Chain> c = (chains.*match)(i);
    if (!c) continue;
    bool overlaps = false;
    for (int n : c->nodes) overlaps |= taken.count(n) > 0;
    if (overlaps) continue;
    taken.insert(c->nodes.begin(), c->nodes.end());
    found.emplace(i, *c);
  }
  return found;
}

}  // namespace

std::map<int, LayerNormChain> find_layer_norms(const onnx::GraphProto &g) {
  return find_chains<LayerNormChain>(g, &Chains::match);
}

std::map<int, GeluChain> find_gelus(const onnx::GraphProto &g) {
  return find_chains<GeluChain>(g, &Chains::match_gelu);
}

onnx::NodeProto gelu_node(const GeluChain &c) {
  onnx::NodeProto n;
  n.set_op_type("Gelu");
  n.add_input(c.x);
  n.add_output(c.y);
  onnx::AttributeProto *approximate = n.add_attribute();
  approximate->set_name("approximate");
  approximate->set_type(onnx::AttributeProto::STRING);
  approximate->set_s("none");
  return n;
}

onnx::NodeProto layer_norm_node(const LayerNormChain &c) {
  onnx::NodeProto n;
  n.set_op_type("LayerNormalization");
  n.add_input(c.x);
  n.add_input(c.scale);
  if (!c.bias.empty()) n.add_input(c.bias);
  n.add_output(c.y);
  onnx::AttributeProto *axis = n.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-c.k);
  onnx::AttributeProto *eps = n.add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(static_cast<float>(c.eps));
  return n;
}

}  // namespace cleave
