// derive_communication (communication.h): the one derivation of a step's communication, replayed over ownership
// boxes. Its steps are what codegen/lower.cpp lowers; its events, local statements and buffers what the cost model
// and the simulator price.
#include "planner/cost/communication.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/plan/region.h"

namespace cleave::plan {

std::string_view comm_kind_name(CommEvent::Kind k) {
  switch (k) {
    case CommEvent::Kind::all_reduce: return "all_reduce";
    case CommEvent::Kind::reduce_scatter: return "reduce_scatter";
    case CommEvent::Kind::all_gather: return "all_gather";
    case CommEvent::Kind::all_to_all: return "all_to_all";
    case CommEvent::Kind::send_recv: return "send_recv";
    case CommEvent::Kind::sync: return "sync";
  }
  return "?";
}

namespace {

bool is_partial(const Sharding &s) {
  return std::any_of(s.axes.begin(), s.axes.end(), [](const auto &a) { return a.kind == AxisSharding::Kind::partial; });
}

/** An event as codegen emits it before op `op` (kNoOp: at the end of the step) for tensor `t` (kNoTensor: a send/recv
 *  or sync, counted in f32). */
CommEvent make_event(const Graph &g, CommEvent::Kind kind, OpId op, TensorId t, std::vector<int> group, int64_t count) {
  CommEvent e;
  e.kind = kind;
  e.op = op;
  e.tensor = t;
  e.group = std::move(group);
  e.count = count;
  e.elem_bytes = t == kNoTensor ? 4 : dtype_size(g.tensor(t).dtype);
  return e;
}

/** Appends op `o`'s sync exchanges (sync_exchanges) as events. */
void append_sync_events(const Graph &g, OpId o, const std::vector<describe::Description> &descs,
                        const ParallelConfig &config, std::vector<CommEvent> &events) {
  for (const SyncExchange &x : sync_exchanges(g, g.op(o), descs, config))
    events.push_back(make_event(g, CommEvent::Kind::sync, o, kNoTensor, x.group, x.count));
}

constexpr size_t kNone = static_cast<size_t>(-1);
/** Each op has two program positions: its communication (and the copies that assemble its inputs), then its kernel,
 *  so a buffer that only communication touches does not overlap the op's outputs, as in codegen's instruction order. */
constexpr int kComm = 0, kKernel = 1;

class Replay {
 public:
  /** With `pieces`: only the tensors flagged in `only` are replayed (all when it is null), and what they emit goes
   *  to pieces[t] (CommPiece) instead of the result; sync exchanges are left to segment_communication. */
  Replay(const Graph &g, const Plan &p, CommCache *cache, const std::vector<char> *only = nullptr,
         std::vector<std::vector<CommPiece>> *pieces = nullptr)
      : g_(g), cache_(cache), only_(only), pieces_(pieces) {
    sharding_.resize(static_cast<size_t>(g.num_tensors()));
    config_.resize(static_cast<size_t>(g.num_ops()));
    for (const auto &t : p.tensors) sharding_[*g.find_tensor(t.name)] = &t.sharding;
    for (const auto &o : p.ops) config_[*g.find_op(o.name)] = &o.config;
    owned_.resize(static_cast<size_t>(g.num_tensors()));
    in_place_.assign(static_cast<size_t>(g.num_tensors()), false);
    for (const Assign &a : g.assigns) {
      const Sharding *s = sharding_[static_cast<size_t>(a.src)], *d = sharding_[static_cast<size_t>(a.dst)];
      in_place_[static_cast<size_t>(a.src)] = s && d && update_writes_in_place(g, a, *s, *d);
    }
  }

  /** A replay of tensor `t` alone, held as `from`, that records its steps (resplit_steps). */
  Replay(const Graph &g, TensorId t, const Sharding &from, std::vector<CommStep> *steps) : g_(g), steps_(steps) {
    sharding_.resize(static_cast<size_t>(t) + 1);  // only t is replayed
    owned_.resize(static_cast<size_t>(t) + 1);
    sharding_[t] = &from;
    for (size_t i = 0; i < from.devices.size(); ++i)
      owned_[t].push_back({from.devices[i], shard_region(g.tensor(t).shape, from, static_cast<int64_t>(i)), kNone});
  }

