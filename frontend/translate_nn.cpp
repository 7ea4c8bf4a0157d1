// Convolution, pooling, reductions, normalisation and dropout. auto_pad is resolved to explicit pads and every
// attribute gets its ONNX default, so IR ops always carry their full attribute set.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "frontend/importer.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;
};

/** Reads kernel/strides/pads/dilations/auto_pad for `spatial` dims of input `in` (N, C, spatial...). */
Window read_window(const NodeCtx &n, const Shape &in, std::vector<int64_t> kernel, bool has_dilations) {
  size_t k = kernel.size();
  Window w;
  w.kernel = std::move(kernel);
  w.strides = n.attrs.opt_ints("strides").value_or(std::vector<int64_t>(k, 1));
  w.dilations = has_dilations ? n.attrs.opt_ints("dilations").value_or(std::vector<int64_t>(k, 1))
                              : std::vector<int64_t>(k, 1);
  w.pads = n.attrs.opt_ints("pads").value_or(std::vector<int64_t>(2 * k, 0));
  if (w.strides.size() != k) n.fail("attribute \"strides\" needs " + std::to_string(k) + " entries");
  if (w.dilations.size() != k) n.fail("attribute \"dilations\" needs " + std::to_string(k) + " entries");
  if (w.pads.size() != 2 * k) n.fail("attribute \"pads\" needs " + std::to_string(2 * k) + " entries");
  for (size_t i = 0; i < k; ++i) {
    if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0)
      n.fail("kernel sizes, strides and dilations must be positive");
    if (w.pads[i] < 0 || w.pads[i + k] < 0) n.fail("pads must not be negative");
  }
  std::string auto_pad = n.attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // ONNX: output = ceil(in / stride); total padding split evenly, the odd one at the end (UPPER) or start (LOWER).
    for (size_t i = 0; i < k; ++i) {
      int64_t dim = in[2 + i], s = w.strides[i];
      int64_t out = (dim + s - 1) / s;
      int64_t extent = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + extent - dim);
      int64_t small = total / 2, big = total - small;
      w.pads[i] = auto_pad == "SAME_UPPER" ? small : big;
      w.pads[i + k] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad != "NOTSET") {
    n.fail("attribute \"auto_pad\" has unknown value \"" + auto_pad + "\"");
  }
  return w;
}

void check_spatial_rank(const NodeCtx &n, const Shape &in) {
  if (in.size() < 3) n.fail("input has rank " + std::to_string(in.size()) + "; a window op needs (N, C, spatial...)");
}

}  // namespace

void translate_conv(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  Shape wshape = im.type_of(n.in(1), n).shape;
  check_spatial_rank(n, x);
  if (wshape.size() != x.size())
    n.fail("weight rank " + std::to_string(wshape.size()) + " does not match input rank " + std::to_string(x.size()));
  std::vector<int64_t> kernel(wshape.begin() + 2, wshape.end());
  if (auto ks = n.attrs.opt_ints("kernel_shape"); ks && *ks != kernel)
    n.fail("attribute \"kernel_shape\" " + shape_str(*ks) + " does not match the weight's " + shape_str(kernel));
  Window w = read_window(n, x, kernel, true);
  OpSpec s = same_operands(n, OpKind::Conv);
  s.attrs["strides"] = w.strides;
  s.attrs["pads"] = w.pads;
  s.attrs["dilations"] = w.dilations;
  s.attrs["group"] = n.attrs.get_int("group", 1);
  im.emit(s, n.name, n);
}

