#include "codegen/lower.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "codegen/compose_moves.h"
#include "codegen/kernels.h"
#include "codegen/overlap.h"
#include "ir/autocast.h"
#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/cost/communication.h"
#include "planner/cost/profile.h"
#include "planner/plan/validate.h"

namespace cleave::codegen {

int64_t Buffer::bytes() const { return elems * dtype_size(dtype); }

namespace {
/** Set by lower() for its duration (codegen is single-threaded per graph; thread_local keeps tests that lower
 *  graphs in parallel apart). */
thread_local DType g_real = DType::f32;
}  // namespace

DType real_dtype() { return g_real; }
const char *real_type() { return g_real == DType::f64 ? "double" : "float"; }

std::string float_literal(double v) {
  char buf[64];
  if (g_real == DType::f64) std::snprintf(buf, sizeof buf, "%a", v);
  else std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
  return buf;
}

DType real_dtype(const Graph &g) {
  const Tensor *f64 = nullptr, *f32 = nullptr;
  for (const Tensor &t : g.tensors()) {
    if (t.dtype == DType::f64 && !f64) f64 = &t;
    if (t.dtype == DType::f32 && !f32) f32 = &t;
  }
  if (!f64) return DType::f32;
  if (f32)
    CLEAVE_USER_ERROR("tensor \"", f32->name, "\" is f32 and tensor \"", f64->name, "\" f64: a bundle computes in one ",
                      "floating type (export the model with every floating tensor in float32, or every one in float64)");
  return DType::f64;
}

std::string dims_literal(const std::vector<int64_t> &d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}

namespace {

using plan::Box;
using plan::box_contains;
using plan::box_intersect;
using plan::box_volume;

Shape box_shape(const Box &b) {
  Shape s;
  for (const auto &iv : b) s.push_back(iv.size());
  return s;
}

std::vector<int64_t> starts_rel(const Box &b, const Box &origin) {
  std::vector<int64_t> s;
  for (size_t d = 0; d < b.size(); ++d) s.push_back(b[d].begin - origin[d].begin);
  return s;
}

std::string ref(int buffer) { return "$" + std::to_string(buffer) + "$"; }

/** A region_copy of box `part` (global coordinates) from a source buffer holding `src_box` to a destination holding
 *  `dst_box`. */
std::string at(int buffer, int64_t offset) {
  return offset == 0 ? ref(buffer) : "(" + ref(buffer) + " + " + std::to_string(offset) + ")";
}

std::string copy_code_at(const std::string &src, const Box &src_box, const std::string &dst, const Box &dst_box,
                         const Box &part, int elem_size) {
  if (part.empty()) return "rt::copy(" + dst + ", " + src + ", " + std::to_string(elem_size) + ");";
  return "rt::region_copy(" + src + ", " + dims_literal(box_shape(src_box)) + ", " +
         dims_literal(starts_rel(part, src_box)) + ", " + dims_literal(box_shape(part)) + ", " +
         dims_literal(starts_rel(part, dst_box)) + ", " + dst + ", " + dims_literal(box_shape(dst_box)) + ", " +
         std::to_string(elem_size) + ");";
}

std::string copy_code(int src, const Box &src_box, int dst, const Box &dst_box, const Box &part, int elem_size) {
  return copy_code_at(ref(src), src_box, ref(dst), dst_box, part, elem_size);
}

[[noreturn]] void unsupported_split(const Op &op, const plan::ParallelConfig &config) {
  std::string var;
  for (const auto &v : config.vars)
    if (!v.empty()) {
      var = v;
      break;
    }
  CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): splitting var ", var,
                    " is not supported by codegen yet");
}

class Lowerer {
 public:
  Lowerer(const Graph &g, const plan::Plan &p, std::vector<plan::CommStep> steps, bool need_values)
      : g_(g), p_(p), need_values_(need_values), steps_(std::move(steps)) {
    out_.devices = p.devices;
    out_.ranks.resize(static_cast<size_t>(p.devices));
    for (int r = 0; r < p.devices; ++r) out_.ranks[r].rank = r;
    for (const auto &t : p.tensors) {
      auto id = g.find_tensor(t.name);
      CLEAVE_CHECK(id.has_value(), "plan tensor ", t.name, " not in graph");
      sharding_[*id] = t.sharding;
    }
    for (const auto &o : p.ops) {
      auto id = g.find_op(o.name);
      CLEAVE_CHECK(id.has_value(), "plan op ", o.name, " not in graph");
      config_[*id] = o.config;
    }
    tensor_buf_.assign(static_cast<size_t>(p.devices), std::vector<int>(static_cast<size_t>(g.num_tensors()), -1));
    if (std::any_of(g.ops().begin(), g.ops().end(), [](const Op &op) {
          return op.kind == OpKind::RoundToBf16 || op.kind == OpKind::RoundToFp16;
        }))
      exact_low_ = exact_low_types(g);
  }