  /** [lower_op] for one input slot read as `wants`, of the tensor replayed alone. */
  void resplit(TensorId t, const std::map<int, Box> &wants) {
    if (is_partial(*sharding_[t])) resolve_partial(t, wants);
    collective_inputs(t, wants);
    CommEvent sr = event(CommEvent::Kind::send_recv, kNoTensor, {}, 0);
    for (const auto &[r, want] : wants) fetch(t, 0, r, want, sr);
  }

  Communication run() {
    // [run] sources are owned where their sharding puts them.
    if (pieces_)
      for (TensorId t = 0; t < g_.num_tensors(); ++t)
        if (replays(t)) (*pieces_)[static_cast<size_t>(t)].clear();
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      if (g_.tensor(t).producer != kNoOp || !replays(t)) continue;
      place(t, CommPiece::At::data, -1, -1);
      const Sharding &s = *sharding_[t];
      const Tensor &tensor = g_.tensor(t);
      bool data = is_data(tensor);
      for (size_t i = 0; i < s.devices.size(); ++i) {
        Box box = shard_region(tensor.shape, s, static_cast<int64_t>(i));
        size_t buf = data ? buffer(s.devices[i], bytes(t, std::max<int64_t>(box_volume(box), 1))) : kNone;
        owned_[t].push_back({s.devices[i], box, buf});
        if (data)
          emit({LocalStatement::Kind::data, s.devices[i], kNoOp, false,
                bytes(t, std::max<int64_t>(box_volume(box), 1)),
                box.empty() ? 1 : box[static_cast<size_t>(tensor.sample_axis)].size()});
      }
    }
    for (OpId o = 0; o < g_.num_ops(); ++o) op(o);
    // [finish_step] partial tensors nobody read are all-reduced, in tensor order.
    at_ = g_.num_ops();
    for (TensorId t : std::vector<TensorId>(pending_.begin(), pending_.end())) {
      place(t, CommPiece::At::end, -1, -1);
      resolve_partial(t, {});
    }
    // [finish_step] every rank holding the loss hands it to the log (rank 0 prints it); each holder of an assign's
    // destination copies the source's shard.
    if (g_.loss != kNoTensor)
      for (const Owned &ow : owned_[g_.loss]) use(owned_by(g_.loss, ow.rank));
    for (size_t k = 0; k < g_.assigns.size(); ++k) {
      const Assign &a = g_.assigns[k];
      if (!replays(a.dst)) continue;
      place(a.dst, CommPiece::At::end, static_cast<int>(k), -1);
      const Sharding &ds = *sharding_[a.dst];
      for (size_t i = 0; i < ds.devices.size(); ++i) {
        int r = ds.devices[i];
        const Owned *have = nullptr;
        for (const auto &ow : owned_[a.src])
          if (ow.rank == r) have = &ow;
        use(have);
        Box box = shard_region(g_.tensor(a.dst).shape, ds, static_cast<int64_t>(i));
        // An optimizer update of the same sharding writes its destination in place: no copy.
        bool in_place = written_in_place(a.src);
        if (steps_) {
          CommStep &st = step(CommStep::Kind::assign, a.dst);
          st.slot = static_cast<int>(k);
          st.rank = r;
          if (have) st.parts.push_back({r, have->box, box});
          st.whole = std::move(box);
          if (!in_place) copy(r, true, bytes(a.dst, std::max<int64_t>(box_volume(st.whole), 1)));
          continue;
        }
        if (!in_place) copy(r, true, bytes(a.dst, std::max<int64_t>(box_volume(box), 1)));
      }
    }
    return std::move(out_);
  }

 private:
  /** Whether `t` is an optimizer update's new value written in place into its assign's destination. */
  bool written_in_place(TensorId t) const {
    return static_cast<size_t>(t) < in_place_.size() && in_place_[static_cast<size_t>(t)];
  }

  struct Owned {
    int rank;
    Box box;
    /** Its buffer in out_.buffers; kNone for persistent state. */
    size_t buf;
  };

  bool replays(TensorId t) const { return !only_ || (*only_)[static_cast<size_t>(t)]; }