void translate_pool(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  if (n.op_type == "GlobalAveragePool") {
    if (x.size() < 3) n.fail("input must have rank 3 or more");
    im.emit(same_operands(n, OpKind::GlobalAveragePool), n.name, n);
    return;
  }
  check_spatial_rank(n, x);
  bool max = n.op_type == "MaxPool";
  std::vector<int64_t> kernel = n.attrs.req_ints("kernel_shape");
  if (kernel.size() + 2 != x.size())
    n.fail("attribute \"kernel_shape\" has " + std::to_string(kernel.size()) + " entries for input rank " +
           std::to_string(x.size()));
  int64_t ceil_mode = n.attrs.get_int("ceil_mode", 0);
  Window w = read_window(n, x, kernel, max);
  OpSpec s = same_operands(n, max ? OpKind::MaxPool : OpKind::AveragePool);
  s.attrs["kernel_shape"] = w.kernel;
  s.attrs["strides"] = w.strides;
  s.attrs["pads"] = w.pads;
  s.attrs["ceil_mode"] = ceil_mode;
  if (max) {
    s.attrs["dilations"] = w.dilations;
    s.attrs["storage_order"] = n.attrs.get_int("storage_order", 0);
  } else {
    s.attrs["count_include_pad"] = n.attrs.get_int("count_include_pad", 0);
  }
  im.emit(s, n.name, n);
}

void translate_reduce(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  std::optional<std::vector<int64_t>> axes;
  if (n.op_type == "ReduceSum") {
    if (!n.in(1).empty()) axes = const_ints(im, n, 1, "\"axes\"");
  } else {
    axes = n.attrs.opt_ints("axes");
  }
  int64_t keepdims = n.attrs.get_int("keepdims", 1);
  if (!axes || axes->empty()) {
    if (n.attrs.get_int("noop_with_empty_axes", 0) != 0) {
      OpSpec s = same_operands(n, OpKind::Identity);
      s.inputs.resize(1);
      im.emit(s, n.name, n);
      return;
    }
    axes.emplace();
    for (int64_t i = 0; i < rank; ++i) axes->push_back(i);
  }
  for (int64_t &a : *axes) a = norm_axis(n, a, rank);
  std::sort(axes->begin(), axes->end());
  if (std::adjacent_find(axes->begin(), axes->end()) != axes->end()) n.fail("axes repeat an axis");
  OpSpec s = same_operands(n, *parse_op_kind(n.op_type));
  s.inputs.resize(1);
  s.attrs["axes"] = *axes;
  s.attrs["keepdims"] = keepdims;
  im.emit(s, n.name, n);
}

namespace {

/** The source P (param or optimizer state) whose values `t` holds repeated whole, element k of t being P's element
 *  (k mod |P|): torch's InstanceNorm with track_running_stats tiles its running statistics over the batch this way
 *  (Tile of an Expand) before a BatchNormalization over [1, N*C, ...]. Follows Identity, Reshape and Expand ops back
 *  to the source and replays them on P's element indices; kNoTensor when the chain is anything else. */
TensorId tiled_source(const Graph &g, TensorId t) {
  std::vector<const Op *> chain;
  while (g.tensor(t).producer != kNoOp) {
    const Op &op = g.op(g.tensor(t).producer);
    if (op.kind != OpKind::Identity && op.kind != OpKind::Reshape && op.kind != OpKind::Expand) return kNoTensor;
    chain.push_back(&op);
    t = op.inputs[0];
  }
  Role role = g.tensor(t).role;
  if (role != Role::param && role != Role::optimizer_state) return kNoTensor;
  Shape shape = g.tensor(t).shape;
  int64_t n = num_elements(shape);
  if (n <= 0) return kNoTensor;
  std::vector<int64_t> index(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) index[static_cast<size_t>(k)] = k;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Shape &out = g.tensor((*it)->outputs[0]).shape;
    if ((*it)->kind == OpKind::Expand) {
      // numpy broadcasting: dims aligned on the right, a dim of 1 read at 0.
      int64_t volume = num_elements(out);
      if (volume > (int64_t{1} << 24) || out.size() < shape.size()) return kNoTensor;
      std::vector<int64_t> next(static_cast<size_t>(volume));
      size_t lead = out.size() - shape.size();
      for (int64_t k = 0; k < volume; ++k) {
        int64_t rest = k, from = 0, stride = 1;
        for (size_t d = out.size(); d-- > 0;) {
          int64_t i = rest % out[d];
          rest /= out[d];
          if (d < lead) continue;
          int64_t dim = shape[d - lead];
          from += (dim == 1 ? 0 : i) * stride;
          stride *= dim;
        }
        next[static_cast<size_t>(k)] = index[static_cast<size_t>(from)];
      }
      index = std::move(next);
    }
    shape = out;
  }
  for (size_t k = 0; k < index.size(); ++k)
    if (index[k] != static_cast<int64_t>(k) % n) return kNoTensor;
  return index.size() % static_cast<size_t>(n) == 0 ? t : kNoTensor;
}

}  // namespace

