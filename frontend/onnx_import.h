#pragma once
// ONNX -> IR (DESIGN §3, §8).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cleave {

struct ImportOptions {
  /** Fixes the symbolic batch dimension of graph inputs (wherever it is: that dim becomes the sample axis). */
  std::optional<int64_t> batch;
  /** --batch-axis NAME=K: graph input NAME's sample axis is K (else its symbolic dim, else 0). */
  std::map<std::string, int> batch_axes;
  /** Load initializer data (false: shapes only, for planning huge models; external data is then referenced). */
  bool load_data = true;
  /** Reference the external data of float initializers (Tensor::external) instead of reading it: the stage that needs
   *  the values reads them (ir/tensor_data.h), so `cleave compile` holds one weight at a time. */
  bool defer_external_data = false;
  /** Graph inputs whose values are known at compile time (by name): imported as constants, so shape/axes/index
   *  inputs fold into attributes. The conformance runner binds a node test's integer inputs this way. */
  std::map<std::string, Tensor> input_values;
};

/** Loads an .onnx file into a forward IR graph (ops in topological order, static shapes, constants folded,
 *  initializers as param (float) or constant tensors). If the model has a TrainingInfoProto, the result is the
 *  whole training graph it describes (Gradient nodes differentiated, optimizer ops, update bindings as assigns).
 *  Throws UserError with one line naming the file and the problem; exit code 2 when listing unsupported nodes. */
Graph import_onnx(const std::string &path, const ImportOptions &opts = {});

/** protobuf refuses to serialize a message of 2 GB or more. */
inline constexpr size_t kProtobufLimit = 2147483647;

/** Writes `model_path`'s model to `out_path` with the initializers named in `values` replaced (dtype-native bytes,
 *  shape unchanged). The main graph's external data is copied in, so the result stands alone. When the model would
 *  pass `inline_limit` bytes, the initializers' bytes go to `out_path`.<hash>.data beside it as ONNX external data
 *  (location relative to the model), and the data file of the model it replaces is removed. Each file goes through a
 *  temporary file in out_path's directory and is renamed, so a failure leaves nothing behind. A name of `values` that
 *  is no initializer is an error (naming `flag`, the output's flag), unless `skip_others` (a checkpoint's optimizer
 *  state). */
void save_onnx_with_initializers(const std::string &model_path, const std::string &out_path,
                                 std::map<std::string, std::vector<uint8_t>> values,
                                 const std::string &flag = "--save-model", bool skip_others = false,
                                 size_t inline_limit = kProtobufLimit);

}  // namespace cleave