 public:
  /** Also records the steps (a whole replay only: no `only`, no pieces). */
  void record_steps(std::vector<CommStep> *steps) {
    CLEAVE_CHECK(!only_ && !pieces_, "derive_communication: steps are recorded by a whole replay only");
    steps_ = steps;
  }

 private:
  /** A new step of `kind` for tensor `t` at the current op (with steps_). */
  CommStep &step(CommStep::Kind kind, TensorId t) {
    CommStep &st = steps_->emplace_back();
    st.kind = kind;
    st.op = at_ < g_.num_ops() ? at_ : kNoOp;
    st.tensor = t;
    return st;
  }

  /** Where what is emitted next belongs (CommPiece), with pieces_. */
  void place(TensorId t, CommPiece::At where, int slot, int rank) {
    piece_ = {t, where, slot, rank};
  }

  /** The piece of pieces_ the current statements go to: the last one of its tensor, or a new one. */
  CommPiece &piece() {
    auto &list = (*pieces_)[static_cast<size_t>(piece_.tensor)];
    OpId op = piece_.at == CommPiece::At::input ? at_ : kNoOp;
    if (list.empty() || list.back().at != piece_.at || list.back().op != op || list.back().slot != piece_.slot ||
        list.back().rank != piece_.rank)
      list.push_back({piece_.at, op, piece_.slot, piece_.rank, {}, {}, {}});
    return list.back();
  }

  void emit(CommEvent e) {
    if (pieces_)
      piece().events.push_back(std::move(e));
    else
      out_.events.push_back(std::move(e));
  }
  void emit(const LocalStatement &l) {
    if (pieces_)
      piece().local.push_back(l);
    else
      out_.local.push_back(l);
  }
  /** A transfer of the current op's send/recv `sr`. */
  void emit(CommEvent &sr, const CommEvent::Transfer &transfer) {
    if (pieces_)
      piece().transfers.push_back(transfer);
    else
      sr.transfers.push_back(transfer);
  }

  /** The shard's buffer is used at this position. */
  void use(const Owned *ow, int phase = kComm) {
    if (ow && ow->buf != kNone) out_.buffers[ow->buf].until = std::max(out_.buffers[ow->buf].until, pos(phase));
  }

  /** Program position of the current op's communication (kComm) or kernel (kKernel). */
  int pos(int phase) const { return 2 * at_ + phase; }

  const Owned *owned_by(TensorId t, int r) const {
    for (const auto &ow : owned_[t])
      if (ow.rank == r) return &ow;
    return nullptr;
  }

  int64_t bytes(TensorId t, int64_t n) const { return n * dtype_size(g_.tensor(t).dtype); }

  /** A region copy on rank r at the current op, before or after its communication. */
  void copy(int r, bool after, int64_t n) {
    emit({LocalStatement::Kind::copy, r, at_ < g_.num_ops() ? at_ : kNoOp, after, n});
  }

  /** A buffer needed at this position only; returns its index. */
  size_t buffer(int rank, int64_t bytes, int phase = kComm) {
    out_.buffers.push_back({rank, pos(phase), pos(phase), bytes});
    return out_.buffers.size() - 1;
  }

  /** Records an assembled box (rank, tensor, box) held in buffer `index`; false if it was assembled before, which
   *  extends that buffer's life to this position instead. */
  bool assemble(int r, TensorId t, const std::string &box, size_t index) {
    auto [it, fresh] = assembled_.emplace(std::make_tuple(r, t, box), index);
    out_.buffers[it->second].until = pos(kKernel);  // the kernel reads it
    return fresh;
  }

  bool assembled(int r, TensorId t, const std::string &box) {
    auto it = assembled_.find({r, t, box});
    if (it == assembled_.end()) return false;
    out_.buffers[it->second].until = pos(kKernel);
    return true;
  }

  CommEvent event(CommEvent::Kind kind, TensorId t, std::vector<int> group, int64_t count) {
    return make_event(g_, kind, at_ < g_.num_ops() ? at_ : kNoOp, t, std::move(group), count);
  }