void translate_batchnorm(Importer &im, const NodeCtx &n) {
  OpSpec s = same_operands(n, OpKind::BatchNormalization);
  s.attrs["epsilon"] = n.attrs.get_float("epsilon", double{1e-5f});
  s.attrs["momentum"] = n.attrs.get_float("momentum", double{0.9f});
  // BatchNormalization-9 (opsets < 14) has no training_mode: extra outputs ask for training statistics.
  int64_t training = n.opset >= 14 ? n.attrs.get_int("training_mode", 0) : (n.num_out() > 1 ? 1 : 0);
  s.attrs["training_mode"] = training;
  if (training && im.from_torch) s.attrs["unbiased_running_var"] = int64_t{1};
  if (!training) {
    s.outputs.resize(1);
    im.emit(s, n.name, n);
    return;
  }
  // Training: the running statistics are bound back to the mean/var inputs after each step, and autodiff needs the
  // saved statistics, so every output exists.
  s.foldable = false;
  s.outputs.resize(5);
  static const char *kSuffix[] = {"", ".running_mean", ".running_var", ".saved_mean", ".saved_invstd"};
  for (size_t i = 1; i < 5; ++i)
    if (s.outputs[i].empty()) s.outputs[i] = im.fresh_tensor_name(n.out(0) + kSuffix[i]);
  std::vector<TensorId> outs = im.emit(s, n.name, n);
  for (size_t i = 1; i <= 2; ++i) {
    TensorId dst = im.use(n.in(2 + i), &n);
    Role r = im.g.tensor(dst).role;
    if (r == Role::param || r == Role::optimizer_state || r == Role::input) {
      im.g.assigns.push_back(Assign{dst, outs[i]});
      continue;
    }
    // Statistics tiled from a source P (torch's InstanceNorm(track_running_stats)): P takes the mean of the updated
    // copies, as torch's instance_norm copies running_mean_.view(N, C).mean(0) back.
    TensorId src = tiled_source(im.g, dst);
    if (src == kNoTensor)
      n.fail("training mode needs input \"" + n.in(2 + i) + "\" to be an initializer or graph input (or one "
             "repeated whole), so the running statistics can be updated");
    int64_t c = num_elements(im.g.tensor(src).shape), copies = num_elements(im.g.tensor(outs[i]).shape) / c;
    std::string name = im.g.tensor(outs[i]).name;
    auto op = [&](OpKind kind, const std::string &in, AttrMap attrs, const std::string &suffix) {
      OpSpec m;
      m.kind = kind;
      m.inputs = {in};
      m.outputs = {im.fresh_tensor_name(name + suffix)};
      m.attrs = std::move(attrs);
      m.foldable = false;
      im.emit(m, im.fresh_op_name(n.name + suffix), n);
      return m.outputs[0];
    };
    std::string copies_by_channel = op(OpKind::Reshape, name, {{"shape", Shape{copies, c}}}, ".copies");
    AttrMap over_copies{{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}};
    std::string mean = op(OpKind::ReduceMean, copies_by_channel, over_copies, ".mean_of_copies");
    if (im.g.tensor(src).shape != Shape{c})
      mean = op(OpKind::Reshape, mean, {{"shape", im.g.tensor(src).shape}}, ".shaped");
    im.g.assigns.push_back(Assign{src, im.use(mean, &n)});
  }
}

namespace {
/** A seed from the node's name (FNV-1a) for a random node that gives none: two nodes never share a pattern, and the
 *  result is reproducible. */
int64_t name_seed(const NodeCtx &n) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : n.name) h = (h ^ c) * 1099511628211ull;
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}
}  // namespace

