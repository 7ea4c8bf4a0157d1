#include "codegen/lower.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "codegen/collectives.h"
#include "codegen/kernels.h"
#include "codegen/overlap.h"
#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/cost/profile.h"
#include "planner/plan/validate.h"

namespace cleave::codegen {

int64_t Buffer::bytes() const { return elems * dtype_size(dtype); }

std::string float_literal(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(v)));
  return buf;
}

std::string dims_literal(const std::vector<int64_t> &d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "}";
}

namespace {

using plan::Box;

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
  return "rt::region_copy({rt::Box{" + src + ", " + dims_literal(box_shape(src_box)) + ", " +
         dims_literal(starts_rel(part, src_box)) + ", " + dims_literal(box_shape(part)) + ", " +
         dims_literal(starts_rel(part, dst_box)) + "}}, " + dst + ", " + dims_literal(box_shape(dst_box)) + ", " +
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
  Lowerer(const Graph &g, const plan::Plan &p, bool need_values) : g_(g), p_(p), need_values_(need_values) {
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
  }

  Lowered run() {
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      const Tensor &tensor = g_.tensor(t);
      if (tensor.role == Role::input || tensor.role == Role::label) {
        if (tensor.shape.empty()) CLEAVE_USER_ERROR("input \"", tensor.name, "\" is a scalar: it has no batch dim");
        out_.batch = tensor.shape[0];
      }
    }
    last_map_.resize(out_.ranks.size());
    readers_.assign(static_cast<size_t>(g_.num_tensors()), 0);
    for (OpId o = 0; o < g_.num_ops(); ++o)
      for (TensorId t : g_.op(o).inputs)
        if (t != kNoTensor) ++readers_[t];
    assigned_dst_.assign(static_cast<size_t>(g_.num_tensors()), false);
    assigned_src_.assign(static_cast<size_t>(g_.num_tensors()), false);
    for (const Assign &a : g_.assigns) {
      assigned_dst_[a.dst] = true;
      assigned_src_[a.src] = true;
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
        if (tensor.role == Role::input || tensor.role == Role::label) {
          for (size_t d = 1; d < box.size(); ++d)
            if (box[d].begin != 0 || box[d].end != tensor.shape[d])
              CLEAVE_USER_ERROR("input \"", tensor.name, "\": codegen reads data split on the batch dim only, got ",
                                plan::sharding_axes_str(s));
          int b = new_buffer(r, tensor.name, tensor.dtype, num_elements(box_shape(box)), false);
          tensor_buf_[r][t] = b;
          prog.data.push_back({t, b, box[0].begin, box[0].size()});
          timing_ = {Timing::Kind::data, {}, "", num_elements(box_shape(box)) * dtype_size(tensor.dtype)};
          emit(r, std::string("rt::npy_read_samples(npy_") + std::to_string(prog.data.size() - 1) + ", (step - 1) * " +
                      std::to_string(out_.batch) + " + " + std::to_string(box[0].begin) + ", " +
                      std::to_string(box[0].size()) + ", " + ref(b) + ");",
               {b});
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
        owned_[t].push_back({r, box});
      }
    }
    for (OpId o = 0; o < g_.num_ops(); ++o) lower_op(o);
    finish_step();
    for (auto &prog : out_.ranks) overlap_reductions(prog);
    check_collective_order(out_);
    for (auto &prog : out_.ranks) plan_memory(prog);
    return std::move(out_);
  }

 private:
  struct Owned {
    int rank;
    Box box;
  };

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
    out_.ranks[r].step.push_back({std::move(code), std::move(buffers), {Timing::Kind::copy, timing_.ops, "", bytes}});
  }

  int group_id(const std::vector<int> &ranks) {
    for (size_t i = 0; i < out_.groups.size(); ++i)
      if (out_.groups[i] == ranks) return static_cast<int>(i);
    out_.groups.push_back(ranks);
    int id = static_cast<int>(out_.groups.size()) - 1;
    for (int r : ranks) out_.ranks[r].groups.push_back(id);
    return id;
  }

  const Owned *owned_by(TensorId t, int r) const {
    auto it = owned_.find(t);
    if (it == owned_.end()) return nullptr;
    for (const auto &ow : it->second)
      if (ow.rank == r) return &ow;
    return nullptr;
  }

  /** Reduces a partial tensor before its first read, by one collective per group of ranks that differ only along
   *  its partial axes (the product of those axes' groups: on a [2, 2] mesh partial on both, one all-reduce over 4
   *  ranks moves 3/2 of the shard per rank where one per axis would move 2). `wants` are the boxes the next reader's
   *  ranks need: when a group's members need disjoint equal blocks that tile their shard, the sum is reduce-scattered
   *  into those blocks (each rank then owns only its block); otherwise it is all-reduced (replicated). Deferring the
   *  reduction to the first read is what lets a partial result that is only read in blocks never travel whole. */
  void resolve_partial(TensorId t, const std::map<int, Box> &wants) {
    pending_partial_.erase(t);
    const plan::Sharding &s = sharding(t);
    const Tensor &tensor = g_.tensor(t);
    std::vector<size_t> axes;
    for (size_t a = 0; a < s.axes.size(); ++a)
      if (s.axes[a].kind == plan::AxisSharding::Kind::partial) axes.push_back(a);
    for (const auto &members : axes_groups(s.devices, s.mesh, axes)) {
      if (members.size() < 2) continue;
      int gid = group_id(members);
      const Box whole = owned_by(t, members[0])->box;
      std::vector<Box> blocks;
      for (int r : members)
        if (auto w = wants.find(r); w != wants.end()) blocks.push_back(w->second);
      if (tensor.dtype == DType::f32 && blocks.size() == members.size() && tiles(blocks, whole)) {
        reduce_scatter(t, gid, members, blocks, whole);
        continue;
      }
      for (int r : members) {
        int b = tensor_buf_[r][t];
        emit(r,
             "rt::all_reduce_sum(G" + std::to_string(gid) + ", " + ref(b) + ", " + ref(b) + ", " +
                 std::to_string(out_.ranks[r].buffers[b].elems) + ");",
             {b});
      }
    }
  }

  void reduce_scatter(TensorId t, int gid, const std::vector<int> &members, const std::vector<Box> &blocks,
                      const Box &whole) {
    const Tensor &tensor = g_.tensor(t);
    int64_t count = box_volume(blocks[0]);
    bool in_order = concatenates(blocks, whole);
    for (size_t m = 0; m < members.size(); ++m) {
      int r = members[m];
      int full = tensor_buf_[r][t];
      int send = full;
      if (!in_order) {
        send = new_buffer(r, tensor.name + " (reduce-scatter send)", tensor.dtype, box_volume(whole), false);
        for (size_t k = 0; k < members.size(); ++k)
          emit_copy(r, copy_code_at(ref(full), whole, at(send, static_cast<int64_t>(k) * count), blocks[k], blocks[k], 4),
                    {full, send}, 4 * count);
      }
      int mine = new_buffer(r, tensor.name, tensor.dtype, count, false);
      emit(r,
           "rt::reduce_scatter_sum(G" + std::to_string(gid) + ", " + ref(send) + ", " + ref(mine) + ", " +
               std::to_string(count) + ");",
           {send, mine});
      tensor_buf_[r][t] = mine;
      for (auto &ow : owned_[t])
        if (ow.rank == r) ow.box = blocks[m];
    }
  }

  /** Collectives for input slot `s` of `op`: the ranks that must assemble the same box from shards that tile it
   *  all-gather it; ranks that exchange equal blocks pairwise all-to-all. Fills `in_bufs` for the ranks served. */
  void collective_inputs(const Op &op, size_t s, const std::map<int, Box> &wants,
                         std::map<int, std::vector<int>> &in_bufs) {
    TensorId t = op.inputs[s];
    const Tensor &tensor = g_.tensor(t);
    if (tensor.dtype != DType::f32) return;
    // Ranks that need communication: not served by their own shard, not already assembled this step.
    std::vector<int> ranks;
    for (const auto &[r, want] : wants) {
      const Owned *mine = owned_by(t, r);
      if (mine && box_contains(mine->box, want)) continue;
      if (assembled_.count(std::make_tuple(r, t, plan::box_str(want)))) continue;
      if (std::count_if(owned_[t].begin(), owned_[t].end(), [&](const Owned &ow) { return ow.rank == r; }) != 1)
        continue;
      ranks.push_back(r);
    }
    // All-gather: per distinct wanted box, its ranks' shards tile it.
    std::map<std::string, std::vector<int>> by_box;
    for (int r : ranks) by_box[plan::box_str(wants.at(r))].push_back(r);
    std::set<int> served;
    for (const auto &[key, members] : by_box) {
      const Box &want = wants.at(members[0]);
      std::vector<Box> blocks;
      for (int r : members) blocks.push_back(owned_by(t, r)->box);
      if (!tiles(blocks, want)) continue;
      int gid = group_id(members);
      int64_t count = box_volume(blocks[0]);
      bool in_order = concatenates(blocks, want);
      for (int r : members) {
        int dst = new_buffer(r, tensor.name + " (assembled)", tensor.dtype, box_volume(want), false);
        int recv = in_order ? dst : new_buffer(r, tensor.name + " (all-gather)", tensor.dtype, box_volume(want), false);
        int src = tensor_buf_[r][t];
        emit(r,
             "rt::all_gather(G" + std::to_string(gid) + ", " + ref(src) + ", " + ref(recv) + ", " +
                 std::to_string(count) + ");",
             {src, recv});
        if (!in_order)
          for (size_t k = 0; k < members.size(); ++k)
            emit_copy(r, copy_code_at(at(recv, static_cast<int64_t>(k) * count), blocks[k], ref(dst), want, blocks[k], 4),
                      {recv, dst}, 4 * count);
        assembled_[std::make_tuple(r, t, plan::box_str(want))] = dst;
        in_bufs[r][s] = dst;
        served.insert(r);
      }
    }
    // All-to-all among the rest.
    std::vector<int> rest;
    for (int r : ranks)
      if (!served.count(r)) rest.push_back(r);
    std::vector<Box> owned, wanted;
    for (int r : rest) {
      owned.push_back(owned_by(t, r)->box);
      wanted.push_back(wants.at(r));
    }
    if (!all_to_all_pattern(owned, wanted)) return;
    int gid = group_id(rest);
    int64_t count = box_volume(box_intersect(owned[0], wanted[0]));
    int64_t n = static_cast<int64_t>(rest.size());
    for (size_t i = 0; i < rest.size(); ++i) {
      int r = rest[i];
      int src = tensor_buf_[r][t];
      int send = new_buffer(r, tensor.name + " (all-to-all send)", tensor.dtype, n * count, false);
      int recv = new_buffer(r, tensor.name + " (all-to-all recv)", tensor.dtype, n * count, false);
      int dst = new_buffer(r, tensor.name + " (assembled)", tensor.dtype, box_volume(wanted[i]), false);
      for (size_t j = 0; j < rest.size(); ++j) {
        Box part = box_intersect(owned[i], wanted[j]);
        emit_copy(r, copy_code_at(ref(src), owned[i], at(send, static_cast<int64_t>(j) * count), part, part, 4),
                  {src, send}, 4 * count);
      }
      emit(r,
           "rt::all_to_all(G" + std::to_string(gid) + ", " + ref(send) + ", " + ref(recv) + ", " +
               std::to_string(count) + ");",
           {send, recv});
      for (size_t j = 0; j < rest.size(); ++j) {
        Box part = box_intersect(owned[j], wanted[i]);
        emit_copy(r, copy_code_at(at(recv, static_cast<int64_t>(j) * count), part, ref(dst), wanted[i], part, 4),
                  {recv, dst}, 4 * count);
      }
      assembled_[std::make_tuple(r, t, plan::box_str(wanted[i]))] = dst;
      in_bufs[r][s] = dst;
    }
  }

  void lower_op(OpId o) {
    const Op &op = g_.op(o);
    auto cit = config_.find(o);
    CLEAVE_CHECK(cit != config_.end(), "op ", op.name, " has no config");
    const plan::ParallelConfig &config = cit->second;
    bool split = std::any_of(config.vars.begin(), config.vars.end(), [](const auto &v) { return !v.empty(); });
    timing_ = {Timing::Kind::comm, {o}, ""};

    struct Need {
      std::vector<std::optional<Box>> in;
      std::vector<Box> out;
    };
    std::map<int, Need> needs;  // per rank of the op's group
    for (size_t i = 0; i < config.devices.size(); ++i) {
      int r = config.devices[i];
      Need n;
      n.in = plan::op_input_regions(g_, op, config, static_cast<int64_t>(i));
      for (size_t s = 0; s < op.outputs.size(); ++s) {
        TensorId t = op.outputs[s];
        if (t == kNoTensor) {
          n.out.push_back({});
          continue;
        }
        const plan::Sharding &sh = sharding(t);
        CLEAVE_CHECK(sh.devices == config.devices, "op ", op.name, ": output group differs from the op's");
        n.out.push_back(plan::shard_region(g_.tensor(t).shape, sh, static_cast<int64_t>(i)));
      }
      needs[r] = std::move(n);
    }

    // Assemble every input's needed box on every rank of the group: one grouped send/recv for the whole op.
    std::vector<std::vector<std::string>> packs(out_.ranks.size()), unpacks(out_.ranks.size()),
        transfers(out_.ranks.size());
    std::vector<std::vector<int>> pack_bufs(out_.ranks.size()), unpack_bufs(out_.ranks.size()),
        transfer_bufs(out_.ranks.size());
    std::vector<std::vector<int64_t>> pack_bytes(out_.ranks.size()), unpack_bytes(out_.ranks.size());
    std::map<int, std::vector<int>> in_bufs;  // rank -> buffer per input slot (-1 absent)
    for (const auto &[r, need] : needs) in_bufs[r].assign(op.inputs.size(), -1);
    for (size_t s = 0; s < op.inputs.size(); ++s) {
      TensorId t = op.inputs[s];
      if (t == kNoTensor) continue;
      std::map<int, Box> wants;
      for (const auto &[r, need] : needs)
        if (need.in[s]) wants[r] = *need.in[s];
      if (pending_partial_.count(t)) resolve_partial(t, wants);
      collective_inputs(op, s, wants, in_bufs);
    }
    for (const auto &[r, need] : needs) {
      std::vector<int> &bufs = in_bufs[r];
      for (size_t s = 0; s < op.inputs.size(); ++s) {
        TensorId t = op.inputs[s];
        if (t == kNoTensor || bufs[s] >= 0) continue;
        const Tensor &tensor = g_.tensor(t);
        if (!need.in[s]) {
          // An operand the op never reads (NegativeLogLikelihoodLossGrad's input: only its shape matters) stays
          // absent; one that only this shard does not read cannot be handed to the kernel.
          if (!reads_slot_unsplit(op, s)) continue;
          unsupported_split(op, config);
        }
        const Box &want = *need.in[s];
        const std::vector<Owned> &owners = owned_[t];
        // The local shard covers it?
        const Owned *mine = nullptr;
        for (const auto &ow : owners)
          if (ow.rank == r) mine = &ow;
        if (mine && mine->box == want) {
          bufs[s] = tensor_buf_[r][t];
          continue;
        }
        // Tensors are written once per step, so a box assembled for an earlier op is still valid.
        auto key = std::make_tuple(r, t, plan::box_str(want));
        if (auto hit = assembled_.find(key); hit != assembled_.end()) {
          bufs[s] = hit->second;
          continue;
        }
        int dst = new_buffer(r, tensor.name + " (assembled)", tensor.dtype, num_elements(box_shape(want)), false);
        bufs[s] = dst;
        assembled_[key] = dst;
        int es = dtype_size(tensor.dtype);
        if (mine && box_contains(mine->box, want)) {
          unpacks[r].push_back(copy_code(tensor_buf_[r][t], mine->box, dst, want, want, es));
          unpack_bufs[r].insert(unpack_bufs[r].end(), {tensor_buf_[r][t], dst});
          unpack_bytes[r].push_back(num_elements(box_shape(want)) * es);
          continue;
        }
        // One holder per distinct owned block: ourselves if we hold it, else the first in group order.
        std::vector<const Owned *> chosen;
        for (const auto &ow : owners) {
          if (box_empty(box_intersect(ow.box, want)) && !want.empty()) continue;
          auto same = std::find_if(chosen.begin(), chosen.end(), [&](const Owned *c) { return c->box == ow.box; });
          if (same == chosen.end())
            chosen.push_back(&ow);
          else if (ow.rank == r)
            *same = &ow;
        }
        for (const Owned *ow : chosen) {
          Box part = want.empty() ? Box{} : box_intersect(ow->box, want);
          if (ow->rank == r) {
            unpacks[r].push_back(copy_code(tensor_buf_[r][t], ow->box, dst, want, part, es));
            unpack_bufs[r].insert(unpack_bufs[r].end(), {tensor_buf_[r][t], dst});
            unpack_bytes[r].push_back(num_elements(box_shape(part)) * es);
            continue;
          }
          int src_rank = ow->rank;
          int64_t elems = num_elements(box_shape(part));
          // A whole shard is sent from where it lies; a part of one is packed first.
          int sbuf = tensor_buf_[src_rank][t];
          if (part != ow->box) {
            sbuf = new_buffer(src_rank, tensor.name + " (to rank " + std::to_string(r) + ")", tensor.dtype, elems,
                              false);
            packs[src_rank].push_back(copy_code(tensor_buf_[src_rank][t], ow->box, sbuf, part, part, es));
            pack_bufs[src_rank].insert(pack_bufs[src_rank].end(), {tensor_buf_[src_rank][t], sbuf});
            pack_bytes[src_rank].push_back(elems * es);
          }
          transfers[src_rank].push_back("{rt::Transfer::send, " + std::to_string(r) + ", " + ref(sbuf) + ", " +
                                        std::to_string(elems * es) + "}");
          transfer_bufs[src_rank].push_back(sbuf);
          // A part that is the whole needed box is received in place.
          bool direct = part == want;
          int rbuf = direct ? dst
                            : new_buffer(r, tensor.name + " (from rank " + std::to_string(src_rank) + ")",
                                         tensor.dtype, elems, false);
          transfers[r].push_back("{rt::Transfer::recv, " + std::to_string(src_rank) + ", " + ref(rbuf) + ", " +
                                 std::to_string(elems * es) + "}");
          transfer_bufs[r].push_back(rbuf);
          if (direct) continue;
          unpacks[r].push_back(copy_code(rbuf, part, dst, want, part, es));
          unpack_bufs[r].insert(unpack_bufs[r].end(), {rbuf, dst});
          unpack_bytes[r].push_back(elems * es);
        }
      }
    }
    for (size_t r = 0; r < out_.ranks.size(); ++r) {
      int rr = static_cast<int>(r);
      for (size_t i = 0; i < packs[r].size(); ++i)
        emit_copy(rr, packs[r][i], {pack_bufs[r][2 * i], pack_bufs[r][2 * i + 1]}, pack_bytes[r][i]);
      if (!transfers[r].empty()) {
        std::string code = "rt::send_recv({";
        for (size_t i = 0; i < transfers[r].size(); ++i) code += (i ? ", " : "") + transfers[r][i];
        emit(rr, code + "});", transfer_bufs[r]);
      }
      for (size_t i = 0; i < unpacks[r].size(); ++i)
        emit_copy(rr, unpacks[r][i], {unpack_bufs[r][2 * i], unpack_bufs[r][2 * i + 1]}, unpack_bytes[r][i]);
    }

    // The kernel on each rank of the group, on its shard shapes.
    for (size_t i = 0; i < config.devices.size(); ++i) {
      int r = config.devices[i];
      const Need &need = needs[r];
      KernelCall call;
      call.g = &g_;
      call.op = &op;
      call.config = &config;
      call.index = static_cast<int64_t>(i);
      call.comm = [this](const std::vector<int> &ranks) { return "G" + std::to_string(group_id(ranks)); };
      std::vector<int> used;
      for (size_t s = 0; s < op.inputs.size(); ++s) {
        int b = in_bufs[r][s];
        call.ins.push_back(b < 0 ? "" : ref(b));
        call.in_shapes.push_back(b < 0 ? Shape{} : box_shape(*need.in[s]));
        call.in_boxes.push_back(b < 0 ? Box{} : *need.in[s]);
        if (b >= 0) used.push_back(b);
      }
      for (size_t s = 0; s < op.outputs.size(); ++s) {
        TensorId t = op.outputs[s];
        if (t == kNoTensor) {
          call.outs.emplace_back();
          call.out_shapes.emplace_back();
          call.out_boxes.emplace_back();
          continue;
        }
        int b = new_buffer(r, g_.tensor(t).name, g_.tensor(t).dtype, num_elements(box_shape(need.out[s])), false);
        tensor_buf_[r][t] = b;
        owned_[t].push_back({r, need.out[s]});
        call.outs.push_back(ref(b));
        call.out_shapes.push_back(box_shape(need.out[s]));
        call.out_boxes.push_back(need.out[s]);
        used.push_back(b);
      }
      if (split) {
        for (TensorId t : op.outputs)
          if (t != kNoTensor)
            for (const auto &a : sharding(t).axes)
              if (a.kind == plan::AxisSharding::Kind::partial && !partial_ok(op.kind)) unsupported_split(op, config);
        check_kernel_split(call);
      }
      call.scratch = [this, r, &used, &op](int64_t elems) {
        int b = new_buffer(r, op.name + " (scratch)", DType::f32, elems, false);
        used.push_back(b);
        return ref(b);
      };
      std::string label = op.name + " (" + std::string(op_kind_name(op.kind)) + ")";
      std::string code = kernel_code(call);
      timing_ = {Timing::Kind::kernel, {o}, plan::shard_key(g_, op, config, static_cast<int64_t>(i))};
      if (!(call.map && fuse_into_previous(r, o, label, *call.map, used))) {
        emit(r, "// " + label + "\n" + code, used);
        if (call.map && op.outputs.size() == 1)
          last_map_[r] = PendingMap{static_cast<int>(out_.ranks[r].step.size()) - 1, label, *call.map,
                                    op.outputs[0], tensor_buf_[r][op.outputs[0]]};
        else
          last_map_[r].reset();
      }
    }
    timing_ = {};
    for (TensorId t : op.outputs)
      if (t != kNoTensor && is_partial(sharding(t))) pending_partial_.insert(t);
  }

  /** Fuses op `o`'s map into the map just emitted on rank r when it reads that map's result and nothing else reads
   *  it: the result is then never stored (its buffer stays unreferenced and takes no arena space). */
  bool fuse_into_previous(int r, OpId o, const std::string &label, const MapSpec &spec, const std::vector<int> &used) {
    std::optional<PendingMap> &prev = last_map_[r];
    std::vector<Instr> &step = out_.ranks[r].step;
    if (!prev || prev->instr != static_cast<int>(step.size()) - 1 || prev->spec.n != spec.n) return false;
    TensorId t = prev->tensor;
    if (readers_[t] != 1 || t == g_.loss || assigned_dst_[t] || assigned_src_[t] || is_partial(sharding(t)) ||
        std::find(g_.outputs.begin(), g_.outputs.end(), t) != g_.outputs.end())
      return false;
    const Op &op = g_.op(o);
    if (std::count(op.inputs.begin(), op.inputs.end(), t) != 1) return false;
    if (std::find(spec.ins.begin(), spec.ins.end(), ref(prev->buffer)) == spec.ins.end()) return false;
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
    for (TensorId t : std::vector<TensorId>(pending_partial_.begin(), pending_partial_.end())) resolve_partial(t, {});
    timing_ = {};
    // The loss, logged by rank 0.
    if (g_.loss != kNoTensor) {
      int b = tensor_buf_[0][g_.loss];
      if (b < 0) CLEAVE_USER_ERROR("codegen: rank 0 does not hold the loss \"", g_.tensor(g_.loss).name, "\"");
      emit(0, "rt::log_loss(step, " + ref(b) + ");", {b});
    }
    // Assigns: each holder of dst copies its shard of src (which must be the same box).
    for (const Assign &a : g_.assigns) {
      const plan::Sharding &ds = sharding(a.dst);
      for (size_t i = 0; i < ds.devices.size(); ++i) {
        int r = ds.devices[i];
        Box box = plan::shard_region(g_.tensor(a.dst).shape, ds, static_cast<int64_t>(i));
        int src = tensor_buf_[r][a.src];
        const Owned *have = nullptr;
        for (const auto &ow : owned_[a.src])
          if (ow.rank == r) have = &ow;
        if (src < 0 || !have || !box_contains(have->box, box))
          CLEAVE_USER_ERROR("codegen: the update of \"", g_.tensor(a.dst).name,
                            "\" is not held where the tensor lives (assign across shardings is not supported yet)");
        int dst = tensor_buf_[r][a.dst];
        int es = dtype_size(g_.tensor(a.dst).dtype);
        emit_copy(r, copy_code(src, have->box, dst, box, box, es), {src, dst}, std::max<int64_t>(box_volume(box), 1) * es);
      }
    }
  }

  /** Liveness over the step, then first-fit offsets (64-byte aligned) in buffer creation order. */
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
    std::vector<int> placed;
    int64_t peak = 0;
    for (int b = 0; b < static_cast<int>(prog.buffers.size()); ++b) {
      Buffer &buf = prog.buffers[b];
      if (buf.first < 0) continue;  // never referenced (a fused intermediate): no storage
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
  std::map<TensorId, std::vector<Owned>> owned_;
  std::vector<bool> assigned_dst_, assigned_src_;
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
  /** Number of (op, input slot) reads of each tensor. */
  std::vector<int> readers_;
  /** Partial tensors produced and not reduced yet. */
  std::set<TensorId> pending_partial_;
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
  plan::validate_plan(g, p);
  return Lowerer(g, p, need_values).run();
}

}  // namespace cleave::codegen