  // [resolve_partial] one collective per group of ranks differing only along the partial axes.
  void resolve_partial(TensorId t, const std::map<int, Box> &wants) {
    pending_.erase(t);
    const Sharding &s = *sharding_[t];
    std::vector<size_t> axes;
    for (size_t a = 0; a < s.axes.size(); ++a)
      if (s.axes[a].kind == AxisSharding::Kind::partial) axes.push_back(a);
    for (const auto &members : axes_groups(s.devices, s.mesh, axes)) {
      if (members.size() < 2) continue;
      const Box whole = owned_by(t, members[0])->box;
      std::vector<Box> blocks;
      for (int r : members)
        if (auto w = wants.find(r); w != wants.end()) blocks.push_back(w->second);
      if (g_.tensor(t).dtype == DType::f32 && blocks.size() == members.size() && tiles(blocks, whole)) {
        emit(event(CommEvent::Kind::reduce_scatter, t, members, box_volume(blocks[0])));
        bool in_order = concatenates(blocks, whole);
        if (steps_) {
          CommStep &st = step(CommStep::Kind::reduce_scatter, t);
          st.group = members;
          st.whole = whole;
          st.blocks = blocks;
          st.in_order = in_order;
        }
        for (size_t m = 0; m < members.size(); ++m) {
          int r = members[m];
          use(owned_by(t, r));
          if (!in_order) buffer(r, bytes(t, box_volume(whole)));
          if (!in_order)  // [reduce_scatter] each block copied into its place in the send buffer
            for (size_t k = 0; k < members.size(); ++k) copy(r, false, bytes(t, box_volume(blocks[0])));
          size_t mine = buffer(r, bytes(t, std::max<int64_t>(box_volume(blocks[m]), 1)));
          for (auto &ow : owned_[t])
            if (ow.rank == r) ow.box = blocks[m], ow.buf = mine;
        }
        continue;
      }
      emit(event(CommEvent::Kind::all_reduce, t, members, std::max<int64_t>(box_volume(owned_by(t, members[0])->box), 1)));
      if (steps_) {
        CommStep &st = step(CommStep::Kind::all_reduce, t);
        st.group = members;
        st.whole = owned_by(t, members[0])->box;
      }
      for (int r : members) use(owned_by(t, r));
    }
  }

  // [collective_inputs]
  void collective_inputs(TensorId t, const std::map<int, Box> &wants) {
    if (g_.tensor(t).dtype != DType::f32) return;
    std::vector<int> ranks;
    for (const auto &entry : wants) {
      int r = entry.first;  // not a structured binding: lambdas below capture it (clang 14 refuses those)
      const Box &want = entry.second;
      const Owned *mine = owned_by(t, r);
      if (mine && box_contains(mine->box, want)) continue;
      if (assembled(r, t, box_str(want))) continue;
      if (std::count_if(owned_[t].begin(), owned_[t].end(), [&](const Owned &ow) { return ow.rank == r; }) != 1)
        continue;
      ranks.push_back(r);
    }
    std::map<std::string, std::vector<int>> by_box;
    for (int r : ranks) by_box[box_str(wants.at(r))].push_back(r);
    std::set<int> served;
    for (const auto &[key, members] : by_box) {
      const Box &want = wants.at(members[0]);
      std::vector<Box> blocks;
      for (int r : members) blocks.push_back(owned_by(t, r)->box);
      if (!tiles(blocks, want)) continue;
      emit(event(CommEvent::Kind::all_gather, t, members, box_volume(blocks[0])));
      bool in_order = concatenates(blocks, want);
      if (steps_) {
        CommStep &st = step(CommStep::Kind::all_gather, t);
        st.group = members;
        st.whole = want;
        st.blocks = blocks;
        st.in_order = in_order;
      }
      for (int r : members) {
        use(owned_by(t, r));
        assemble(r, t, key, buffer(r, bytes(t, box_volume(want))));
        if (!in_order) buffer(r, bytes(t, box_volume(want)));
        if (!in_order)  // each gathered block copied into its place in the assembled box
          for (size_t k = 0; k < members.size(); ++k) copy(r, true, bytes(t, box_volume(blocks[0])));
        served.insert(r);
      }
    }
    std::vector<int> rest;
    std::vector<Box> owned, wanted;
    for (int r : ranks)
      if (!served.count(r)) {
        rest.push_back(r);
        owned.push_back(owned_by(t, r)->box);
        wanted.push_back(wants.at(r));
      }
    if (!all_to_all_pattern(owned, wanted)) return;
    int64_t count = box_volume(box_intersect(owned[0], wanted[0]));
    emit(event(CommEvent::Kind::all_to_all, t, rest, count));
    if (steps_) {
      CommStep &st = step(CommStep::Kind::all_to_all, t);
      st.group = rest;
      st.blocks = owned;
      st.wanted = wanted;
    }
    int64_t n = static_cast<int64_t>(rest.size());
    for (size_t i = 0; i < rest.size(); ++i) {
      use(owned_by(t, rest[i]));
      buffer(rest[i], 2 * bytes(t, n * count));
      for (int64_t j = 0; j < n; ++j) copy(rest[i], false, bytes(t, count));  // packing each peer's part
      for (int64_t j = 0; j < n; ++j) copy(rest[i], true, bytes(t, count));   // unpacking each peer's part
      assemble(rest[i], t, box_str(wanted[i]), buffer(rest[i], bytes(t, box_volume(wanted[i]))));
    }
  }

