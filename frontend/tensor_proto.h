#pragma once
// ONNX TensorProto -> IR Tensor: dtype mapping, typed fields, raw_data and external data.
#include <cstdint>
#include <optional>
#include <string>

#include "ir/graph.h"

namespace onnx {
class TensorProto;
}

namespace cleave {

/** The IR dtype of an ONNX TensorProto::DataType, or nullopt for one Cleave does not support. */
std::optional<DType> dtype_from_onnx(int32_t elem_type);
/** The ONNX TensorProto::DataType of an IR dtype. */
int32_t onnx_from_dtype(DType t);
/** "float16", "uint8", ...: the ONNX name of an element type, for messages. */
std::string onnx_dtype_name(int32_t elem_type);

/** Decodes `tp` (raw_data, the typed fields float_data/double_data/int64_data/int32_data, or external data) into a
 *  Tensor named tp.name() with role constant. `what` names the tensor in messages (e.g. `initializer "w"`).
 *  External data is read from `model_dir` only (location relative to it, no absolute paths, no escapes by `..` or
 *  symlinks); an empty model_dir rejects external data. With load_data false only dtype and shape are set, and
 *  external data is referenced (Tensor::external) instead of read; defer_external references it even when loading.
 *  A reference is checked for where it points (inside model_dir), not for whether the file exists yet.
 *  Throws UserError for unsupported dtypes, element-count overflow, and data that does not match the shape. */
Tensor tensor_from_proto(const onnx::TensorProto &tp, const std::string &model_dir, const std::string &what,
                         bool load_data = true, bool defer_external = false);

/** Checks that `tp`'s inline data (raw_data, or else its typed field) holds exactly what its dtype and dims need,
 *  without decoding it; external data is not checked here. Throws UserError naming `what`. ONNX's shape inference
 *  reads constant initializers (a Reshape's shape, a Slice's axes) and crashes on short ones, so import_onnx runs
 *  this on every initializer first. */
void check_inline_data(const onnx::TensorProto &tp, const std::string &what);

/** The reference to `tp`'s external data (canonical file inside model_dir, offset, the shape's byte size), checked as
 *  tensor_from_proto checks it but without touching the file. */
ExternalData external_data_ref(const onnx::TensorProto &tp, const std::string &model_dir, const std::string &what);

/** Checks `tp`'s external data like tensor_from_proto does (inside model_dir, file long enough) without reading it,
 *  and returns the file's canonical path. */
std::string external_data_path(const onnx::TensorProto &tp, const std::string &model_dir, const std::string &what);

/** Reads a file holding one serialized TensorProto (the conformance data's input_*.pb / output_*.pb). External
 *  data is resolved relative to the file's directory. Throws UserError naming the file. */
Tensor read_tensor_proto_file(const std::string &path);

}  // namespace cleave
