// save_onnx_with_initializers: write a model back with new initializer values (e.g. trained weights).
#include <onnx/common/file_utils.h>
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string_view>
#include <vector>

#include "frontend/model_loader.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/file_io.h"

namespace cleave {
namespace {

// In a model saved with external data, tensors smaller than this stay inline (onnx.save_model's size_threshold).
constexpr size_t kExternalMin = 1024;

void set_raw(onnx::TensorProto &tp, std::string bytes) {
  tp.clear_float_data();
  tp.clear_double_data();
  tp.clear_int32_data();
  tp.clear_int64_data();
  tp.clear_external_data();
  tp.set_data_location(onnx::TensorProto::DEFAULT);
  tp.set_raw_data(std::move(bytes));
}

}  // namespace

void save_onnx_with_initializers(const std::string &model_path, const std::string &out_path,
                                 std::map<std::string, std::vector<uint8_t>> values, const std::string &flag,
                                 bool skip_others, size_t inline_limit) {
  check_output_file(flag, out_path);
  onnx::ModelProto m = load_model(model_path);
  std::string model_dir = std::filesystem::path(model_path).parent_path().string();
  if (model_dir.empty()) model_dir = ".";
  for (auto &tp : *m.mutable_graph()->mutable_initializer()) {
    std::string what = model_path + ": initializer \"" + tp.name() + "\"";
    auto it = values.find(tp.name());
    if (it == values.end()) {
      // The source's external data: copied, so the saved model needs no file beside the source model.
      if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
        std::vector<uint8_t> bytes = tensor_from_proto(tp, model_dir, what).data;  // read and checked as on import
        set_raw(tp, std::string(bytes.begin(), bytes.end()));
      }
      continue;
    }
    std::optional<DType> dt = dtype_from_onnx(tp.data_type());
    if (!dt) CLEAVE_USER_ERROR(what, ": element type ", onnx_dtype_name(tp.data_type()), " is not supported");
    Shape shape(tp.dims().begin(), tp.dims().end());
    int64_t nbytes = checked_num_elements(shape, what) * dtype_size(*dt);
    if (static_cast<int64_t>(it->second.size()) != nbytes)
      CLEAVE_USER_ERROR(what, ": new value has ", it->second.size(), " bytes, shape ", shape_str(shape), " needs ",
                        nbytes);
    set_raw(tp, std::string(it->second.begin(), it->second.end()));
    values.erase(it);  // a large model's weights are then held twice at most
  }
  if (!values.empty() && !skip_others)
    CLEAVE_USER_ERROR(model_path, ": no initializer named \"", values.begin()->first, "\"");

  // A model past protobuf's limit keeps its initializers' bytes beside it as ONNX external data, in
  // OUT.<hash of the bytes>.data: the file is new (or already holds these bytes), so the model that was at OUT stays
  // whole until the new one replaces it, and a failure removes only what this save wrote.
  namespace fs = std::filesystem;
  fs::path target = out_path;
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(target, ec))) target = fs::canonical(target, ec);  // the model lands there
  std::string data_path, data;
  bool data_existed = false;
  if (m.ByteSizeLong() > inline_limit) {
    size_t total = 0;
    for (const auto &tp : m.graph().initializer())
      if (tp.raw_data().size() >= kExternalMin) total += tp.raw_data().size();
    data.reserve(total);
    std::vector<std::pair<onnx::TensorProto *, size_t>> moved;  // (tensor, its bytes)
    for (auto &tp : *m.mutable_graph()->mutable_initializer()) {
      size_t nbytes = tp.raw_data().size();
      if (nbytes < kExternalMin) continue;
      data += tp.raw_data();
      std::string().swap(*tp.mutable_raw_data());  // (clear() would keep the capacity: the bytes twice)
      tp.clear_raw_data();
      moved.emplace_back(&tp, nbytes);
    }
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string_view>{}(data));
    std::string location = target.filename().string() + "." + hash + ".data";
    data_path = (target.parent_path() / location).string();
    check_output_file(flag, data_path);
    data_existed = fs::exists(data_path, ec);
    size_t offset = 0;
    for (auto [tp, nbytes] : moved) {
      tp->set_data_location(onnx::TensorProto::EXTERNAL);
      auto entry = [&, tp = tp](const std::string &key, const std::string &value) {
        onnx::StringStringEntryProto *e = tp->add_external_data();
        e->set_key(key);
        e->set_value(value);
      };
      entry("location", location);
      entry("offset", std::to_string(offset));
      entry("length", std::to_string(nbytes));
      offset += nbytes;
    }
    if (m.ByteSizeLong() > inline_limit)
      CLEAVE_USER_ERROR(flag, ": ", out_path, ": the model without its initializers still has ", m.ByteSizeLong(),
                        " bytes, past protobuf's limit");
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) CLEAVE_USER_ERROR(out_path, ": serializing the model failed");
  std::set<std::string> replaced_data;  // the external data files of the model at OUT now, if any
  {
    onnx::ModelProto old;
    std::ifstream in(target, std::ios::binary);
    // (a model with external data is small; a large one at OUT holds its bytes inline and has no data file)
    if (in && fs::file_size(target, ec) < (64 << 20) && !ec && old.ParseFromIstream(&in))
      for (const auto &tp : old.graph().initializer())
        for (const auto &e : tp.external_data())
          if (e.key() == "location") replaced_data.insert(e.value());
  }
  if (!data_path.empty()) {
    write_file_atomically(flag, data_path, data);
    std::string().swap(data);
  }
  try {
    write_file_atomically(flag, out_path, bytes);
  } catch (...) {
    if (!data_path.empty() && !data_existed) std::remove(data_path.c_str());
    throw;
  }
  // The data file of the model this one replaced, if it was one of ours (OUT.<16 hex digits>.data): nothing reads it
  // now.
  std::string prefix = target.filename().string() + ".", kept = fs::path(data_path).filename().string();
  for (const std::string &name : replaced_data) {
    bool ours = name.size() == prefix.size() + 16 + 5 && name.compare(0, prefix.size(), prefix) == 0 &&
                name.compare(name.size() - 5, 5, ".data") == 0 &&
                name.find_first_not_of("0123456789abcdef", prefix.size()) == prefix.size() + 16;
    if (ours && name != kept) fs::remove(target.parent_path() / name, ec);
  }
}

}  // namespace cleave