  // [fetch] rank r's box `want` of input slot s of t at the current op: its shard, a box assembled earlier, a cut of its
  // shard, or assembled from one part per distinct owned block (its own if it holds that block, else the first owner's),
  // the parts of other ranks sent by the op's grouped send/recv `sr`.
  void fetch(TensorId t, int s, int r, const Box &want, CommEvent &sr) {
    const Owned *mine = nullptr;
    for (const auto &ow : owned_[t])
      if (ow.rank == r) mine = &ow;
    CommStep *st = nullptr;
    if (steps_) {
      st = &step(CommStep::Kind::fetch, t);
      st->slot = s;
      st->rank = r;
      st->whole = want;
    }
    if (mine && mine->box == want) {
      if (st) st->source = CommStep::Source::shard;
      use(mine, kKernel);
      return;
    }
    if (assembled(r, t, box_str(want))) {
      if (st) st->source = CommStep::Source::assembled;
      return;
    }
    assemble(r, t, box_str(want), buffer(r, bytes(t, std::max<int64_t>(box_volume(want), 1))));
    if (mine && box_contains(mine->box, want)) {
      if (st) {
        st->source = CommStep::Source::cut;
        st->parts.push_back({r, mine->box, want});
      }
      use(mine);
      copy(r, true, bytes(t, std::max<int64_t>(box_volume(want), 1)));
      return;
    }
    std::vector<const Owned *> chosen;
    for (const auto &ow : owned_[t]) {
      if (box_empty(box_intersect(ow.box, want)) && !want.empty()) continue;
      auto same = std::find_if(chosen.begin(), chosen.end(), [&](const Owned *c) { return c->box == ow.box; });
      if (same == chosen.end())
        chosen.push_back(&ow);
      else if (ow.rank == r)
        *same = &ow;
    }
    for (const Owned *ow : chosen) {
      use(ow);
      Box part = want.empty() ? Box{} : box_intersect(ow->box, want);
      int64_t n = box_volume(part);
      if (st) st->parts.push_back({ow->rank, ow->box, part});
      if (ow->rank == r) {
        copy(r, true, bytes(t, std::max<int64_t>(n, 1)));
        continue;
      }
      if (part != ow->box) {
        buffer(ow->rank, bytes(t, n));
        copy(ow->rank, false, bytes(t, std::max<int64_t>(n, 1)));
      }
      if (part != want) {
        buffer(r, bytes(t, n));
        copy(r, true, bytes(t, std::max<int64_t>(n, 1)));
      }
      emit(sr, {ow->rank, r, bytes(t, n)});
    }
  }

  // [lower_op]
  /** Keeps op `o`'s current cache entry (if whole) among its kept ones and makes its kept entry for `config`, if
   *  any, current; whether there was one. */
  bool take_kept(size_t o, const ParallelConfig &config) {
    std::vector<CommCache::Kept> &kept = cache_->kept[o];
    if (!cache_->config[o].devices.empty()) {
      if (kept.size() == CommCache::kKeptPerOp) kept.erase(kept.begin());
      kept.push_back({std::move(cache_->config[o]), std::move(cache_->needs[o]), std::move(cache_->work[o])});
      cache_->config[o] = {};
    }
    auto it = std::find_if(kept.begin(), kept.end(), [&](const CommCache::Kept &k) { return k.config == config; });
    if (it == kept.end()) return false;
    cache_->config[o] = std::move(it->config);
    cache_->needs[o] = std::move(it->needs);
    cache_->work[o] = std::move(it->work);
    kept.erase(it);
    return true;
  }