void translate_dropout(Importer &im, const NodeCtx &n) {
  double ratio = 0.5;
  if (!n.in(1).empty()) {
    std::vector<double> r = const_doubles(im, n, 1, "\"ratio\"");
    if (r.size() != 1) n.fail("input \"ratio\" must be a scalar");
    ratio = r[0];
  }
  int64_t training = 0;
  if (!n.in(2).empty()) {
    std::vector<int64_t> t = const_ints(im, n, 2, "\"training_mode\"");
    if (t.size() != 1) n.fail("input \"training_mode\" must be a scalar");
    training = t[0] != 0;
  }
  if (ratio < 0 || ratio >= 1) n.fail("ratio " + std::to_string(ratio) + " is outside [0, 1)");
  OpSpec s = same_operands(n, OpKind::Dropout);
  s.inputs.resize(1);
  s.attrs["ratio"] = ratio;
  s.attrs["training_mode"] = training;
  s.attrs["seed"] = n.attrs.opt_int("seed").value_or(name_seed(n));
  s.foldable = training == 0;
  im.emit(s, n.name, n);
}

void translate_random(Importer &im, const NodeCtx &n) {
  bool like = n.op_type == "RandomUniformLike" || n.op_type == "RandomNormalLike";
  bool normal = n.op_type == "RandomNormal" || n.op_type == "RandomNormalLike";
  std::optional<DType> dtype;
  if (std::optional<int64_t> dt = n.attrs.opt_int("dtype")) {
    dtype = dtype_from_onnx(static_cast<int32_t>(*dt));
    if (!dtype) n.fail("attribute \"dtype\" " + onnx_dtype_name(static_cast<int32_t>(*dt)) + " is not supported");
  }
  // The op's input only gives Y its shape and dtype: the *Like node's input (cast to `dtype`), else a constant.
  std::string shaped;
  if (like) {
    shaped = n.in(0);
    if (dtype && *dtype != im.type_of(shaped, n).dtype) {
      OpSpec cast;
      cast.kind = OpKind::Cast;
      cast.phase = n.phase;
      cast.inputs = {shaped};
      cast.outputs = {im.fresh_tensor_name(n.out(0) + ".shape_of")};
      cast.attrs["to"] = std::string(dtype_name(*dtype));
      im.emit(cast, im.fresh_op_name(n.name + ".shape_of"), n);
      shaped = cast.outputs[0];
    }
  } else {
    std::optional<std::vector<int64_t>> shape = n.attrs.opt_ints("shape");
    if (!shape) n.fail("missing required attribute \"shape\"");
    for (int64_t d : *shape)
      if (d < 1) n.fail("attribute \"shape\" must be positive, got " + shape_str(*shape));
    Tensor t;
    t.name = im.fresh_tensor_name(n.out(0) + ".shape_of");
    t.dtype = dtype.value_or(DType::f32);
    t.shape = *shape;
    t.role = Role::constant;
    t.data = encode_doubles(t.dtype, std::vector<double>(static_cast<size_t>(num_elements(t.shape)), 0.0));
    shaped = t.name;
    im.define_const(std::move(t));
  }
  if (!is_float(im.type_of(shaped, n).dtype))
    n.fail("output dtype " + std::string(dtype_name(im.type_of(shaped, n).dtype)) + " is not a float type");
  OpSpec s;
  s.kind = OpKind::RandomLike;
  s.phase = n.phase;
  s.inputs = {shaped};
  s.outputs = {n.out(0)};
  s.attrs["normal"] = int64_t{normal};
  s.attrs["a"] = normal ? n.attrs.get_float("mean", 0.0) : n.attrs.get_float("low", 0.0);
  s.attrs["b"] = normal ? n.attrs.get_float("scale", 1.0) : n.attrs.get_float("high", 1.0);
  // ONNX's seed is a float32: its bits key the draws, so distinct seeds give distinct draws (not numpy's).
  if (std::optional<double> seed = n.attrs.opt_float("seed")) {
    auto f = static_cast<float>(*seed);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    s.attrs["seed"] = static_cast<int64_t>(bits);
  } else {
    s.attrs["seed"] = name_seed(n);
  }
  s.foldable = false;  // a draw per step, even of a constant's shape
  im.emit(s, n.name, n);
}

}  // namespace cleave

