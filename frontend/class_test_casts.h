#pragma once
// torch exports torch.isinf(x) of a float32 x as IsInf(Cast(x, to=double)): the widening changes no value's class,
// and imported as it stands it would put a float64 tensor in a float32 model, which a bundle refuses (it computes in
// one float type). Cleave tests x itself.
#include <map>
#include <string>

#include <onnx/onnx_pb.h>

namespace cleave {

/** The Cast nodes of g whose result is not a graph output and is read only by IsNaN and IsInf nodes of g (no
 *  subgraph reads or outputs it): node index -> the Cast's input. (A model with training_info is left as it is: its
 *  algorithms may read any tensor of g.) Whether the Cast widens (which the importer checks when
 *  its input's type is known) decides whether it may be skipped. */
std::map<int, std::string> find_class_test_casts(const onnx::GraphProto &g);

}  // namespace cleave