  void op(OpId o) {
    at_ = o;
    const Op &op = g_.op(o);
    if (only_ && std::none_of(op.inputs.begin(), op.inputs.end(), [&](TensorId t) { return t != kNoTensor && replays(t); }) &&
        std::none_of(op.outputs.begin(), op.outputs.end(), [&](TensorId t) { return t != kNoTensor && replays(t); }))
      return;
    const ParallelConfig &config = *config_[o];
    std::vector<describe::Description> described;
    std::vector<std::vector<std::optional<Box>>> regions;
    const std::vector<describe::Description> *descs_ptr = &described;
    const std::vector<std::vector<std::optional<Box>>> *regions_ptr = &regions;
    if (cache_) {
      size_t ops = static_cast<size_t>(g_.num_ops());
      if (cache_->descs.size() != ops || cache_->config.size() != ops || cache_->needs.size() != ops ||
          cache_->work.size() != ops) {
        cache_->descs.assign(ops, {});
        cache_->config.assign(ops, {});
        cache_->needs.assign(ops, {});
        cache_->work.assign(ops, {});
      }
      if (cache_->kept.size() != ops) cache_->kept.assign(ops, {});
      if (cache_->descs[o].empty() || cache_->config[o] != config) {
        if (cache_->descs[o].empty()) cache_->descs[o] = describe::describe(g_, op);
        if (!take_kept(o, config)) {
          cache_->config[o] = {};  // until needs[o] is whole (input_regions may throw)
          cache_->needs[o].clear();
          cache_->work[o].clear();
          for (size_t i = 0; i < config.devices.size(); ++i)
            cache_->needs[o].push_back(op_input_regions(op, cache_->descs[o], config, static_cast<int64_t>(i)));
          cache_->config[o] = config;
        }
      }
      descs_ptr = &cache_->descs[o];
      regions_ptr = &cache_->needs[o];
    } else {
      described = describe::describe(g_, op);
      for (size_t i = 0; i < config.devices.size(); ++i)
        regions.push_back(op_input_regions(op, described, config, static_cast<int64_t>(i)));
    }
    const std::vector<describe::Description> &descs = *descs_ptr;
    std::map<int, std::vector<std::optional<Box>>> needs;
    for (size_t i = 0; i < config.devices.size(); ++i) needs[config.devices[i]] = (*regions_ptr)[i];
    for (size_t s = 0; s < op.inputs.size(); ++s) {
      TensorId t = op.inputs[s];
      if (t == kNoTensor || !replays(t)) continue;
      place(t, CommPiece::At::input, static_cast<int>(s), -1);
      std::map<int, Box> wants;
      for (const auto &[r, in] : needs)
        if (in[s]) wants[r] = *in[s];
      if (pending_.count(t)) resolve_partial(t, wants);
      collective_inputs(t, wants);
    }
    // The generic assembly: one grouped send/recv for the whole op.
    CommEvent sr = event(CommEvent::Kind::send_recv, kNoTensor, {}, 0);
    for (const auto &[r, in] : needs) {
      for (size_t s = 0; s < op.inputs.size(); ++s) {
        TensorId t = op.inputs[s];
        if (t == kNoTensor || !in[s] || !replays(t)) continue;  // (codegen refuses the plan if a split alone makes it unread)
        place(t, CommPiece::At::input, static_cast<int>(s), r);
        fetch(t, static_cast<int>(s), r, *in[s], sr);
      }
    }
    if (!sr.transfers.empty()) out_.events.push_back(std::move(sr));
    if (!pieces_) append_sync_events(g_, o, descs, config, out_.events);
    for (size_t i = 0; i < config.devices.size(); ++i) {
      int r = config.devices[i];
      for (TensorId t : op.outputs) {
        if (t == kNoTensor || !replays(t)) continue;
        Box box = shard_region(g_.tensor(t).shape, *sharding_[t], static_cast<int64_t>(i));
        // An update written in place into its parameter (or state) takes no buffer of its own.
        owned_[t].push_back(
            {r, box, written_in_place(t) ? kNone : buffer(r, bytes(t, std::max<int64_t>(box_volume(box), 1)), kKernel)});
      }
    }
    for (TensorId t : op.outputs)
      if (t != kNoTensor && replays(t) && is_partial(*sharding_[t])) pending_.insert(t);
  }

