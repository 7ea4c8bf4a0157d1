#pragma once
// Importing a ModelBuilder's model in the frontend tests: the graph, or the one-line error it must give; and looking
// at what came out (ops of a kind, a forward run on the interpreter).
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/interp/interpreter.h"
#include "tests/frontend/model_builder.h"

namespace cleave::test {

/** Imports `mb`, saved as model.onnx in a fresh directory named after `tag`. */
inline Graph import(const ModelBuilder &mb, const std::string &tag, const ImportOptions &opts = {}) {
  TempDir dir(tag);
  return import_onnx(mb.save(dir / "model.onnx"), opts);
}

/** The UserError of importing `mb` (message, exit code), checked to be one line naming the file; fails the test if
 *  the import succeeds. */
inline std::pair<std::string, int> import_error(const ModelBuilder &mb, const std::string &tag,
                                                const ImportOptions &opts = {}) {
  try {
    import(mb, tag, opts);
  } catch (const UserError &e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    EXPECT_NE(msg.find("model.onnx"), std::string::npos) << "does not name the file: " << msg;
    return {msg, e.exit_code()};
  }
  ADD_FAILURE() << "import of " << tag << " succeeded";
  return {"", 0};
}

/** How many ops of `kind` the graph has. */
inline int count_ops(const Graph &g, OpKind kind) {
  int n = 0;
  for (const Op &op : g.ops()) n += op.kind == kind;
  return n;
}

/** Output `y` of the graph run forward on the interpreter with float32 input `x` = `values` (its shape the graph's). */
inline std::vector<double> run_forward(const Graph &g, const std::string &x, const std::vector<float> &values,
                                       const std::string &y) {
  interp::Values v = interp::initial_values(g);
  v[static_cast<size_t>(*g.find_tensor(x))] =
      interp::Value{DType::f32, g.tensor(*g.find_tensor(x)).shape, {values.begin(), values.end()}};
  interp::run_graph(g, v, interp::Context{});
  return v[static_cast<size_t>(*g.find_tensor(y))]->data;
}

}  // namespace cleave::test

#define EXPECT_HAS(msg, sub) EXPECT_NE((msg).find(sub), std::string::npos) << "message: " << (msg)
