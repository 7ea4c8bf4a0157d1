#pragma once
// Kernel emission: the runtime calls one rank makes for one op on its shards. One file per op family, as XLA's SPMD
// partitioner keeps one handler per family:
//   kernels.cpp         dispatch, elementwise, layout, GEMM, reductions, optimizer updates
//   kernels_window.cpp  Conv, pools and their gradients (spatial splits with halos)
//   kernels_norm.cpp    BatchNormalization, softmax and the losses (splits that need statistics from other ranks)
//   kernels_image.cpp   InstanceNormalization, Resize (whole planes: batch and channel splits)
//   kernels_index.cpp   ArgMax/ArgMin, CumSum, OneHot (whole lines along their axis), GatherElements,
//                       ScatterElements, GatherND(Grad) (the indexed dims whole)
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/fuse.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"
#include "planner/plan/region.h"

namespace cleave::codegen {

/** Everything a kernel emitter may need about one rank's part of one op. */
struct KernelCall {
  const Graph *g = nullptr;
  const Op *op = nullptr;
  const plan::ParallelConfig *config = nullptr;
  /** This rank's index in config->devices. */
  int64_t index = 0;
  /** Pointer expressions per input/output slot (empty for absent operands). */
  std::vector<std::string> ins, outs;
  /** Local shapes per slot (empty for absent operands). */
  std::vector<Shape> in_shapes, out_shapes;
  /** The global boxes those local buffers hold, per slot (empty for absent operands). A window kernel derives its
   *  local padding from them: the box of an input is clipped to the tensor, the output's box is what it computes. */
  std::vector<plan::Box> in_boxes, out_boxes;
  /** Registers a communicator over `ranks` (ordered) and returns the expression naming it ("G3"). Every rank of the
   *  group must call it for the same op in the same order. */
  std::function<std::string(const std::vector<int> &ranks)> comm;
  /** An arena buffer of `elems` floats live during this kernel only (e.g. a broadcast operand); returns its pointer
   *  expression. */
  std::function<std::string(int64_t elems)> scratch;
  /** Per tensor of g: the low-precision type whose values it holds exactly (exact_low_types in ir/autocast.h); null
   *  when the graph has no rounding ops. */
  const std::vector<DType> *exact_low = nullptr;
  /** Set by the emitter when the kernel is exactly one rt::map, or one rt::map_block (an operand broadcast as one
   *  block): lowering may fuse it with its neighbours. */
  mutable std::optional<MapSpec> map;

  const Graph &graph() const { return *g; }
  const Op &node() const { return *op; }
  /** Ranks that share this rank's mesh coordinates except along `axis`, ordered by that coordinate. */
  std::vector<int> axis_group(size_t axis) const;
  /** The mesh axes along which `var` is split. */
  std::vector<size_t> axes_splitting(const std::string &var) const;
};

/** The code of the op's kernel on this rank. Throws UserError for a kind or split codegen cannot emit yet. */
std::string kernel_code(const KernelCall &call);
/** The op's statement in a validation pass (the forward in inference mode, as torch's model.eval()) when it differs
 *  from kernel_code, else "": BatchNormalization in training mode normalises with the running statistics (and
 *  leaves them), Dropout copies, RandomLike draws with key 0, and a classification loss adds its shard to the run's
 *  validation metrics (rt::TrainingRun::add_validation) instead of computing the loss. */
std::string validation_kernel_code(const KernelCall &call);
/** Throws UserError (`op "X" (Kind): splitting var v is not supported by codegen yet`) when the kernel cannot run
 *  this rank's part of a split op. Only called when some var of the op is split. */
void check_kernel_split(const KernelCall &call);

/** Window family (kernels_window.cpp); the emitter is only called for kinds the predicate accepts. */
bool is_window_kind(OpKind kind);
std::string window_kernel_code(const KernelCall &call);
void check_window_split(const KernelCall &call);

/** Norm/softmax/loss family (kernels_norm.cpp). */
bool is_norm_kind(OpKind kind);
std::string norm_kernel_code(const KernelCall &call);
/** validation_kernel_code of the family: BatchNormalization and the classification losses. */
std::string norm_validation_code(const KernelCall &call);
void check_norm_split(const KernelCall &call);

/** Image family (kernels_image.cpp): every batch/channel split runs on its local planes, nothing to check. */
bool is_image_kind(OpKind kind);
std::string image_kernel_code(const KernelCall &call);

/** Index family (kernels_index.cpp): the axis (the dims indices address) is never split, so every split runs on
 *  local lines. */
bool is_index_kind(OpKind kind);
std::string index_kernel_code(const KernelCall &call);

/** Helpers shared by the kernel files. */
namespace kernel_util {
std::string num(int64_t v);
int64_t prod(const Shape &s, size_t from = 0, size_t to = SIZE_MAX);
Shape tail(const Shape &s, size_t from);
std::string or_null(const std::string &p);
std::string copy_bytes(const std::string &dst, const std::string &src, int64_t bytes);
/** ", rt::Operands::bf16" (or fp16) when input slots `a` and `b`, a GEMM's or convolution's multiplied operands, both
 *  hold that type's values exactly (KernelCall::exact_low), else "": the trailing argument of rt::gemm and of a
 *  ConvShape literal. */
std::string operands_arg(const KernelCall &call, size_t a, size_t b);
[[noreturn]] void unsupported_split(const KernelCall &call);
}  // namespace kernel_util

}  // namespace cleave::codegen
