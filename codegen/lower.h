#pragma once
// Per-rank lowering (DESIGN §6): from a graph and a validated plan to, for every rank, the straight-line program of
// one training step (data reads, communication, kernels, loss logging, assigns) over buffers placed in one arena by
// a static memory plan.
//
// Communication is derived from needed vs owned boxes: a partial tensor is all-reduced over the ranks that hold its
// partial sums right after it is produced (it is then replicated); an op's input box is the local shard when that
// covers it, else it is assembled from the owners' shards by one grouped send/recv per op (exactly the overlapping
// boxes move). Every rank walks the graph's op order, so communication calls appear in the same global order on
// every rank (no deadlock, send/recv pairs match in order).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "planner/plan/plan.h"
#include "planner/plan/region.h"

namespace cleave::codegen {

/** A buffer of one rank's arena. */
struct Buffer {
  std::string label;  // for comments: the tensor name, or what the temporary is for
  DType dtype = DType::f32;
  int64_t elems = 0;
  /** Lives across steps (params, optimizer state, constants): never reused. */
  bool persistent = false;
  /** Instruction range in which it is live (set by liveness). */
  int first = -1, last = -1;
  int64_t offset = 0;
  int64_t bytes() const;
};

/** What a statement is timed as when the rank program profiles itself (CLEAVE_PROFILE, runtime rt.h): a kernel, a
 *  collective or send/recv (comm), a region copy packing or unpacking communicated boxes or applying an assign (copy),
 *  or a read of a data shard from .npy (data). */
struct Timing {
  enum class Kind : uint8_t { none, kernel, comm, copy, data } kind = Kind::none;
  /** kernel: the ops it computes (several when fused); comm, copy: the op it runs before (none: the end of the step). */
  std::vector<OpId> ops;
  /** kernel: planner/cost/profile.h's shard_key of this rank's share of ops[0]. */
  std::string shard;
  /** copy: the bytes copied; data: the bytes of the shard read. */
  int64_t bytes = 0;
};

/** Elements read through a strided view: offset + sum over d of i[d] * strides[d], for i over shape in row-major
 *  order. */
struct StridedView {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

/** A statement that only copies elements into a whole contiguous buffer (or into dst_view of it): dst = src's
 *  elements through `view` (compose_moves.h reads through it). A region copy or a Transpose also says how it reads
 *  src as a whole buffer of in_shape: the box [start, start + extent), its dims then permuted (output dim d is box
 *  dim perm[d]); a copy composed from two has no in_shape. */
struct Move {
  int src = -1, dst = -1;
  int elem_size = 4;
  StridedView view;
  Shape in_shape, start, extent;
  std::vector<int64_t> perm;
  /** Where in dst it writes, when not the whole of it (a Concat's part): a view of the same elements as `view`. */
  std::optional<StridedView> dst_view;
};

/** One statement of a rank's step. `code` refers to buffer b as `$b$` (replaced by a typed pointer at emission). */
struct Instr {
  std::string code;
  std::vector<int> buffers;
  Timing timing;
  /** The statement in a validation pass when it differs from `code` (validation_kernel_code; a data read from the
   *  validation files); it touches no buffer `code` does not. */
  std::string val_code{};
  std::optional<Move> move{};
  /** A Concat: the copy of each part into its place (compose_moves.h). */
  std::vector<Move> concat_parts{};
};

/** A tensor shard a rank holds in a persistent buffer (weights file and --save-model). */
struct PersistentShard {
  TensorId tensor = kNoTensor;
  int buffer = -1;
  plan::Box box;
};

/** A graph input/label shard read from .npy each step. */
struct DataShard {
  TensorId tensor = kNoTensor;
  int buffer = -1;
  int64_t first_sample = 0;  // within the batch
  int64_t samples = 0;
};

struct RankProgram {
  int rank = 0;
  std::vector<Buffer> buffers;
  std::vector<Instr> step;  // the step body, in order
  std::vector<PersistentShard> persistent;
  std::vector<DataShard> data;
  /** Indices into Lowered::groups of the groups this rank belongs to, in creation order. */
  std::vector<int> groups;
  /** Persistent shards (indices into `persistent`) written for --save-model: assigned tensors other than optimizer
   *  state. */
  std::vector<int> saved;
  int64_t arena_bytes = 0;
  /** step[0, passes_end) is a pass (data, forward, backward, gradient accumulation), run --accumulate times per
   *  step; the rest (clipping, updates, the loss line, assigns) once. */
  int passes_end = 0;
  /** A validation pass (--val-data): the forward statements of a pass (data reads, the forward ops' communication
   *  and kernels), in step order, with their val_code. A subsequence of the step, so the step's memory plan holds
   *  for it. Empty when the graph's loss is not one the validation metrics understand (a classifier's). */
  std::vector<Instr> validation;
};

struct Lowered {
  int devices = 1;
  int64_t batch = 0;
  /** Every communicator group used, in order of first use (creation order on every rank). */
  std::vector<std::vector<int>> groups;
  std::vector<RankProgram> ranks;
  /** Why the ranks have no validation pass (RankProgram::validation empty), as --val-data's error says it. */
  std::string no_validation;
  /** cleave compile --precision: "fp32", "tf32" (rank programs call rt::set_math(rt::Math::tf32)) or "bf16" (the
   *  graph holds RoundToBf16 ops, ir/autocast.h); "fp64" for a float64 graph, whose bundle builds the runtime with
   *  rt::real = double (CLEAVE_RT_F64). Recorded in the manifest. */
  std::string precision = "fp32";
};

/** Lowers `g` under `p` (which must pass validate_plan). Throws UserError for what codegen cannot lower yet:
 *  `op "X" (Kind): splitting var v is not supported by codegen yet`, an op kind it has no kernel for, or a tensor of a
 *  dtype the runtime has no buffers for (`tensor "h" has dtype f16, which code generation does not support ...`).
 *  `need_values` false lowers a graph imported without weights (checking a plan, as explain does): persistent
 *  sources need no initial value then. */
Lowered lower(const Graph &g, const plan::Plan &p, bool need_values = true);

/** The dtype of a graph's floating tensors for code generation: f64 when it has float64 tensors (then every floating
 *  tensor must be float64: UserError naming the first that is not), else f32. */
DType real_dtype(const Graph &g);

/** The floating dtype of the graph lower() is lowering (f32 outside lower()), and its C++ type, "float" or
 *  "double": the kernel emitters write rt::real's values with these. */
DType real_dtype();
const char *real_type();

/** C++ literal of real_type(), exact: v rounded to float ("0x1.99999ap-4f"), or v itself for double ("0x1.999...p-4"). */
std::string float_literal(double v);
/** "{1, 2, 3}". */
std::string dims_literal(const std::vector<int64_t> &d);

}  // namespace cleave::codegen
