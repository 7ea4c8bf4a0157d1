// save_onnx_with_initializers: write a model back with new initializer values (e.g. trained weights).
#include <onnx/common/file_utils.h>
#include <onnx/onnx_pb.h>

#include "frontend/model_loader.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/file_io.h"

namespace cleave {

void save_onnx_with_initializers(const std::string &model_path, const std::string &out_path,
                                 std::map<std::string, std::vector<uint8_t>> values, const std::string &flag,
                                 bool skip_others) {
  onnx::ModelProto m = load_model(model_path);
  for (auto &tp : *m.mutable_graph()->mutable_initializer()) {
    auto it = values.find(tp.name());
    if (it == values.end()) continue;
    std::optional<DType> dt = dtype_from_onnx(tp.data_type());
    std::string what = model_path + ": initializer \"" + tp.name() + "\"";
    if (!dt) CLEAVE_USER_ERROR(what, ": element type ", onnx_dtype_name(tp.data_type()), " is not supported");
    Shape shape(tp.dims().begin(), tp.dims().end());
    int64_t nbytes = checked_num_elements(shape, what) * dtype_size(*dt);
    if (static_cast<int64_t>(it->second.size()) != nbytes)
      CLEAVE_USER_ERROR(what, ": new value has ", it->second.size(), " bytes, shape ", shape_str(shape), " needs ",
                        nbytes);
    tp.clear_float_data();
    tp.clear_double_data();
    tp.clear_int32_data();
    tp.clear_int64_data();
    tp.clear_external_data();
    tp.set_data_location(onnx::TensorProto::DEFAULT);
    tp.set_raw_data(std::string(it->second.begin(), it->second.end()));
    values.erase(it);  // a large model's weights are then held twice at most
  }
  if (!values.empty() && !skip_others)
    CLEAVE_USER_ERROR(model_path, ": no initializer named \"", values.begin()->first, "\"");

  // Other initializers may keep external data relative to the source model's directory.
  std::string bytes;
  if (!m.SerializeToString(&bytes)) CLEAVE_USER_ERROR(out_path, ": serializing the model failed");
  write_file_atomically(flag, out_path, bytes);
}

}  // namespace cleave
