#pragma once
// Builds small ONNX models with the protobuf API for the frontend tests.
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace cleave::test {

/** n floats uniform in [-bound, bound) from mt19937(seed): initializers and inputs of the test models. */
inline std::vector<float> random_floats(size_t n, unsigned seed, float bound) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-bound, bound);
  std::vector<float> v(n);
  for (float &x : v) x = u(rng);
  return v;
}

inline constexpr int kF32 = onnx::TensorProto::FLOAT;
inline constexpr int kI64 = onnx::TensorProto::INT64;
/** A symbolic dimension in input(): named "batch". */
inline constexpr int64_t kSym = -1;
/** A dimension with neither value nor name. */
inline constexpr int64_t kUnknown = -2;

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 13) {
    m.set_ir_version(8);
    m.set_producer_name("cleave-test");
    auto *o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m.mutable_graph()->set_name("test");
  }
  onnx::GraphProto &g() { return *m.mutable_graph(); }

  void input(const std::string &name, int elem, const std::vector<int64_t> &dims) {
    value_info(g().add_input(), name, elem, &dims);
  }
  /** A graph output of known rank and unknown dims (onnx's checker wants a shape; inference fills it). */
  void output(const std::string &name, int rank, int elem = kF32) {
    std::vector<int64_t> dims(static_cast<size_t>(rank), kUnknown);
    value_info(g().add_output(), name, elem, &dims);
  }

  onnx::TensorProto *init_f(const std::string &name, const std::vector<int64_t> &dims, std::vector<float> values) {
    auto *t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(kF32);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return t;
  }
  onnx::TensorProto *init_i64(const std::string &name, const std::vector<int64_t> &dims,
                              std::vector<int64_t> values) {
    auto *t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(kI64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return t;
  }
  onnx::NodeProto &node(const std::string &op, const std::vector<std::string> &ins,
                        const std::vector<std::string> &outs, const std::string &name = "",
                        const std::string &domain = "") {
    auto *n = g().add_node();
    n->set_op_type(op);
    if (!name.empty()) n->set_name(name);
    if (!domain.empty()) n->set_domain(domain);
    for (const auto &i : ins) n->add_input(i);
    for (const auto &o : outs) n->add_output(o);
    return *n;
  }
  void add_opset(const std::string &domain, int64_t version) {
    auto *o = m.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
  std::string save(const std::filesystem::path &path) const {
    std::ofstream os(path, std::ios::binary);
    m.SerializeToOstream(&os);
    return path.string();
  }

  onnx::ModelProto m;

 private:
  static void value_info(onnx::ValueInfoProto *vi, const std::string &name, int elem,
                         const std::vector<int64_t> *dims) {
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    if (!dims) return;
    auto *shape = tt->mutable_shape();
    for (int64_t d : *dims) {
      auto *dim = shape->add_dim();
      if (d == kSym) dim->set_dim_param("batch");
      else if (d == kUnknown) continue;
      else dim->set_dim_value(d);
    }
  }
};

/** A Constant node `node_name` giving `name` = the float32 `v`, of rank 0 unless `dims` says otherwise. */
inline void float_constant(ModelBuilder &mb, const std::string &node_name, const std::string &name, float v,
                           const std::vector<int64_t> &dims = {}) {
  auto *a = mb.node("Constant", {}, {name}, node_name).add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_float_data(v);
  for (int64_t d : dims) a->mutable_t()->add_dims(d);
}

inline void set_int(onnx::NodeProto &n, const std::string &name, int64_t v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void set_float(onnx::NodeProto &n, const std::string &name, float v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void set_string(onnx::NodeProto &n, const std::string &name, const std::string &v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void set_ints(onnx::NodeProto &n, const std::string &name, const std::vector<int64_t> &v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void set_floats(onnx::NodeProto &n, const std::string &name, const std::vector<float> &v) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

/** A fresh directory for one test, removed by the destructor. */
class TempDir {
 public:
  explicit TempDir(const std::string &tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("cleave_frontend_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path &path() const { return path_; }
  std::filesystem::path operator/(const std::string &s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

}  // namespace cleave::test
