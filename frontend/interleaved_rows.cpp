#include "frontend/interleaved_rows.h"

#include <numeric>

#include "frontend/importer.h"

namespace cleave {
namespace {

/** The attribute `name` of a Gemm is absent or equals `value`. */
bool attr_is(const onnx::NodeProto &n, const char *name, double value) {
  for (const auto &a : n.attribute())
    if (a.name() == name) return a.type() == onnx::AttributeProto::FLOAT ? a.f() == value : a.i() == value;
  return true;
}

}  // namespace

std::map<int, RowGemm> find_row_gemms(const onnx::GraphProto &g) {
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const auto &t : g.initializer()) initializers[t.name()] = &t;
  std::map<std::string, std::vector<int>> readers;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto &in : g.node(i).input())
      if (!in.empty()) readers[in].push_back(i);
  for (const auto &o : g.output()) readers[o.name()].push_back(-1);
  // The only reader of `name`, or -1.
  auto only_reader = [&](const std::string &name) {
    auto r = readers.find(name);
    return r != readers.end() && r->second.size() == 1 ? r->second[0] : -1;
  };
  auto initializer_of_rank = [&](const std::string &name, int rank) {
    auto t = initializers.find(name);
    return t != initializers.end() && t->second->dims_size() == rank &&
           t->second->data_type() == onnx::TensorProto::FLOAT;
  };
  std::map<int, RowGemm> found;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto &first = g.node(i);
    if (!is_onnx_op(first, "Reshape") || first.output_size() != 1) continue;
    int k = only_reader(first.output(0));
    if (k < 0) continue;
    const onnx::NodeProto &gemm = g.node(k);
    if (!is_onnx_op(gemm, "Gemm") || gemm.input_size() < 2 || gemm.input(0) != first.output(0) ||
        gemm.input(1) == first.output(0) || !initializer_of_rank(gemm.input(1), 2) || gemm.output_size() != 1 ||
        !attr_is(gemm, "transA", 0) || !attr_is(gemm, "alpha", 1.0) || !attr_is(gemm, "beta", 1.0))
      continue;
    if (gemm.input_size() > 2 && !gemm.input(2).empty() && !initializer_of_rank(gemm.input(2), 1)) continue;
    int j = only_reader(gemm.output(0));
    if (j < 0 || !is_onnx_op(g.node(j), "Reshape") || g.node(j).input(0) != gemm.output(0)) continue;
    found[i] = {i, k, j};
  }
  return found;
}

bool rows_interleave_samples(Importer &im, const std::string &x) {
  if (!im.defined(x) || im.is_const(x)) return false;  // constants fold; use() would add them to the graph
  return im.batch_dims.update(im.g)[static_cast<size_t>(im.use(x))] > 0;
}

bool translate_row_gemm(Importer &im, const NodeCtx &first, const NodeCtx &gemm, const NodeCtx &last) {
  Shape x = im.type_of(first.in(0), first).shape;
  Shape rows = reshape_target(first, x, const_ints(im, first, 1, "\"shape\""), first.attrs.get_int("allowzero", 0));
  Shape w = im.type_of(gemm.in(1), gemm).shape;
  bool trans_b = gemm.attrs.get_int("transB", 0) != 0;
  int64_t in_dim = trans_b ? w[1] : w[0], out_dim = trans_b ? w[0] : w[1];
  if (rows.size() != 2 || rows[1] != in_dim) return false;
  Shape y = reshape_target(last, {rows[0], out_dim}, const_ints(im, last, 1, "\"shape\""),
                           last.attrs.get_int("allowzero", 0));
  // [s..., F] with s multiplying to the rows; at least two leading dims (else the rows are already [R, F]).
  if (y.size() < 3 || y.back() != out_dim ||
      std::accumulate(y.begin(), y.end() - 1, int64_t{1}, std::multiplies<>()) != rows[0])
    return false;
  Shape x_nd(y.begin(), y.end() - 1);
  x_nd.push_back(in_dim);
  auto emit = [&](OpKind kind, std::vector<std::string> inputs, const std::string &out, const std::string &name,
                  AttrMap attrs = {}) {
    OpSpec s;
    s.kind = kind;
    s.phase = last.phase;
    s.inputs = std::move(inputs);
    s.outputs = {out};
    s.attrs = std::move(attrs);
    im.emit(s, name, last);
  };
  std::string xs = im.fresh_tensor_name(first.out(0) + ".nd");
  emit(OpKind::Reshape, {first.in(0)}, xs, first.name, {{"shape", std::vector<int64_t>(x_nd)}});
  bool bias = !gemm.in(2).empty();
  std::string product = bias ? im.fresh_tensor_name(gemm.out(0) + ".nd") : last.out(0);
  AttrMap by_transposed;
  if (trans_b) by_transposed["transB"] = int64_t{1};
  emit(OpKind::MatMul, {xs, gemm.in(1)}, product, gemm.name, by_transposed);
  if (bias) emit(OpKind::Add, {product, gemm.in(2)}, last.out(0), im.fresh_op_name(gemm.name + ".bias"));
  return true;
}

}  // namespace cleave