namespace cleave {

namespace {
/** Edge and reflect Pad as one Gather per padded axis by constant indices (output position o reads o - pad_begin,
 *  mirrored at the ends without repeating them, or clamped): their gradient (a scatter-add), kernels and splits are
 *  Gather's. Negative pads crop through the same indices. */
void gather_pad(Importer &im, const NodeCtx &n, const Shape &x, const std::vector<int64_t> &pads, bool reflect) {
  size_t rank = x.size();
  std::vector<size_t> axes;
  for (size_t d = 0; d < rank; ++d)
    if (pads[d] != 0 || pads[d + rank] != 0) axes.push_back(d);
  if (axes.empty()) {
    OpSpec s = same_operands(n, OpKind::Identity);
    s.inputs.resize(1);
    im.emit(s, n.name, n);
    return;
  }
  std::string cur = n.in(0);
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t d = axes[k];
    int64_t len = x[d], begin = pads[d], end = pads[d + rank], out = len + begin + end;
    if (out <= 0) n.fail("pads crop dim " + std::to_string(d) + " of extent " + std::to_string(len) + " to nothing");
    if (reflect && (begin >= len || end >= len))
      n.fail("reflect pads " + std::to_string(begin) + ", " + std::to_string(end) + " of dim " + std::to_string(d) +
             " must be smaller than its extent " + std::to_string(len));
    std::vector<int64_t> idx;
    for (int64_t o = 0; o < out; ++o) {
      int64_t i = o - begin;
      if (i < 0) i = reflect ? -i : 0;
      else if (i >= len) i = reflect ? 2 * (len - 1) - i : len - 1;
      idx.push_back(i);
    }
    Tensor t{im.fresh_tensor_name(n.out(0) + ".index" + std::to_string(d)), DType::i64, {out}, Role::constant, {}};
    t.data = encode_ints(DType::i64, idx);
    bool last = k + 1 == axes.size();
    std::string next = last ? n.out(0) : im.fresh_tensor_name(n.out(0) + ".axis" + std::to_string(d));
    OpSpec s;
    s.kind = OpKind::Gather;
    s.phase = n.phase;
    s.inputs = {cur, t.name};
    s.outputs = {next};
    s.attrs["axis"] = static_cast<int64_t>(d);
    im.define_const(std::move(t));
    im.emit(s, k == 0 ? n.name : im.fresh_op_name(n.name), n);
    cur = next;
  }
}
}  // namespace

void translate_pad(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  std::string mode = n.attrs.get_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    throw UserError(n.label + ": mode \"" + mode + "\" is not supported (only constant, edge and reflect)", 2);
  std::vector<int64_t> pads = const_ints(im, n, 1, "\"pads\"");
  if (pads.size() != 2 * x.size())
    n.fail("pads has " + std::to_string(pads.size()) + " values for input rank " + std::to_string(x.size()));
  double value = 0.0;
  if (!n.in(2).empty()) {
    std::vector<double> v = const_doubles(im, n, 2, "\"constant_value\"");
    if (v.size() != 1) n.fail("input \"constant_value\" must be a scalar");
    value = v[0];
  }
  if (mode != "constant") return gather_pad(im, n, x, pads, mode == "reflect");
  OpSpec s = same_operands(n, OpKind::Pad);
  s.inputs.resize(1);
  s.attrs["pads"] = pads;
  s.attrs["value"] = value;
  im.emit(s, n.name, n);
}

void translate_layer_norm(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  int64_t stash = n.attrs.get_int("stash_type", 1);
  if (stash != 1)
    throw UserError(n.label + ": stash_type " + std::to_string(stash) + " is not supported (only 1, float32)", 2);
  OpSpec s = same_operands(n, OpKind::LayerNormalization);
  s.attrs["axis"] = norm_axis(n, n.attrs.get_int("axis", -1), rank);
  s.attrs["epsilon"] = n.attrs.get_float("epsilon", double{1e-5f});
  im.emit(s, n.name, n);
}

}  // namespace cleave