  const Graph &g_;
  CommCache *cache_ = nullptr;
  const std::vector<char> *only_ = nullptr;
  std::vector<std::vector<CommPiece>> *pieces_ = nullptr;
  std::vector<CommStep> *steps_ = nullptr;
  struct Place {
    TensorId tensor = kNoTensor;
    CommPiece::At at = CommPiece::At::input;
    int slot = -1, rank = -1;
  } piece_;
  std::vector<const Sharding *> sharding_;
  std::vector<const ParallelConfig *> config_;
  std::vector<std::vector<Owned>> owned_;
  /** Per tensor: an optimizer update's new value written in place into its assign's destination
   *  (update_writes_in_place; empty for a replay of one tensor alone). */
  std::vector<bool> in_place_;
  /** (rank, tensor, box) assembled this step -> its buffer in out_.buffers. */
  std::map<std::tuple<int, TensorId, std::string>, size_t> assembled_;
  std::set<TensorId> pending_;
  int at_ = 0;
  Communication out_;
};

}  // namespace

/** Kernels that split a synced var exchange statistics among the ranks that differ only along the synced axes
 *  (codegen/kernels_norm.cpp: sync_comm): BatchNorm its per-channel sum and sum of squares, a loss its total. */
std::vector<SyncExchange> sync_exchanges(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                         const ParallelConfig &config) {
  std::vector<size_t> axes;
  for (size_t a = 0; a < config.vars.size(); ++a) {
    if (config.vars[a].empty() || config.mesh[a] < 2) continue;
    for (size_t k = 0; k < descs.size(); ++k) {
      int v = op.output(k) == kNoTensor ? -1 : descs[k].var(config.vars[a]);
      if (v >= 0 && descs[k].vars[static_cast<size_t>(v)].synced) {
        axes.push_back(a);
        break;
      }
    }
  }
  if (axes.empty()) return {};
  std::map<std::vector<int64_t>, std::vector<int>> groups;
  for (size_t i = 0; i < config.devices.size(); ++i) {
    std::vector<int64_t> c = mesh_coords(config.mesh, static_cast<int64_t>(i));
    for (size_t a : axes) c[a] = 0;
    groups[c].push_back(config.devices[i]);
  }
  // The runtime's synced kernels (runtime/cpu/norm.cpp, loss.cpp): BatchNorm forward all-reduces C means then 2C
  // sums, its gradient 2C sums; a loss its weight total (and, forward, the loss itself).
  std::vector<int64_t> counts{1};
  switch (op.kind) {
    case OpKind::BatchNormalization: {
      int64_t c = g.tensor(op.inputs[0]).shape.at(1);
      counts = {c, 2 * c};
      break;
    }
    case OpKind::BatchNormalizationGrad: counts = {2 * g.tensor(op.inputs[1]).shape.at(1)}; break;
    case OpKind::SoftmaxCrossEntropyLoss:
    case OpKind::NegativeLogLikelihoodLoss: counts = {1, 1}; break;
    default: break;
  }
  std::vector<SyncExchange> out;
  for (auto &[key, members] : groups)
    for (int64_t count : counts) out.push_back({members, count});
  return out;
}

Communication derive_communication(const Graph &g, const Plan &p, CommCache *cache) {
  return Replay(g, p, cache).run();
}

Communication derive_communication(const Graph &g, const Plan &p, std::vector<CommStep> &steps) {
  steps.clear();
  Replay replay(g, p, nullptr);
  replay.record_steps(&steps);
  return replay.run();
}

std::vector<CommStep> resplit_steps(const Graph &g, TensorId t, const Sharding &from, const std::map<int, Box> &wants) {
  std::vector<CommStep> steps;
  Replay(g, t, from, &steps).resplit(t, wants);
  return steps;
}

