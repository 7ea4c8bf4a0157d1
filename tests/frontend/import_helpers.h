#pragma once
// Importing a ModelBuilder's model in the frontend tests: the graph, or the one-line error it must give.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "frontend/onnx_import.h"
#include "ir/error.h"
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

}  // namespace cleave::test

#define EXPECT_HAS(msg, sub) EXPECT_NE((msg).find(sub), std::string::npos) << "message: " << (msg)
