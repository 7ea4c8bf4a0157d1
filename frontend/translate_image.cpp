// The layers of image models beyond Conv/pool/BatchNorm: InstanceNormalization, ConvTranspose and Resize (torch's
// InstanceNorm*d, ConvTranspose*d and Upsample / F.interpolate exports). Every attribute gets its ONNX default;
// ConvTranspose's auto_pad and output_shape become explicit pads and output_padding, Resize's scales/sizes inputs
// (compile-time constants) become attributes.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/importer.h"
#include "ir/error.h"

namespace cleave {
namespace {

[[noreturn]] void unsupported(const NodeCtx &n, const std::string &what) { throw UserError(n.label + ": " + what, 2); }

std::vector<int64_t> ints_attr(const NodeCtx &n, const char *name, size_t count, int64_t def) {
  std::vector<int64_t> v = n.attrs.opt_ints(name).value_or(std::vector<int64_t>(count, def));
  if (v.size() != count)
    n.fail("attribute \"" + std::string(name) + "\" needs " + std::to_string(count) + " entries");
  return v;
}

}  // namespace

void translate_instance_norm(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  if (x.size() < 3) n.fail("input has rank " + std::to_string(x.size()) + "; InstanceNormalization needs (N, C, spatial...)");
  OpSpec s = same_operands(n, OpKind::InstanceNormalization);
  s.attrs["epsilon"] = n.attrs.get_float("epsilon", double{1e-5f});
  im.emit(s, n.name, n);
}

void translate_conv_transpose(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  Shape w = im.type_of(n.in(1), n).shape;
  if (x.size() < 3) n.fail("input has rank " + std::to_string(x.size()) + "; ConvTranspose needs (N, C, spatial...)");
  if (w.size() != x.size())
    n.fail("weight rank " + std::to_string(w.size()) + " does not match input rank " + std::to_string(x.size()));
  size_t sp = x.size() - 2;
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (auto ks = n.attrs.opt_ints("kernel_shape"); ks && *ks != kernel)
    n.fail("attribute \"kernel_shape\" " + shape_str(*ks) + " does not match the weight's " + shape_str(kernel));
  std::vector<int64_t> strides = ints_attr(n, "strides", sp, 1), dil = ints_attr(n, "dilations", sp, 1);
  std::vector<int64_t> pads = ints_attr(n, "pads", 2 * sp, 0), out_pad = ints_attr(n, "output_padding", sp, 0);
  for (size_t d = 0; d < sp; ++d) {
    if (strides[d] <= 0 || dil[d] <= 0) n.fail("strides and dilations must be positive");
    if (pads[d] < 0 || pads[d + sp] < 0) n.fail("pads must not be negative");
  }
  std::string auto_pad = n.attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    n.fail("attribute \"auto_pad\" has unknown value \"" + auto_pad + "\"");
  std::optional<std::vector<int64_t>> out_shape = n.attrs.opt_ints("output_shape");
  if (out_shape && out_shape->size() == x.size()) out_shape = std::vector<int64_t>(out_shape->begin() + 2, out_shape->end());
  if (out_shape && out_shape->size() != sp) n.fail("attribute \"output_shape\" needs " + std::to_string(sp) + " entries");
  if (!out_shape && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")) {
    out_shape.emplace();
    for (size_t d = 0; d < sp; ++d) out_shape->push_back(x[d + 2] * strides[d]);
  }
  if (auto_pad == "VALID") std::fill(pads.begin(), pads.end(), 0);
  if (out_shape) {
    // ONNX: total_padding = s*(x-1) + output_padding + d*(k-1) + 1 - output_shape, split by auto_pad (SAME_UPPER puts
    // the odd one at the end). A negative total lengthens the output at the end, as output_padding does.
    for (size_t d = 0; d < sp; ++d) {
      int64_t total = strides[d] * (x[d + 2] - 1) + out_pad[d] + dil[d] * (kernel[d] - 1) + 1 - (*out_shape)[d];
      if (total < 0) {
        out_pad[d] -= total;
        pads[d] = pads[d + sp] = 0;
      } else {
        bool upper = auto_pad == "SAME_UPPER";
        pads[d] = upper ? total / 2 : total - total / 2;
        pads[d + sp] = total - pads[d];
      }
    }
  }
  for (size_t d = 0; d < sp; ++d)
    if (out_pad[d] >= strides[d])
      unsupported(n, "output_padding (or output_shape) " + shape_str(out_pad) + " not smaller than strides " +
                         shape_str(strides) + " is not supported");
  OpSpec s = same_operands(n, OpKind::ConvTranspose);
  s.attrs["strides"] = strides;
  s.attrs["pads"] = pads;
  s.attrs["dilations"] = dil;
  s.attrs["group"] = n.attrs.get_int("group", 1);
  s.attrs["output_padding"] = out_pad;
  im.emit(s, n.name, n);
}

void translate_resize(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  if (x.size() < 3) n.fail("input has rank " + std::to_string(x.size()) + "; Resize needs (N, C, spatial...)");
  std::string mode = n.attrs.get_string("mode", "nearest");
  std::string ctm = n.attrs.get_string("coordinate_transformation_mode", "half_pixel");
  std::string nearest = n.attrs.get_string("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    n.fail("attribute \"mode\" has unknown value \"" + mode + "\" (nearest, linear, cubic)");
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "align_corners" && ctm != "asymmetric" &&
      ctm != "tf_half_pixel_for_nn")
    unsupported(n, "coordinate_transformation_mode \"" + ctm + "\" is not supported");
  if (nearest != "floor" && nearest != "ceil" && nearest != "round_prefer_floor" && nearest != "round_prefer_ceil")
    n.fail("attribute \"nearest_mode\" has unknown value \"" + nearest + "\"");
  // Opset 11-17: (X, roi, scales, sizes); exactly one of scales and sizes is non-empty.
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (!n.in(3).empty()) sizes = const_ints(im, n, 3, "\"sizes\"");
  if (sizes.empty() && !n.in(2).empty()) scales = const_doubles(im, n, 2, "\"scales\"");
  if (sizes.empty() == scales.empty()) n.fail("exactly one of the inputs scales and sizes must be given, non-empty");
  size_t rank = x.size();
  if (!sizes.empty()) {
    if (sizes.size() != rank) n.fail("input sizes " + shape_str(sizes) + " does not match the input rank");
    for (size_t d = 0; d < rank; ++d) scales.push_back(static_cast<double>(sizes[d]) / static_cast<double>(x[d]));
  } else {
    if (scales.size() != rank) n.fail("input scales has " + std::to_string(scales.size()) + " entries for rank " +
                                      std::to_string(rank));
    for (size_t d = 0; d < rank; ++d) {
      if (!(scales[d] > 0)) n.fail("input scales must be positive");
      sizes.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x[d]) * scales[d])));
    }
  }
  if (sizes[0] != x[0] || sizes[1] != x[1])
    unsupported(n, "resizing the batch or channel dims (sizes " + shape_str(sizes) + " of input " + shape_str(x) +
                       ") is not supported");
  for (size_t d = 2; d < rank; ++d)
    if (sizes[d] < 1) n.fail("output dim " + std::to_string(d) + " would be empty");
  OpSpec s = same_operands(n, OpKind::Resize);
  s.inputs.resize(1);
  s.attrs["mode"] = mode;
  s.attrs["coordinate_transformation_mode"] = ctm;
  s.attrs["nearest_mode"] = nearest;
  if (mode == "cubic") {  // only cubic reads them: the other modes' IR stays as it was
    s.attrs["cubic_coeff_a"] = n.attrs.get_float("cubic_coeff_a", -0.75);
    s.attrs["exclude_outside"] = n.attrs.get_int("exclude_outside", 0);
  }
  s.attrs["scales"] = scales;
  s.attrs["sizes"] = sizes;
  im.emit(s, n.name, n);
}

}  // namespace cleave