void derive_pieces(const Graph &g, const Plan &p, const std::vector<char> &tensors,
                   std::vector<std::vector<CommPiece>> &pieces, CommCache *cache) {
  CLEAVE_CHECK(tensors.size() == static_cast<size_t>(g.num_tensors()) && pieces.size() == tensors.size(),
               "derive_pieces: one flag and one list per tensor");
  Replay(g, p, cache, &tensors, &pieces).run();
}

namespace {

/** The pieces of `list` at (at, op): a range, since a tensor's pieces come in program order. */
std::pair<const CommPiece *, const CommPiece *> pieces_at(const std::vector<CommPiece> &list, CommPiece::At at,
                                                           OpId op) {
  auto key = [](const CommPiece &c) { return std::make_pair(static_cast<int>(c.at), c.op); };
  std::pair<int, OpId> want{static_cast<int>(at), op};
  auto lo = std::lower_bound(list.begin(), list.end(), want, [&](const CommPiece &c, const auto &w) { return key(c) < w; });
  auto hi = std::upper_bound(lo, list.end(), want, [&](const auto &w, const CommPiece &c) { return w < key(c); });
  return {list.data() + (lo - list.begin()), list.data() + (hi - list.begin())};
}

}  // namespace

void segment_communication(const Graph &g, int s, const ParallelConfig *config,
                           const std::vector<describe::Description> &descs,
                           const std::vector<std::vector<CommPiece>> &pieces, std::vector<CommEvent> &events,
                           std::vector<LocalStatement> &local) {
  events.clear();
  local.clear();
  auto add = [&](const CommPiece &c) {
    events.insert(events.end(), c.events.begin(), c.events.end());
    local.insert(local.end(), c.local.begin(), c.local.end());
  };
  if (s == g.num_ops()) {
    // [finish_step] partial tensors nobody read, in tensor order; then the assigns' copies, in assign order.
    for (const std::vector<CommPiece> &list : pieces) {
      auto [lo, hi] = pieces_at(list, CommPiece::At::end, kNoOp);
      for (const CommPiece *c = lo; c != hi; ++c)
        if (c->slot < 0) add(*c);
    }
    for (size_t k = 0; k < g.assigns.size(); ++k) {
      auto [lo, hi] = pieces_at(pieces[static_cast<size_t>(g.assigns[k].dst)], CommPiece::At::end, kNoOp);
      for (const CommPiece *c = lo; c != hi; ++c)
        if (c->slot == static_cast<int>(k)) add(*c);
    }
    return;
  }
  const Op &op = g.op(s);
  if (s == 0)
    for (const std::vector<CommPiece> &list : pieces) {
      auto [lo, hi] = pieces_at(list, CommPiece::At::data, kNoOp);
      for (const CommPiece *c = lo; c != hi; ++c) add(*c);
    }
  // [lower_op] per input slot its partial resolution and collectives; then the grouped send/recv, per receiving rank
  // and slot; then the sync exchanges.
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    if (op.inputs[k] == kNoTensor) continue;
    auto [lo, hi] = pieces_at(pieces[static_cast<size_t>(op.inputs[k])], CommPiece::At::input, s);
    for (const CommPiece *c = lo; c != hi; ++c)
      if (c->slot == static_cast<int>(k) && c->rank < 0) add(*c);
  }
  CLEAVE_CHECK(config, "segment_communication: op ", op.name, " without its config");
  std::vector<int> ranks = config->devices;
  std::sort(ranks.begin(), ranks.end());
  CommEvent sr = make_event(g, CommEvent::Kind::send_recv, s, kNoTensor, {}, 0);
  for (int r : ranks)
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      if (op.inputs[k] == kNoTensor) continue;
      auto [lo, hi] = pieces_at(pieces[static_cast<size_t>(op.inputs[k])], CommPiece::At::input, s);
      for (const CommPiece *c = lo; c != hi; ++c)
        if (c->slot == static_cast<int>(k) && c->rank == r) {
          sr.transfers.insert(sr.transfers.end(), c->transfers.begin(), c->transfers.end());
          local.insert(local.end(), c->local.begin(), c->local.end());
        }
    }
  if (!sr.transfers.empty()) events.push_back(std::move(sr));
  append_sync_events(g, s, descs, *config, events);
}

}  // namespace cleave::plan
