#include "codegen/lower.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "codegen/kernels.h"
#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/validate.h"

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

Box intersect(const Box &a, const Box &b) {
  Box r(a.size());
  for (size_t d = 0; d < a.size(); ++d) r[d] = {std::max(a[d].begin, b[d].begin), std::min(a[d].end, b[d].end)};
  return r;
}

bool contains(const Box &outer, const Box &inner) {
  for (size_t d = 0; d < outer.size(); ++d)
    if (inner[d].begin < outer[d].begin || inner[d].end > outer[d].end) return false;
  return true;
}

std::vector<int64_t> starts_rel(const Box &b, const Box &origin) {
  std::vector<int64_t> s;
  for (size_t d = 0; d < b.size(); ++d) s.push_back(b[d].begin - origin[d].begin);
  return s;
}

std::string ref(int buffer) { return "$" + std::to_string(buffer) + "$"; }

/** A region_copy of box `part` (global coordinates) from a source buffer holding `src_box` to a destination holding
 *  `dst_box`. */
std::string copy_code(int src, const Box &src_box, int dst, const Box &dst_box, const Box &part, int elem_size) {
  if (part.empty()) return "std::memcpy(" + ref(dst) + ", " + ref(src) + ", " + std::to_string(elem_size) + ");";
  return "rt::region_copy({rt::Box{" + ref(src) + ", " + dims_literal(box_shape(src_box)) + ", " +
         dims_literal(starts_rel(part, src_box)) + ", " + dims_literal(box_shape(part)) + ", " +
         dims_literal(starts_rel(part, dst_box)) + "}}, " + ref(dst) + ", " + dims_literal(box_shape(dst_box)) + ", " +
         std::to_string(elem_size) + ");";
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
  Lowerer(const Graph &g, const plan::Plan &p) : g_(g), p_(p) {
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
          emit(r, std::string("rt::npy_read_samples(npy_") + std::to_string(prog.data.size() - 1) + ", (step - 1) * " +
                      std::to_string(out_.batch) + " + " + std::to_string(box[0].begin) + ", " +
                      std::to_string(box[0].size()) + ", " + ref(b) + ");",
               {b});
        } else {
          if (tensor.data.empty())
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
    out_.ranks[r].step.push_back({std::move(code), std::move(buffers)});
  }

  int group_id(const std::vector<int> &ranks) {
    for (size_t i = 0; i < out_.groups.size(); ++i)
      if (out_.groups[i] == ranks) return static_cast<int>(i);
    out_.groups.push_back(ranks);
    int id = static_cast<int>(out_.groups.size()) - 1;
    for (int r : ranks) out_.ranks[r].groups.push_back(id);
    return id;
  }

  /** All-reduces a just-produced partial tensor over each partial mesh axis. */
  void reduce_partial(TensorId t) {
    const plan::Sharding &s = sharding(t);
    for (size_t axis = 0; axis < s.axes.size(); ++axis) {
      if (s.axes[axis].kind != plan::AxisSharding::Kind::partial) continue;
      // Groups: devices whose coordinates differ only along `axis`, ordered by that coordinate.
      std::map<std::vector<int64_t>, std::vector<int>> groups;
      for (size_t i = 0; i < s.devices.size(); ++i) {
        auto c = plan::mesh_coords(s.mesh, static_cast<int64_t>(i));
        c[axis] = 0;
        groups[c].push_back(s.devices[i]);
      }
      for (const auto &[key, members] : groups) {
        if (members.size() < 2) continue;
        int gid = group_id(members);
        for (int r : members) {
          int b = tensor_buf_[r][t];
          emit(r,
               "rt::all_reduce_sum(G" + std::to_string(gid) + ", " + ref(b) + ", " + ref(b) + ", " +
                   std::to_string(out_.ranks[r].buffers[b].elems) + ");",
               {b});
        }
      }
    }
  }

  void lower_op(OpId o) {
    const Op &op = g_.op(o);
    auto cit = config_.find(o);
    CLEAVE_CHECK(cit != config_.end(), "op ", op.name, " has no config");
    const plan::ParallelConfig &config = cit->second;
    bool split = std::any_of(config.vars.begin(), config.vars.end(), [](const auto &v) { return !v.empty(); });

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
    std::map<int, std::vector<int>> in_bufs;  // rank -> buffer per input slot (-1 absent)
    for (const auto &[r, need] : needs) {
      std::vector<int> bufs(op.inputs.size(), -1);
      for (size_t s = 0; s < op.inputs.size(); ++s) {
        TensorId t = op.inputs[s];
        if (t == kNoTensor) continue;
        const Tensor &tensor = g_.tensor(t);
        if (!need.in[s]) {
          if (!split) CLEAVE_CHECK(false, "op ", op.name, " reads nothing of input ", s);
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
        if (mine && contains(mine->box, want)) {
          unpacks[r].push_back(copy_code(tensor_buf_[r][t], mine->box, dst, want, want, es));
          unpack_bufs[r].insert(unpack_bufs[r].end(), {tensor_buf_[r][t], dst});
          continue;
        }
        // One holder per distinct owned block: ourselves if we hold it, else the first in group order.
        std::vector<const Owned *> chosen;
        for (const auto &ow : owners) {
          if (box_empty(intersect(ow.box, want)) && !want.empty()) continue;
          auto same = std::find_if(chosen.begin(), chosen.end(), [&](const Owned *c) { return c->box == ow.box; });
          if (same == chosen.end())
            chosen.push_back(&ow);
          else if (ow.rank == r)
            *same = &ow;
        }
        for (const Owned *ow : chosen) {
          Box part = want.empty() ? Box{} : intersect(ow->box, want);
          if (ow->rank == r) {
            unpacks[r].push_back(copy_code(tensor_buf_[r][t], ow->box, dst, want, part, es));
            unpack_bufs[r].insert(unpack_bufs[r].end(), {tensor_buf_[r][t], dst});
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
        }
      }
      in_bufs[r] = bufs;
    }
    for (size_t r = 0; r < out_.ranks.size(); ++r) {
      int rr = static_cast<int>(r);
      for (size_t i = 0; i < packs[r].size(); ++i) emit(rr, packs[r][i], {pack_bufs[r][2 * i], pack_bufs[r][2 * i + 1]});
      if (!transfers[r].empty()) {
        std::string code = "rt::send_recv({";
        for (size_t i = 0; i < transfers[r].size(); ++i) code += (i ? ", " : "") + transfers[r][i];
        emit(rr, code + "});", transfer_bufs[r]);
      }
      for (size_t i = 0; i < unpacks[r].size(); ++i)
        emit(rr, unpacks[r][i], {unpack_bufs[r][2 * i], unpack_bufs[r][2 * i + 1]});
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
      std::string code = "// " + op.name + " (" + std::string(op_kind_name(op.kind)) + ")\n" + kernel_code(call);
      emit(r, code, used);
    }
    for (TensorId t : op.outputs)
      if (t != kNoTensor) reduce_partial(t);
  }

  void finish_step() {
    // The loss, logged by rank 0.
    if (g_.loss != kNoTensor) {
      int b = tensor_buf_[0][g_.loss];
      if (b < 0) CLEAVE_USER_ERROR("codegen: rank 0 does not hold the loss \"", g_.tensor(g_.loss).name, "\"");
      emit(0, "rt::log_loss(step, " + ref(b) + "[0]);", {b});
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
        if (src < 0 || !have || !contains(have->box, box))
          CLEAVE_USER_ERROR("codegen: the update of \"", g_.tensor(a.dst).name,
                            "\" is not held where the tensor lives (assign across shardings is not supported yet)");
        int dst = tensor_buf_[r][a.dst];
        emit(r, copy_code(src, have->box, dst, box, box, dtype_size(g_.tensor(a.dst).dtype)), {src, dst});
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
      if (buf.persistent || buf.first < 0) {
        buf.first = 0;
        buf.last = end;
      }
    }
    std::vector<int> placed;
    int64_t peak = 0;
    for (int b = 0; b < static_cast<int>(prog.buffers.size()); ++b) {
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
  Lowered out_;
  std::map<TensorId, plan::Sharding> sharding_;
  std::map<OpId, plan::ParallelConfig> config_;
  std::vector<std::vector<int>> tensor_buf_;  // [rank][tensor] -> buffer
  std::map<TensorId, std::vector<Owned>> owned_;
  std::vector<bool> assigned_dst_, assigned_src_;
  /** (rank, tensor, needed box) -> the buffer it was assembled into this step. */
  std::map<std::tuple<int, TensorId, std::string>, int> assembled_;
};

}  // namespace

Lowered lower(const Graph &g, const plan::Plan &p) {
  plan::validate_plan(g, p);
  return Lowerer(g, p).run();
}

}  // namespace cleave::codegen