  Lowered run() {
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      const Tensor &tensor = g_.tensor(t);
      if (is_data(tensor)) {
        if (tensor.shape.empty()) CLEAVE_USER_ERROR("input \"", tensor.name, "\" is a scalar: it has no batch dim");
        out_.batch = tensor.shape[static_cast<size_t>(tensor.sample_axis)];
      }
    }
    last_map_.resize(out_.ranks.size());
    updates_.resize(out_.ranks.size());
    update_grads_.resize(out_.ranks.size());
    readers_.assign(static_cast<size_t>(g_.num_tensors()), 0);
    updated_.assign(static_cast<size_t>(g_.num_tensors()), false);
    for (OpId o = 0; o < g_.num_ops(); ++o)
      for (TensorId t : g_.op(o).inputs)
        if (t != kNoTensor) {
          ++readers_[t];
          if (is_optimizer_update(g_.op(o).kind)) updated_[t] = true;
        }
    assigned_dst_.assign(static_cast<size_t>(g_.num_tensors()), false);
    assigned_src_.assign(static_cast<size_t>(g_.num_tensors()), false);
    for (const Assign &a : g_.assigns) {
      assigned_dst_[a.dst] = true;
      assigned_src_[a.src] = true;
      assign_dst_of_[a.src] = a.dst;
    }
    // Sources: persistent state and per-step data.
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      const Tensor &tensor = g_.tensor(t);
      if (tensor.producer != kNoOp) continue;
      const plan::Sharding &s = sharding(t);
      for (size_t i = 0; i < s.devices.size(); ++i) {
        int r = s.devices[i];
        Box box = plan::shard_region(tensor.shape, s, static_cast<int64_t>(i));
        RankProgram &prog = out_.ranks[r];
        if (is_data(tensor)) {
          size_t axis = static_cast<size_t>(tensor.sample_axis);
          for (size_t d = 0; d < box.size(); ++d)
            if (d != axis && (box[d].begin != 0 || box[d].end != tensor.shape[d]))
              CLEAVE_USER_ERROR("input \"", tensor.name, "\": codegen reads data split on the sample axis (", axis,
                                ") only, got ", plan::sharding_axes_str(s));
          int b = new_buffer(r, tensor.name, tensor.dtype, num_elements(box_shape(box)), false);
          tensor_buf_[r][t] = b;
          prog.data.push_back({t, b, box[axis].begin, box[axis].size()});
          timing_ = {Timing::Kind::data, {}, "", num_elements(box_shape(box)) * dtype_size(tensor.dtype)};
          std::string file = std::to_string(prog.data.size() - 1), shard = std::to_string(box[axis].begin) + ", " +
                                                                          std::to_string(box[axis].size()) + ", " + ref(b);
          emit(r, "run.read_samples(npy_" + file + ", (pass - 1) * " + std::to_string(out_.batch) + " + " + shard + ");",
               {b});
          prog.step.back().val_code = "run.read_val_samples(val_npy_" + file + ", vb, " + shard + ");";
          timing_ = {};
        } else {
          if (need_values_ && tensor.data.empty() && !tensor.external && !tensor.zero_init)
            CLEAVE_USER_ERROR("tensor \"", tensor.name, "\" has no initial value");
          int b = new_buffer(r, tensor.name, tensor.dtype, num_elements(box_shape(box)), true);
          tensor_buf_[r][t] = b;
          prog.persistent.push_back({t, b, box});
          if (assigned_dst_[t] && tensor.role != Role::optimizer_state)
            prog.saved.push_back(static_cast<int>(prog.persistent.size()) - 1);
        }
      }
    }
    for (OpId o = 0; o < g_.num_ops(); ++o) lower_op(o);
    finish_step();
    for (auto &prog : out_.ranks) compose_moves(prog);
    for (auto &prog : out_.ranks) {
      overlap_reductions(prog);  // inserts statements: passes_end moves to the accumulation's new place
      for (size_t i = 0; i < prog.step.size(); ++i)
        if (prog.step[i].code.rfind("run.accumulate(", 0) == 0) prog.passes_end = static_cast<int>(i) + 1;
    }
    check_collective_order(out_);
    for (auto &prog : out_.ranks) plan_memory(prog);
    out_.no_validation = validation_problem();
    if (out_.no_validation.empty())
      for (auto &prog : out_.ranks) prog.validation = validation_pass(prog);
    return std::move(out_);
  }

 private:
  const plan::Sharding &sharding(TensorId t) const {
    auto it = sharding_.find(t);
    CLEAVE_CHECK(it != sharding_.end(), "tensor ", g_.tensor(t).name, " has no sharding");
    return it->second;
  }

  int new_buffer(int r, std::string label, DType dtype, int64_t elems, bool persistent) {
    auto &bufs = out_.ranks[r].buffers;
    Buffer b;
    b.label = std::move(label);
    b.dtype = dtype;
    b.elems = std::max<int64_t>(elems, 1);
    b.persistent = persistent;
    bufs.push_back(b);
    return static_cast<int>(bufs.size()) - 1;
  }

  void emit(int r, std::string code, std::vector<int> buffers) {
    out_.ranks[r].step.push_back({std::move(code), std::move(buffers), timing_});
  }

  /** A region copy of `bytes`, timed as a copy before the op whose communication is being emitted. */
  void emit_copy(int r, std::string code, std::vector<int> buffers, int64_t bytes) {
    out_.ranks[r].step.push_back({std::move(code), std::move(buffers), copy_timing(bytes)});
  }
  Timing copy_timing(int64_t bytes) const { return {Timing::Kind::copy, timing_.ops, "", bytes}; }

  int group_id(const std::vector<int> &ranks) {
    for (size_t i = 0; i < out_.groups.size(); ++i)
      if (out_.groups[i] == ranks) return static_cast<int>(i);
    out_.groups.push_back(ranks);
    int id = static_cast<int>(out_.groups.size()) - 1;
    for (int r : ranks) out_.ranks[r].groups.push_back(id);
    return id;
  }

  /** One rank's part of the op being lowered: the boxes it reads and writes (in the op's group), the buffer of each
   *  input slot once assembled, and its share of the op's grouped send/recv: the copies packing what it sends, its
   *  transfers, and the copies unpacking what it receives, emitted in that order once every fetch is lowered. */
  struct RankWork {
    int64_t index = -1;  // in the op's group; -1: not in it (it may still send)
    std::vector<std::optional<Box>> in;
    std::vector<Box> out;
    std::vector<int> in_bufs;  // per input slot; -1 absent
    std::vector<Instr> packs, unpacks;
    std::vector<std::string> transfers;
    std::vector<int> transfer_bufs;
  };

  void lower_op(OpId o) {
    const Op &op = g_.op(o);
    auto cit = config_.find(o);
    CLEAVE_CHECK(cit != config_.end(), "op ", op.name, " has no config");
    const plan::ParallelConfig &config = cit->second;
    timing_ = {Timing::Kind::comm, {o}, ""};
    std::vector<RankWork> work = rank_work(op, config);
    check_unread_slots(op, config, work);
    while (next_step_ < steps_.size() && steps_[next_step_].op == o) lower_step(steps_[next_step_++], work);
    emit_send_recv(work);
    lower_kernels(o, config, work);
    timing_ = {};
  }

  /** Per rank, what it reads and writes of the op's tensors (the group's ranks only). */
  std::vector<RankWork> rank_work(const Op &op, const plan::ParallelConfig &config) const {
    std::vector<RankWork> work(out_.ranks.size());
    for (size_t i = 0; i < config.devices.size(); ++i) {
      RankWork &w = work[static_cast<size_t>(config.devices[i])];
      w.index = static_cast<int64_t>(i);
      w.in = plan::op_input_regions(g_, op, config, w.index);
      w.in_bufs.assign(op.inputs.size(), -1);
      for (size_t s = 0; s < op.outputs.size(); ++s) {
        TensorId t = op.outputs[s];
        if (t == kNoTensor || unread_mask(op, s)) {
          w.out.push_back({});
          continue;
        }
        const plan::Sharding &sh = sharding(t);
        CLEAVE_CHECK(sh.devices == config.devices, "op ", op.name, ": output group differs from the op's");
        w.out.push_back(plan::shard_region(g_.tensor(t).shape, sh, w.index));
      }
    }
    return work;
  }

  /** An operand the op never reads (NegativeLogLikelihoodLossGrad's input: only its shape matters) stays absent; one
   *  that only some shard does not read cannot be handed to the kernel. */
  void check_unread_slots(const Op &op, const plan::ParallelConfig &config, const std::vector<RankWork> &work) const {
    for (const RankWork &w : work) {
      if (w.index < 0) continue;
      for (size_t s = 0; s < op.inputs.size(); ++s)
        if (op.inputs[s] != kNoTensor && !w.in[s] && reads_slot_unsplit(op, s)) unsupported_split(op, config);
    }
  }

  /** Lowers one derived step (planner/cost/communication.h) of the op being lowered. */
  void lower_step(const plan::CommStep &st, std::vector<RankWork> &work) {
    using K = plan::CommStep::Kind;
    switch (st.kind) {
      case K::all_reduce: return all_reduce(st);
      case K::reduce_scatter: return reduce_scatter(st);
      case K::all_gather: return all_gather(st);
      case K::all_to_all: return all_to_all(st);
      case K::fetch: return fetch(st, work);
      case K::assign: break;
    }
    CLEAVE_CHECK(false, "an assign step before the end of the step");
  }

  void all_reduce(const plan::CommStep &st) {
    int gid = group_id(st.group);
    for (int r : st.group) {
      int b = tensor_buf_[r][st.tensor];
      emit(r,
           "rt::all_reduce_sum(G" + std::to_string(gid) + ", " + ref(b) + ", " + ref(b) + ", " +
               std::to_string(out_.ranks[r].buffers[b].elems) + ");",
           {b});
    }
  }

  /** Each member keeps its block of the sum; blocks not laid out in member order are copied into a send buffer. */
  void reduce_scatter(const plan::CommStep &st) {
    int gid = group_id(st.group);
    const Tensor &tensor = g_.tensor(st.tensor);
    const int esize = static_cast<int>(dtype_size(tensor.dtype));
    int64_t count = box_volume(st.blocks[0]);
    for (int r : st.group) {
      int full = tensor_buf_[r][st.tensor];
      int send = full;
      if (!st.in_order) {
        send = new_buffer(r, tensor.name + " (reduce-scatter send)", tensor.dtype, box_volume(st.whole), false);
        for (size_t k = 0; k < st.group.size(); ++k)
          emit_copy(r,
                    copy_code_at(ref(full), st.whole, at(send, static_cast<int64_t>(k) * count), st.blocks[k],
                                 st.blocks[k], esize),
                    {full, send}, esize * count);
      }
      int mine = new_buffer(r, tensor.name, tensor.dtype, count, false);
      emit(r,
           "rt::reduce_scatter_sum(G" + std::to_string(gid) + ", " + ref(send) + ", " + ref(mine) + ", " +
               std::to_string(count) + ");",
           {send, mine});
      tensor_buf_[r][st.tensor] = mine;
    }
  }

  /** The members assemble the box; blocks not laid out in member order are received into a separate buffer and
   *  copied into place. */
  void all_gather(const plan::CommStep &st) {
    int gid = group_id(st.group);
    const Tensor &tensor = g_.tensor(st.tensor);
    const int esize = static_cast<int>(dtype_size(tensor.dtype));
    const Box &want = st.whole;
    int64_t count = box_volume(st.blocks[0]);
    for (int r : st.group) {
      int dst = new_buffer(r, tensor.name + " (assembled)", tensor.dtype, box_volume(want), false);
      int recv = st.in_order ? dst : new_buffer(r, tensor.name + " (all-gather)", tensor.dtype, box_volume(want), false);
      int src = tensor_buf_[r][st.tensor];
      emit(r,
           "rt::all_gather(G" + std::to_string(gid) + ", " + ref(src) + ", " + ref(recv) + ", " +
               std::to_string(count) + ");",
           {src, recv});
      if (!st.in_order)
        for (size_t k = 0; k < st.group.size(); ++k)
          emit_copy(r,
                    copy_code_at(at(recv, static_cast<int64_t>(k) * count), st.blocks[k], ref(dst), want, st.blocks[k],
                                 esize),
                    {recv, dst}, esize * count);
      assembled_[std::make_tuple(r, st.tensor, plan::box_str(want))] = dst;
    }
  }

  /** Each member packs its part for every peer, exchanges, and unpacks every peer's part into its box. */
  void all_to_all(const plan::CommStep &st) {
    int gid = group_id(st.group);
    const Tensor &tensor = g_.tensor(st.tensor);
    const int esize = static_cast<int>(dtype_size(tensor.dtype));
    const std::vector<Box> &owned = st.blocks, &wanted = st.wanted;
    int64_t count = box_volume(box_intersect(owned[0], wanted[0]));
    int64_t n = static_cast<int64_t>(st.group.size());
    for (size_t i = 0; i < st.group.size(); ++i) {
      int r = st.group[i];
      int src = tensor_buf_[r][st.tensor];
      int send = new_buffer(r, tensor.name + " (all-to-all send)", tensor.dtype, n * count, false);
      int recv = new_buffer(r, tensor.name + " (all-to-all recv)", tensor.dtype, n * count, false);
      int dst = new_buffer(r, tensor.name + " (assembled)", tensor.dtype, box_volume(wanted[i]), false);
      for (size_t j = 0; j < st.group.size(); ++j) {
        Box part = box_intersect(owned[i], wanted[j]);
        emit_copy(r, copy_code_at(ref(src), owned[i], at(send, static_cast<int64_t>(j) * count), part, part, esize),
                  {src, send}, esize * count);
      }
      emit(r,
           "rt::all_to_all(G" + std::to_string(gid) + ", " + ref(send) + ", " + ref(recv) + ", " +
               std::to_string(count) + ");",
           {send, recv});
      for (size_t j = 0; j < st.group.size(); ++j) {
        Box part = box_intersect(owned[j], wanted[i]);
        emit_copy(r, copy_code_at(at(recv, static_cast<int64_t>(j) * count), part, ref(dst), wanted[i], part, esize),
                  {recv, dst}, esize * count);
      }
      assembled_[std::make_tuple(r, st.tensor, plan::box_str(wanted[i]))] = dst;
    }
  }

  /** The buffer rank st.rank reads input st.slot from: its shard, a box assembled earlier, or a new box assembled by
   *  local copies and the op's grouped send/recv (a whole shard is sent from where it lies, a part of one is packed
   *  first; a part that is the whole box is received in place). */
  void fetch(const plan::CommStep &st, std::vector<RankWork> &work) {
    int r = st.rank;
    TensorId t = st.tensor;
    int &buf = work[static_cast<size_t>(r)].in_bufs[static_cast<size_t>(st.slot)];
    const Box &want = st.whole;
    auto key = std::make_tuple(r, t, plan::box_str(want));
    if (st.source == plan::CommStep::Source::shard) {
      buf = tensor_buf_[r][t];
      return;
    }
    if (st.source == plan::CommStep::Source::assembled) {  // tensors are written once per step
      buf = assembled_.at(key);
      return;
    }
    const Tensor &tensor = g_.tensor(t);
    int dst = new_buffer(r, tensor.name + " (assembled)", tensor.dtype, num_elements(box_shape(want)), false);
    buf = dst;
    assembled_[key] = dst;
    int es = dtype_size(tensor.dtype);
    RankWork &me = work[static_cast<size_t>(r)];
    for (const plan::CommStep::Part &p : st.parts) {
      int64_t elems = num_elements(box_shape(p.part));
      if (p.src == r) {
        int own = tensor_buf_[r][t];
        me.unpacks.push_back({copy_code(own, p.owned, dst, want, p.part, es), {own, dst}, copy_timing(elems * es)});
        if (p.part == want && !want.empty())
          me.unpacks.back().move = box_move(own, dst, es, box_shape(p.owned), starts_rel(p.part, p.owned),
                                            box_shape(p.part));
        continue;
      }
      RankWork &sender = work[static_cast<size_t>(p.src)];
      int sbuf = tensor_buf_[p.src][t];
      if (p.part != p.owned) {
        int whole = sbuf;
        sbuf = new_buffer(p.src, tensor.name + " (to rank " + std::to_string(r) + ")", tensor.dtype, elems, false);
        sender.packs.push_back({copy_code(whole, p.owned, sbuf, p.part, p.part, es), {whole, sbuf}, copy_timing(elems * es)});
      }
      sender.transfers.push_back("{rt::Transfer::send, " + std::to_string(r) + ", " + ref(sbuf) + ", " +
                                 std::to_string(elems * es) + "}");
      sender.transfer_bufs.push_back(sbuf);
      bool direct = p.part == want;
      int rbuf = direct ? dst
                        : new_buffer(r, tensor.name + " (from rank " + std::to_string(p.src) + ")", tensor.dtype,
                                     elems, false);
      me.transfers.push_back("{rt::Transfer::recv, " + std::to_string(p.src) + ", " + ref(rbuf) + ", " +
                             std::to_string(elems * es) + "}");
      me.transfer_bufs.push_back(rbuf);
      if (!direct) me.unpacks.push_back({copy_code(rbuf, p.part, dst, want, p.part, es), {rbuf, dst}, copy_timing(elems * es)});
    }
  }

  /** Per rank: its packing copies, its one send/recv statement, its unpacking copies. */
  void emit_send_recv(std::vector<RankWork> &work) {
    for (size_t r = 0; r < work.size(); ++r) {
      RankWork &w = work[r];
      std::vector<Instr> &step = out_.ranks[r].step;
      for (Instr &copy : w.packs) step.push_back(std::move(copy));
      if (!w.transfers.empty()) {
        std::string code = "rt::send_recv({";
        for (size_t i = 0; i < w.transfers.size(); ++i) code += (i ? ", " : "") + w.transfers[i];
        emit(static_cast<int>(r), code + "});", w.transfer_bufs);
      }
      for (Instr &copy : w.unpacks) step.push_back(std::move(copy));
    }
  }

  /** The kernel on each rank of the group, on its shard shapes. */
  void lower_kernels(OpId o, const plan::ParallelConfig &config, std::vector<RankWork> &work) {
    const Op &op = g_.op(o);
    bool split = std::any_of(config.vars.begin(), config.vars.end(), [](const auto &v) { return !v.empty(); });
    for (size_t i = 0; i < config.devices.size(); ++i) {
      int r = config.devices[i];
      const RankWork &w = work[static_cast<size_t>(r)];
      KernelCall call;
      call.g = &g_;
      call.op = &op;
      call.config = &config;
      call.index = static_cast<int64_t>(i);
      call.exact_low = exact_low_.empty() ? nullptr : &exact_low_;
      call.comm = [this](const std::vector<int> &ranks) { return "G" + std::to_string(group_id(ranks)); };
      std::vector<int> used;
      for (size_t s = 0; s < op.inputs.size(); ++s) {
        int b = w.in_bufs[s];
        call.ins.push_back(b < 0 ? "" : ref(b));
        call.in_shapes.push_back(b < 0 ? Shape{} : box_shape(*w.in[s]));
        call.in_boxes.push_back(b < 0 ? Box{} : *w.in[s]);
        if (b >= 0) used.push_back(b);
      }
      for (size_t s = 0; s < op.outputs.size(); ++s) {
        TensorId t = op.outputs[s];
        if (t == kNoTensor || unread_mask(op, s)) {
          call.outs.emplace_back();
          call.out_shapes.emplace_back();
          call.out_boxes.emplace_back();
          continue;
        }
        int b = in_place_target(r, t);
        if (b < 0) b = new_buffer(r, g_.tensor(t).name, g_.tensor(t).dtype, num_elements(box_shape(w.out[s])), false);
        tensor_buf_[r][t] = b;
        call.outs.push_back(ref(b));
        call.out_shapes.push_back(box_shape(w.out[s]));
        call.out_boxes.push_back(w.out[s]);
        used.push_back(b);
      }
      if (split) {
        for (TensorId t : op.outputs)
          if (t != kNoTensor)
            for (const auto &a : sharding(t).axes)
              if (a.kind == plan::AxisSharding::Kind::partial && !plan::partial_ok(op.kind, g_.tensor(t).dtype))
                unsupported_split(op, config);
        check_kernel_split(call);
      }
      if (aliases_input(r, op, call, w.in_bufs[0])) {
        // No statement: the output's readers read the input's buffer (liveness then covers both tensors).
        tensor_buf_[r][op.outputs[0]] = w.in_bufs[0];
        // A map just emitted may still absorb the next op through the alias (a bias add, an identity Dropout, the
        // residual Add) when the alias is its result's one reader.
        std::optional<PendingMap> &prev = last_map_[r];
        if (prev && prev->tensor == op.inputs[0] && map_result_internal(op.inputs[0])) prev->tensor = op.outputs[0];
        else prev.reset();
        continue;
      }
      call.scratch = [this, r, &used, &op](int64_t elems) {
        int b = new_buffer(r, op.name + " (scratch)", real_dtype(), elems, false);
        used.push_back(b);
        return ref(b);
      };
      std::string label = op.name + " (" + std::string(op_kind_name(op.kind)) + ")";
      std::string code = kernel_code(call);
      timing_ = {Timing::Kind::kernel, {o}, plan::shard_key(g_, op, config, static_cast<int64_t>(i))};
      if (is_optimizer_update(op.kind)) {
        // Run after every gradient is complete (finish_step), behind the step's gradient clipping.
        updates_[r].push_back({"// " + label + "\n" + code, used, timing_});
        update_grads_[r].push_back({w.in_bufs[1], num_elements(call.in_shapes[1]), counts_grad(config, work, i)});
        last_map_[r].reset();
        continue;
      }
      if (!(call.map && fuse_into_previous(r, o, label, *call.map, used))) {
        emit(r, "// " + label + "\n" + code, used);
        if ((op.kind == OpKind::Transpose || op.kind == OpKind::Concat) &&
            g_.tensor(op.outputs[0]).dtype == real_dtype())
          describe_moves(r, op, call, w.in_bufs);
        if (op.phase == Phase::forward)
          if (std::string val = validation_kernel_code(call); !val.empty())
            out_.ranks[r].step.back().val_code = "// " + label + ", validating\n" + val;
        if (call.map && op.outputs.size() == 1)
          last_map_[r] = PendingMap{static_cast<int>(out_.ranks[r].step.size()) - 1, label, *call.map,
                                    op.outputs[0], tensor_buf_[r][op.outputs[0]]};
        else
          last_map_[r].reset();
      }
    }
  }

  /** The copies a Transpose or Concat kernel just emitted on rank r makes (Instr::move, Instr::concat_parts). */
  void describe_moves(int r, const Op &op, const KernelCall &call, const std::vector<int> &in_bufs) {
    Instr &in = out_.ranks[r].step.back();
    int out = tensor_buf_[r][op.outputs[0]], es = static_cast<int>(dtype_size(real_dtype()));
    // An input no rank reads here (an empty part) leaves the kernel's code as it is.
    if (out < 0 || std::any_of(in_bufs.begin(), in_bufs.end(), [](int b) { return b < 0; })) return;
    const Shape &x = call.in_shapes[0];
    if (op.kind == OpKind::Transpose)
      in.move = box_move(in_bufs[0], out, es, x, Shape(x.size(), 0), x, op.attr_ints("perm"));
    if (op.kind != OpKind::Concat) return;
    const Shape &y = call.out_shapes[0];
    auto axis = static_cast<size_t>(op.attr_int("axis"));
    const std::vector<int64_t> y_strides = contiguous(y).strides;
    int64_t at = 0;
    for (size_t i = 0; i < in_bufs.size(); ++i) {
      const Shape &part = call.in_shapes[i];
      Move m = box_move(in_bufs[i], out, es, part, Shape(part.size(), 0), part);
      m.dst_view = StridedView{part, y_strides, at * y_strides[axis]};
      at += part[axis];
      in.concat_parts.push_back(std::move(m));
    }
    if (at != y[axis]) in.concat_parts.clear();  // not the local parts side by side: the kernel knows better
  }

  /** The buffer of the tensor an optimizer update's output `t` is assigned to on rank r, when the update writes it in
   *  place (plan::update_writes_in_place): the assign is then a copy of the shard onto itself, which emit_assign
   *  leaves out. -1 otherwise. */
  int in_place_target(int r, TensorId t) const {
    auto it = assign_dst_of_.find(t);
    if (it == assign_dst_of_.end()) return -1;
    TensorId dst = it->second;
    int b = tensor_buf_[r][dst];
    if (b < 0 || !out_.ranks[r].buffers[static_cast<size_t>(b)].persistent ||
        !plan::update_writes_in_place(g_, Assign{dst, t}, sharding(t), sharding(dst)))
      return -1;
    return b;
  }

  /** Whether output `slot` of `op` is a Dropout mask nothing reads (the gradient of an identity Dropout, ratio 0 or
   *  not training, reads none): the kernel then writes no mask, and no buffer holds one. */
  bool unread_mask(const Op &op, size_t slot) const {
    TensorId t = op.output(slot);
    return op.kind == OpKind::Dropout && slot == 1 && t != kNoTensor && readers_[t] == 0 && t != g_.loss &&
           !assigned_src_[t] && std::find(g_.outputs.begin(), g_.outputs.end(), t) == g_.outputs.end();
  }

  /** Whether a Reshape, Identity or whole-box Slice on rank r can pass its input's buffer on as its output instead of
   *  copying it: the local input and output are the same elements in the same order (the kernel would copy the
   *  buffer whole; a split is checked by check_kernel_split first), and nothing writes either tensor's memory in
   *  place later: not persistent state or a data read, not assigned, not partial (all-reduced in place), not read by
   *  an optimizer update (gradients are clipped, accumulated and all-reduced in place), not the loss or a graph
   *  output. */
  bool aliases_input(int r, const Op &op, const KernelCall &call, int in_buf) const {
    // A Dropout that keeps every element (ratio 0, or not training) and writes no mask is an Identity.
    bool identity_dropout = op.kind == OpKind::Dropout &&
                            (op.attr_int("training_mode", 0) == 0 || op.attr_float("ratio", 0.5) == 0.0) &&
                            (op.outputs.size() == 1 || unread_mask(op, 1));
    // A Slice (or its gradient) of unit steps whose local input and output boxes are one box copies it whole: the
    // input was assembled to the box the slice keeps (torch's attention takes q, k and v from one projection so).
    bool identity_slice = false;
    if (op.kind == OpKind::Slice || op.kind == OpKind::SliceGrad) {
      std::vector<int64_t> steps = op.attr_ints("steps", {});
      identity_slice = call.in_shapes[0] == call.out_shapes[0] &&
                       std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
    }
    if ((op.kind != OpKind::Reshape && op.kind != OpKind::Identity && !identity_dropout && !identity_slice) ||
        in_buf < 0 || (op.outputs.size() != 1 && !identity_dropout))
      return false;
    const Buffer &b = out_.ranks[r].buffers[static_cast<size_t>(in_buf)];
    if (b.persistent || b.elems != num_elements(call.out_shapes[0])) return false;
    for (TensorId t : {op.inputs[0], op.outputs[0]}) {
      const Tensor &tensor = g_.tensor(t);
      if (is_data(tensor) || tensor.producer == kNoOp || assigned_dst_[t] || assigned_src_[t] || updated_[t] ||
          is_partial(sharding(t)) || t == g_.loss || tensor.dtype != b.dtype ||
          std::find(g_.outputs.begin(), g_.outputs.end(), t) != g_.outputs.end())
        return false;
    }
    return true;
  }

  /** Whether the validation metrics understand the graph's loss: a classifier's (rt::val). */
  /** Why validation cannot run on this graph, or "" when it can. */
  std::string validation_problem() const {
    for (const Tensor &t : g_.tensors())
      if (is_data(t) && t.sample_axis != 0)  // the metrics count samples along dim 0 of the loss's scores
        return "--val-data: validation needs sample-major inputs, and input \"" + t.name + "\" has its samples in dim " +
               std::to_string(t.sample_axis);
    if (g_.loss != kNoTensor)
      for (OpId o = 0; o < g_.num_ops(); ++o) {
        OpKind k = g_.op(o).kind;
        if (k == OpKind::SoftmaxCrossEntropyLoss || k == OpKind::NegativeLogLikelihoodLoss) return "";
      }
    return "--val-data: the model's loss is not a classifier's (SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss)";
  }

  /** RankProgram::validation: the data reads, and the statements of a pass that serve forward ops only. */
  std::vector<Instr> validation_pass(const RankProgram &prog) const {
    std::vector<Instr> out;
    for (int i = 0; i < prog.passes_end; ++i) {
      const Instr &in = prog.step[static_cast<size_t>(i)];
      bool forward = in.timing.kind == Timing::Kind::data ||
                     (!in.timing.ops.empty() && std::all_of(in.timing.ops.begin(), in.timing.ops.end(), [&](OpId o) {
                       return g_.op(o).phase == Phase::forward;
                     }));
      if (!forward) continue;
      out.push_back(in);
      if (!in.val_code.empty()) out.back().code = in.val_code;
    }
    return out;
  }

  static bool is_optimizer_update(OpKind k) {
    return k == OpKind::SGDUpdate || k == OpKind::MomentumUpdate || k == OpKind::AdamUpdate;
  }

  /** Whether member `i` of an update's group is the first to hold its box of the gradient (replicas of a box count
   *  once in the global norm). Boxes of one sharding are equal or disjoint. */
  static bool counts_grad(const plan::ParallelConfig &config, const std::vector<RankWork> &work, size_t i) {
    const Box &mine = *work[static_cast<size_t>(config.devices[i])].in[1];
    for (size_t j = 0; j < i; ++j)
      if (*work[static_cast<size_t>(config.devices[j])].in[1] == mine) return false;
    return true;
  }

  /** Fuses op `o`'s map into the map just emitted on rank r when it reads that map's result and nothing else reads
   *  it: the result is then never stored (its buffer stays unreferenced and takes no arena space). */
  bool fuse_into_previous(int r, OpId o, const std::string &label, const MapSpec &spec, const std::vector<int> &used) {
    std::optional<PendingMap> &prev = last_map_[r];
    std::vector<Instr> &step = out_.ranks[r].step;
    if (!prev || prev->instr != static_cast<int>(step.size()) - 1 || prev->spec.n != spec.n) return false;
    // A statement serves one phase (a validation pass runs the forward ones alone).
    if (g_.op(step.back().timing.ops.back()).phase != g_.op(o).phase) return false;
    TensorId t = prev->tensor;
    if (!map_result_internal(t)) return false;
    const Op &op = g_.op(o);
    if (std::count(op.inputs.begin(), op.inputs.end(), t) != 1) return false;
    if (!fusable(prev->spec, spec)) return false;  // prev->spec.out is ref(prev->buffer)
    MapSpec fused = fuse(prev->spec, spec);
    Instr &instr = step.back();
    std::vector<int> buffers;
    for (int b : instr.buffers)
      if (b != prev->buffer) buffers.push_back(b);
    for (int b : used)
      if (b != prev->buffer && std::find(buffers.begin(), buffers.end(), b) == buffers.end()) buffers.push_back(b);
    prev->label += " + " + label;
    Timing timing = instr.timing;
    timing.ops.push_back(o);
    instr = {"// fused: " + prev->label + "\n" + map_code(fused), buffers, timing};
    prev->spec = fused;
    prev->tensor = op.outputs[0];
    prev->buffer = tensor_buf_[r][op.outputs[0]];
    return true;
  }

  /** Whether a map's result `t` may stay inside a fused map: one reader, not the loss, assigned, partial or a graph
   *  output. */
  bool map_result_internal(TensorId t) const {
    return readers_[t] == 1 && t != g_.loss && !assigned_dst_[t] && !assigned_src_[t] && !is_partial(sharding(t)) &&
           std::find(g_.outputs.begin(), g_.outputs.end(), t) == g_.outputs.end();
  }

  /** Whether the op reads anything of input `slot` when nothing is split. */
  bool reads_slot_unsplit(const Op &op, size_t slot) const {
    plan::ParallelConfig whole;
    whole.devices = {0};
    whole.mesh = {1};
    whole.vars = {""};
    return plan::op_input_regions(g_, op, whole, 0)[slot].has_value();
  }

  static bool is_partial(const plan::Sharding &s) {
    return std::any_of(s.axes.begin(), s.axes.end(),
                       [](const auto &a) { return a.kind == plan::AxisSharding::Kind::partial; });
  }

  void finish_step() {
    // Partial tensors nobody read (the loss, assigned results) are all-reduced, in tensor order.
    timing_ = {Timing::Kind::comm, {}, ""};
    std::vector<RankWork> none;
    while (next_step_ < steps_.size() && steps_[next_step_].kind != plan::CommStep::Kind::assign)
      lower_step(steps_[next_step_++], none);
    timing_ = {};
    // The forward's assigns end each pass (forward_assign); the updates' end the step.
    for (size_t i = next_step_; i < steps_.size(); ++i)
      if (forward_assign(steps_[i])) emit_assign(steps_[i]);
    // The optimizers' updates, after the gradients' accumulation, unscaling (with loss scaling) and clipping
    // (rt::TrainingRun::clip_grads: a no-op unless the run clips or logs the gradient norm). Every rank calls each of
    // them (they may all-reduce over the world), with or without updates of its own; a pass of the step (its data,
    // forward and backward) repeats up to the accumulation (RankProgram::passes_end).
    for (size_t r = 0; r < updates_.size(); ++r) {
      std::string grads;
      std::vector<int> bufs;
      for (const UpdateGrad &u : update_grads_[r]) {
        grads += std::string(grads.empty() ? "" : ", ") + "{" + ref(u.buffer) + ", " + std::to_string(u.elems) +
                 (u.counted ? ", true}" : ", false}");
        bufs.push_back(u.buffer);
      }
      // Every rank holding the loss averages it over the passes and hands it to log_loss (which prints on rank 0
      // only): the ranks of a data-parallel plan then run the same statements (shared_program.h).
      int loss = g_.loss != kNoTensor ? tensor_buf_[r][g_.loss] : -1;
      std::vector<int> with_loss = bufs;
      if (loss >= 0) with_loss.push_back(loss);
      emit(static_cast<int>(r), "run.accumulate({" + grads + "}, " + (loss >= 0 ? ref(loss) : "nullptr") + ", micro);",
           with_loss);
      if (g_.loss_scaling.scale != kNoTensor)  // may skip the updates below (rt::detail::g_skip_updates)
        emit(static_cast<int>(r), "run.unscale_grads({" + grads + "}, step);", bufs);
      emit(static_cast<int>(r), "run.clip_grads({" + grads + "}, step);", bufs);
      for (Instr &in : updates_[r]) out_.ranks[r].step.push_back(std::move(in));
    }
    // The loss, logged by rank 0 (and passed to log_loss by every rank holding it, as above).
    if (g_.loss != kNoTensor) {
      if (tensor_buf_[0][g_.loss] < 0)
        CLEAVE_USER_ERROR("codegen: rank 0 does not hold the loss \"", g_.tensor(g_.loss).name, "\"");
      for (size_t r = 0; r < updates_.size(); ++r)
        if (int b = tensor_buf_[r][g_.loss]; b >= 0) emit(static_cast<int>(r), "rt::log_loss(step, " + ref(b) + ");", {b});
    }
    for (size_t i = next_step_; i < steps_.size(); ++i)
      if (!forward_assign(steps_[i])) emit_assign(steps_[i]);
    next_step_ = steps_.size();
  }

  /** Whether an assign stores what a forward op computed (BatchNorm's running statistics): it is applied after every
   *  pass, so each of --accumulate's passes updates the statistics, as each of torch's forward passes does. */
  bool forward_assign(const plan::CommStep &st) const {
    CLEAVE_CHECK(st.kind == plan::CommStep::Kind::assign, "a communication step after the assigns");
    OpId producer = g_.tensor(g_.assigns[static_cast<size_t>(st.slot)].src).producer;
    return producer != kNoOp && g_.op(producer).phase == Phase::forward;
  }

  /** An assign: each holder of dst copies its shard of src (which must hold the same box). */
  void emit_assign(const plan::CommStep &st) {
    const Assign &a = g_.assigns[static_cast<size_t>(st.slot)];
    int r = st.rank;
    int src = tensor_buf_[r][a.src];
    if (src < 0 || st.parts.empty() || !box_contains(st.parts[0].owned, st.whole))
      CLEAVE_USER_ERROR("codegen: the update of \"", g_.tensor(a.dst).name,
                        "\" is not held where the tensor lives (assign across shardings is not supported yet)");
    int dst = tensor_buf_[r][a.dst];
    if (dst == src) return;  // the update wrote the tensor in place (in_place_target)
    int es = dtype_size(g_.tensor(a.dst).dtype);
    emit_copy(r, copy_code(src, st.parts[0].owned, dst, st.whole, st.whole, es), {src, dst},
              std::max<int64_t>(box_volume(st.whole), 1) * es);
  }

  /** Liveness over the step, then offsets (64-byte aligned) greedily by size: persistent buffers first, then the
   *  largest first, each at the lowest offset clear of the placed buffers whose lifetimes overlap its own (the
   *  "greedy by size" heap layout of TFLite's and XLA's planners; creation order packed 10-20% looser). Ties keep
   *  creation order, so the layout is deterministic. */
  static void plan_memory(RankProgram &prog) {
    int end = static_cast<int>(prog.step.size());
    for (int i = 0; i < end; ++i)
      for (int b : prog.step[i].buffers) {
        Buffer &buf = prog.buffers[b];
        if (buf.first < 0) buf.first = i;
        buf.last = std::max(buf.last, i);
      }
    for (Buffer &buf : prog.buffers) {
      if (buf.persistent) {
        buf.first = 0;
        buf.last = end;
      }
    }
    std::vector<int> order;
    for (int b = 0; b < static_cast<int>(prog.buffers.size()); ++b)
      if (prog.buffers[b].first >= 0) order.push_back(b);  // never referenced (a fused intermediate): no storage
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      const Buffer &a = prog.buffers[x], &b = prog.buffers[y];
      if (a.persistent != b.persistent) return a.persistent;
      return a.bytes() > b.bytes();
    });
    std::vector<int> placed;
    int64_t peak = 0;
    for (int b : order) {
      Buffer &buf = prog.buffers[b];
      int64_t size = (buf.bytes() + 63) / 64 * 64;
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (int o : placed) {
        const Buffer &other = prog.buffers[o];
        if (other.last < buf.first || buf.last < other.first) continue;
        busy.push_back({other.offset, other.offset + (other.bytes() + 63) / 64 * 64});
      }
      std::sort(busy.begin(), busy.end());
      int64_t at = 0;
      for (const auto &[lo, hi] : busy) {
        if (at + size <= lo) break;
        at = std::max(at, hi);
      }
      buf.offset = at;
      peak = std::max(peak, at + size);
      placed.push_back(b);
    }
    prog.arena_bytes = std::max<int64_t>(peak, 64);
  }

  const Graph &g_;
  const plan::Plan &p_;
  bool need_values_;
  Lowered out_;
  std::map<TensorId, plan::Sharding> sharding_;
  std::map<OpId, plan::ParallelConfig> config_;
  std::vector<std::vector<int>> tensor_buf_;  // [rank][tensor] -> buffer
  std::vector<DType> exact_low_;  // exact_low_types(g_) when g_ has rounding ops, else empty
  std::vector<bool> assigned_dst_, assigned_src_;
  std::vector<bool> updated_;  // read by an optimizer update
  std::map<TensorId, TensorId> assign_dst_of_;  // assign source -> destination
  /** (rank, tensor, needed box) -> the buffer it was assembled into this step. */
  std::map<std::tuple<int, TensorId, std::string>, int> assembled_;
  /** The last map emitted on each rank, while it may still absorb the next op. */
  struct PendingMap {
    int instr = -1;
    std::string label;
    MapSpec spec;
    TensorId tensor = kNoTensor;
    int buffer = -1;
  };
  std::vector<std::optional<PendingMap>> last_map_;
  /** Per rank, the optimizer updates' kernels (emitted by finish_step) and the gradient shard each reads. */
  struct UpdateGrad {
    int buffer = -1;
    int64_t elems = 0;
    bool counted = true;  // the first holder of its box: counted once in the global gradient norm
  };
  std::vector<std::vector<Instr>> updates_;
  std::vector<std::vector<UpdateGrad>> update_grads_;
  /** Number of (op, input slot) reads of each tensor. */
  std::vector<int> readers_;
  /** The derived communication (planner/cost/communication.h) and the next step to lower. */
  std::vector<plan::CommStep> steps_;
  size_t next_step_ = 0;
  /** How emit() tags what it emits: the communication before an op, its kernel, or untimed. */
  Timing timing_;
};

}  // namespace

Lowered lower(const Graph &g, const plan::Plan &p, bool need_values) {
  // The runtime's buffers and kernels exist for these dtypes only; the IR (and the interpreter) has more.
  for (const Tensor &t : g.tensors())
    if (!codegen_supports(t.dtype))
      CLEAVE_USER_ERROR("tensor \"", t.name, "\" has dtype ", dtype_name(t.dtype),
                        ", which code generation does not support (only f32, f64, i64, i32, bool)");
  DType real = real_dtype(g);
  plan::validate_plan(g, p);
  std::vector<plan::CommStep> steps;
  plan::derive_communication(g, p, steps);
  struct RealScope {
    explicit RealScope(DType t) { g_real = t; }
    ~RealScope() { g_real = DType::f32; }
  } scope(real);
  Lowered l = Lowerer(g, p, std::move(steps), need_values).run();
  if (real == DType::f64) l.precision = "fp64";
  return l;
}

}  // namespace cleave::codegen
