#pragma once
// Reads tests/interp/reference.txt (written by make_reference.py with torch/numpy) and onnx_cases.txt (copied from
// ONNX's node test data by make_onnx_cases.py), and builds small graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "ir/graph.h"
#include "ir/interp/interpreter.h"

namespace cleave::interp::testing {

/** The named arrays of reference.txt, loaded once. */
inline const std::map<std::string, Value> &reference() {
  static const std::map<std::string, Value> data = [] {
    std::map<std::string, Value> out;
    for (const char *file : {"reference.txt", "onnx_cases.txt", "activation_reference.txt"}) {
    std::ifstream in(std::string(CLEAVE_SOURCE_DIR) + "/tests/interp/" + file);
    if (!in) throw std::runtime_error(std::string("cannot open tests/interp/") + file);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string name, dims;
      ls >> name >> dims;
      Value v;
      v.dtype = DType::f32;
      if (dims != "-") {
        std::istringstream ds(dims);
        std::string d;
        while (std::getline(ds, d, ',')) v.shape.push_back(std::stoll(d));
      }
      // Numbers as Python's repr writes them, "inf" and "-inf" included (istream's >> reads no infinity).
      for (std::string x; ls >> x;) v.data.push_back(std::strtod(x.c_str(), nullptr));
      if (static_cast<int64_t>(v.data.size()) != num_elements(v.shape))
        throw std::runtime_error("reference.txt: bad entry " + name);
      out.emplace(name, std::move(v));
    }
    }
    return out;
  }();
  return data;
}

inline const Value &ref_array(const std::string &name) {
  auto it = reference().find(name);
  if (it == reference().end()) throw std::runtime_error("reference.txt has no entry " + name);
  return it->second;
}

/** A graph under construction plus the values fed to it. */
struct Case {
  Graph g;
  std::map<TensorId, Value> feeds;

  /** A source tensor fed with the reference array `ref_name` (converted to `dtype`). */
  TensorId feed(const std::string &ref_name, DType dtype = DType::f32, Role role = Role::input) {
    Value v = ref_array(ref_name);
    v.dtype = dtype;
    TensorId id = g.add_tensor(ref_name, dtype, v.shape, role);
    feeds[id] = v;
    return id;
  }
  TensorId feed_value(const std::string &name, Value v, Role role = Role::input) {
    TensorId id = g.add_tensor(name, v.dtype, v.shape, role);
    feeds[id] = std::move(v);
    return id;
  }
  TensorId out(const std::string &name, const Shape &shape, DType dtype = DType::f32) {
    return g.add_tensor(name, dtype, shape, Role::activation);
  }
  /** An output shaped like the reference array `ref_name`. */
  TensorId out_like(const std::string &ref_name, DType dtype = DType::f32) {
    return out(ref_name + ".out", ref_array(ref_name).shape, dtype);
  }
  OpId op(OpKind kind, std::vector<TensorId> ins, std::vector<TensorId> outs, AttrMap attrs = {},
          Phase phase = Phase::forward) {
    Op o;
    o.name = g.fresh_op_name(std::string(op_kind_name(kind)));
    o.kind = kind;
    o.inputs = std::move(ins);
    o.outputs = std::move(outs);
    o.attrs = std::move(attrs);
    o.phase = phase;
    return g.add_op(std::move(o));
  }
  Values run(int64_t step = 1) {
    Values v = initial_values(g);
    for (auto &[id, val] : feeds) v[static_cast<size_t>(id)] = val;
    run_graph(g, v, Context{step});
    return v;
  }
};

/** Every element of `got` within 1e-6 relative + 1e-6 absolute of the torch reference (float32 rounding of a
 *  float64 result is ~6e-8 relative; anything wrong in a kernel is far larger); an infinity must be the same one. */
inline void expect_matches(const Values &values, TensorId id, const std::string &ref_name, double tol = 1e-6) {
  ASSERT_TRUE(values.at(static_cast<size_t>(id)).has_value()) << ref_name << " not computed";
  const Value &got = *values[static_cast<size_t>(id)];
  const Value &want = ref_array(ref_name);
  ASSERT_EQ(got.shape, want.shape) << ref_name;
  int bad = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    double err = got.data[i] == want.data[i] ? 0.0 : std::abs(got.data[i] - want.data[i]);  // inf == inf
    if (err != 0 && !(err <= tol * (1 + std::abs(want.data[i]))) && bad++ < 5)
      ADD_FAILURE() << ref_name << "[" << i << "]: got " << got.data[i] << ", want " << want.data[i];
  }
  EXPECT_EQ(bad, 0) << ref_name << ": " << bad << " of " << want.data.size() << " elements differ";
}

}  // namespace cleave::interp::testing
