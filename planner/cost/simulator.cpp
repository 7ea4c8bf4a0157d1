// The task-graph simulator (simulator.h): building one op's tasks, full and delta timing, the timeline's text and SVG.
#include "planner/cost/simulator.h"

#include <algorithm>
#include <cstdio>

#include "ir/error.h"
#include "ir/printer.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

constexpr int kCompute = 0, kSend = 1, kRecv = 2;

bool same_event(const CommEvent &a, const CommEvent &b) {
  return a.kind == b.kind && a.op == b.op && a.tensor == b.tensor && a.group == b.group && a.count == b.count &&
         a.elem_bytes == b.elem_bytes && a.transfers == b.transfers;
}

bool same_events(const std::vector<CommEvent> &a, const std::vector<CommEvent> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_event(a[i], b[i])) return false;
  return true;
}

}  // namespace

Simulator::Simulator(const Graph &g, Plan p, const Topology &t, const Profile *profile)
    : g_(g), t_(t), profile_(profile), blocking_collectives_(profile && profile->backend == "cpu"), p_(std::move(p)) {
  for (const Op &op : g.ops()) descs_.push_back(describe::describe(g, op));
  start();
}

Simulator::Simulator(const Graph &g, Plan p, const Topology &t,
                     const std::vector<std::vector<describe::Description>> &descs, const Profile *profile)
    : g_(g),
      t_(t),
      profile_(profile),
      blocking_collectives_(profile && profile->backend == "cpu"),
      p_(std::move(p)),
      descs_(descs) {
  start();
}

void Simulator::start() {
  const Graph &g = g_;
  const Topology &t = t_;
  validate_plan(g, p_);
  if (p_.devices > t.devices())
    CLEAVE_USER_ERROR("the plan uses ", p_.devices, " devices, topology ", t.name, " has ", t.devices());
  size_t ops = static_cast<size_t>(g.num_ops());
  op_entry_.resize(ops);
  tensor_entry_.resize(static_cast<size_t>(g.num_tensors()));
  for (size_t i = 0; i < p_.ops.size(); ++i) op_entry_[*g.find_op(p_.ops[i].name)] = i;
  for (size_t i = 0; i < p_.tensors.size(); ++i) tensor_entry_[*g.find_tensor(p_.tensors[i].name)] = i;
  readers_.resize(ops);
  tensor_readers_ = g.all_consumers();
  for (OpId o = 0; o < g.num_ops(); ++o) {
    for (TensorId in : g.op(o).inputs) {
      if (in == kNoTensor || g.tensor(in).producer == kNoOp) continue;
      auto &r = readers_[g.tensor(in).producer];
      if (r.empty() || r.back() != o) r.push_back(o);
    }
  }
  comm_cache_.descs = descs_;
  comm_cache_.config.assign(ops, {});
  comm_cache_.needs.assign(ops, {});
  comm_cache_.work.assign(ops, {});
  compute_config_.resize(ops);
  compute_seconds_.resize(ops);
  pieces_.assign(static_cast<size_t>(g.num_tensors()), {});
  derive_pieces(g, p_, std::vector<char>(static_cast<size_t>(g.num_tensors()), 1), pieces_, &comm_cache_);
  for (int s = 0; s <= g.num_ops(); ++s) {
    std::vector<CommEvent> events;
    std::vector<LocalStatement> local;
    merge(s, events, local);
    segs_.push_back(build(s, std::move(events), std::move(local)));
  }
  sweep(0);
}

void Simulator::merge(int s, std::vector<CommEvent> &events, std::vector<LocalStatement> &local) const {
  static const std::vector<describe::Description> kNone;
  bool end = s == g_.num_ops();
  segment_communication(g_, s, end ? nullptr : &p_.ops[op_entry_[static_cast<size_t>(s)]].config,
                        end ? kNone : descs_[static_cast<size_t>(s)], pieces_, events, local);
}

Simulator::Segment Simulator::build(int s, std::vector<CommEvent> events, std::vector<LocalStatement> local) {
  Segment seg;
  seg.compute_of.assign(static_cast<size_t>(p_.devices), -1);
  bool end = s == g_.num_ops();
  const Op *op = end ? nullptr : &g_.op(s);
  const ParallelConfig *config = end ? nullptr : &p_.ops[op_entry_[s]].config;
  auto runs = [&](OpId producer, int device) {
    const auto &d = p_.ops[op_entry_[producer]].config.devices;
    return std::find(d.begin(), d.end(), device) != d.end();
  };
  // The kernels on `device` producing tensor t, or (t = kNoTensor) any input of the op.
  auto producers_on = [&](TensorId t, int device, std::vector<std::pair<OpId, int>> &out) {
    std::vector<TensorId> ts;
    if (t != kNoTensor) ts.push_back(t);
    else if (op) ts = op->inputs;
    for (TensorId x : ts) {
      if (x == kNoTensor) continue;
      OpId pr = g_.tensor(x).producer;
      if (pr == kNoOp || !runs(pr, device)) continue;
      std::pair<OpId, int> dep{pr, device};
      if (std::find(out.begin(), out.end(), dep) == out.end()) out.push_back(dep);
    }
  };
  // A profile's statement_gap (profile.h) on every statement as estimate_cost counts them (DeviceCost::statements):
  // added to compute, data, copy and collective tasks; a grouped send/recv is one statement per rank taking part,
  // not per transfer, so there it is an issue task on each such rank (made only when the gap is not 0).
  double gap = profile_ ? profile_->statement_gap : 0;
  // Data reads, then the copies packing this op's communication: on their rank's compute channel.
  auto local_task = [&](const LocalStatement &l) {
    Task k;
    k.kind = l.kind == LocalStatement::Kind::data ? SimTask::Kind::data : SimTask::Kind::copy;
    k.op = l.kind == LocalStatement::Kind::data ? kNoOp : l.op;
    k.device = l.rank;
    k.seconds = local_seconds(l, t_, profile_) + gap;
    k.channels = {k.device * 3 + kCompute};
    return k;
  };
  for (const LocalStatement &l : local)
    if (l.kind == LocalStatement::Kind::data) seg.tasks.push_back(local_task(l));
  std::vector<int> packs;
  for (const LocalStatement &l : local)
    if (l.kind == LocalStatement::Kind::copy && !l.after) {
      Task k = local_task(l);
      producers_on(kNoTensor, k.device, k.producers);
      packs.push_back(static_cast<int>(seg.tasks.size()));
      seg.tasks.push_back(std::move(k));
    }
  int first_comm = static_cast<int>(seg.tasks.size());
  // A communication task waits for the packing copies of the ranks taking part.
  auto wait_packs = [&](Task &k, const std::vector<int> &ranks) {
    for (int j : packs)
      if (std::find(ranks.begin(), ranks.end(), seg.tasks[static_cast<size_t>(j)].device) != ranks.end())
        k.local.push_back(j);
  };
  for (const CommEvent &e : events) {
    CommSeconds secs = comm_event_seconds(e, t_, profile_);
    if (e.kind == CommEvent::Kind::send_recv) {
      // issue_of[r]: the issue task of rank r, which the transfers it sends or receives wait for.
      std::vector<std::pair<int, int>> issue_of;
      if (gap > 0)
        for (int r : event_ranks(e)) {
          Task k;
          k.kind = SimTask::Kind::issue;
          k.op = e.op;
          k.comm = e.kind;
          k.device = r;
          k.seconds = gap;
          k.channels = {r * 3 + kCompute};
          issue_of.push_back({r, static_cast<int>(seg.tasks.size())});
          seg.tasks.push_back(std::move(k));
        }
      for (size_t i = 0; i < e.transfers.size(); ++i) {
        Task k;
        k.kind = SimTask::Kind::transfer;
        k.op = e.op;
        k.comm = e.kind;
        k.device = e.transfers[i].src;
        k.peer = e.transfers[i].dst;
        k.seconds = secs.transfers[i];
        producers_on(kNoTensor, k.device, k.producers);
        wait_packs(k, {k.device, k.peer});
        for (const auto &[r, j] : issue_of)
          if (r == k.device || r == k.peer) k.local.push_back(j);
        k.channels = {k.device * 3 + kSend, k.peer * 3 + kRecv};
        seg.tasks.push_back(std::move(k));
      }
      continue;
    }
    Task k;
    k.kind = SimTask::Kind::collective;
    k.op = e.op;
    k.comm = e.kind;
    k.tensor = e.tensor;
    k.members = e.group;
    k.seconds = secs.collective + gap;
    // The cpu backend's collectives block their members' CPUs (MPI has no progress of its own; a started
    // all-reduce runs at its wait): measured there, a collective also holds each member's compute channel, in
    // program order, so no kernel overlaps it.
    for (int m : e.group) {
      producers_on(e.tensor, m, k.producers);
      k.channels.push_back(m * 3 + kSend);
      k.channels.push_back(m * 3 + kRecv);
      if (blocking_collectives_) k.channels.push_back(m * 3 + kCompute);
    }
    std::sort(k.channels.begin(), k.channels.end());
    k.channels.erase(std::unique(k.channels.begin(), k.channels.end()), k.channels.end());
    wait_packs(k, e.group);
    seg.tasks.push_back(std::move(k));
  }
  int comm_tasks = static_cast<int>(seg.tasks.size());
  auto takes_part = [&](const Task &c, int device) {
    if (c.kind == SimTask::Kind::transfer) return c.device == device || c.peer == device;
    if (c.kind == SimTask::Kind::issue) return c.device == device;
    return std::find(c.members.begin(), c.members.end(), device) != c.members.end();
  };
  // The unpacking copies (and the assigns' at the end) wait for the communication their rank takes part in.
  for (const LocalStatement &l : local)
    if (l.kind == LocalStatement::Kind::copy && l.after) {
      Task k = local_task(l);
      for (int j = first_comm; j < comm_tasks; ++j)
        if (takes_part(seg.tasks[static_cast<size_t>(j)], k.device)) k.local.push_back(j);
      seg.tasks.push_back(std::move(k));
    }
  if (op) {
    if (compute_seconds_[s].empty() || compute_config_[s] != *config) {
      compute_seconds_[s] = op_compute_seconds(g_, *op, descs_[s], *config, t_, profile_);
      compute_config_[s] = *config;
    }
    const std::vector<double> &secs = compute_seconds_[s];
    for (size_t i = 0; i < config->devices.size(); ++i) {
      Task k;
      k.kind = SimTask::Kind::compute;
      k.op = s;
      k.device = config->devices[i];
      k.seconds = secs[i] + gap;
      producers_on(kNoTensor, k.device, k.producers);
      for (int j = first_comm; j < comm_tasks; ++j)
        if (takes_part(seg.tasks[static_cast<size_t>(j)], k.device)) k.local.push_back(j);
      k.channels = {k.device * 3 + kCompute};
      seg.compute_of[static_cast<size_t>(k.device)] = static_cast<int>(seg.tasks.size());
      seg.tasks.push_back(std::move(k));
    }
  }
  for (const Task &k : seg.tasks) CLEAVE_CHECK(!k.channels.empty(), "simulator: a task on no channel");
  seg.events = std::move(events);
  seg.local = std::move(local);
  return seg;
}

void Simulator::sweep(int from) {
  // Every dependency points forward in program order, so one pass in that order times each task after all of its
  // predecessors; a channel's predecessor of a task is the last task before it on that channel, whose end the pass
  // carries in `last`. It starts at the checkpoint at or before `from`: the tasks before `from` keep their times, and
  // those between the checkpoint and `from` get the same times again.
  CLEAVE_CHECK(from >= 0 && static_cast<size_t>(from) < segs_.size(), "simulator: sweep from segment ", from);
  size_t channels = static_cast<size_t>(p_.devices) * 3;
  size_t first = static_cast<size_t>(from) / kCheckpointEvery;
  checkpoints_.resize((segs_.size() + kCheckpointEvery - 1) / kCheckpointEvery, std::vector<double>(channels, 0.0));
  std::vector<double> last = checkpoints_[first];
  recomputed_ = 0;
  for (size_t s = first * kCheckpointEvery; s < segs_.size(); ++s) {
    if (s % kCheckpointEvery == 0) checkpoints_[s / kCheckpointEvery] = last;
    Segment &seg = segs_[s];
    for (Task &task : seg.tasks) {
      double start = 0;
      for (const auto &[o, d] : task.producers) {
        const Segment &producer = segs_[static_cast<size_t>(o)];
        int i = producer.compute_of[static_cast<size_t>(d)];
        CLEAVE_CHECK(i >= 0, "simulator: op ", g_.op(o).name, " has no kernel on device ", d);
        start = std::max(start, producer.tasks[static_cast<size_t>(i)].end);
      }
      for (int j : task.local) start = std::max(start, seg.tasks[static_cast<size_t>(j)].end);
      for (int c : task.channels) start = std::max(start, last[static_cast<size_t>(c)]);
      task.start = start;
      task.end = start + task.seconds;
      for (int c : task.channels) last[static_cast<size_t>(c)] = task.end;
    }
    recomputed_ += static_cast<int64_t>(seg.tasks.size());
  }
  // Ends grow along a channel and every task is on one, so the step ends with some channel's last task.
  makespan_ = 0;
  for (double e : last) makespan_ = std::max(makespan_, e);
}

void Simulator::set_config(OpId o, const ParallelConfig &config) { set_configs({{o, config}}); }

void Simulator::set_configs(const std::vector<std::pair<OpId, ParallelConfig>> &changes) {
  undo_ = Undo{};
  undo_.valid = true;
  // The tensors whose communication is derived again (cost_model.h CommPiece): those the changed ops read or write,
  // and the assigns' destinations that take a new sharding.
  std::vector<char> tensors(static_cast<size_t>(g_.num_tensors()), 0);
  auto set_sharding = [&](TensorId t, Sharding s) {
    tensors[static_cast<size_t>(t)] = 1;
    undo_.tensors.push_back({tensor_entry_[t], p_.tensors[tensor_entry_[t]].sharding});
    p_.tensors[tensor_entry_[t]].sharding = std::move(s);
  };
  for (const auto &[o, config] : changes) {
    const Op &op = g_.op(o);
    undo_.ops.push_back({op_entry_[o], p_.ops[op_entry_[o]].config});
    p_.ops[op_entry_[o]].config = config;
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      TensorId out = op.outputs[k];
      if (out == kNoTensor) continue;
      set_sharding(out, implied_sharding(op, descs_[o], config, k));
      for (const Assign &a : g_.assigns)
        if (a.src == out) set_sharding(a.dst, without_partial(p_.tensors[tensor_entry_[out]].sharding));
    }
  }
  for (const auto &[o, config] : changes)
    for (const std::vector<TensorId> *list : {&g_.op(o).inputs, &g_.op(o).outputs})
      for (TensorId t : *list)
        if (t != kNoTensor) tensors[static_cast<size_t>(t)] = 1;
  std::vector<bool> merge_again(segs_.size(), false), rebuild(segs_.size(), false);
  for (TensorId t = 0; t < g_.num_tensors(); ++t) {
    if (!tensors[static_cast<size_t>(t)]) continue;
    undo_.pieces.push_back({t, pieces_[static_cast<size_t>(t)]});
    for (OpId r : tensor_readers_[static_cast<size_t>(t)]) merge_again[static_cast<size_t>(r)] = true;
    if (g_.tensor(t).producer == kNoOp) merge_again[0] = true;  // its data reads
  }
  // Then the segments holding any of it are assembled again, and rebuilt where that changed them.
  derive_pieces(g_, p_, tensors, pieces_, &comm_cache_);
  for (const auto &[o, config] : changes) {
    merge_again[static_cast<size_t>(o)] = rebuild[static_cast<size_t>(o)] = true;
    for (OpId r : readers_[static_cast<size_t>(o)]) rebuild[static_cast<size_t>(r)] = true;
  }
  merge_again.back() = rebuild.back() = true;  // the end of the step: small, and its collectives may wait for o's kernels
  int from = -1;
  for (size_t s = 0; s < segs_.size(); ++s) {
    if (!merge_again[s] && !rebuild[s]) continue;
    int si = static_cast<int>(s);
    std::vector<CommEvent> events;
    std::vector<LocalStatement> local;
    merge(si, events, local);
    if (!rebuild[s] && same_events(events, segs_[s].events) && local == segs_[s].local) continue;
    if (from < 0) from = si;
    undo_.segments.push_back({si, std::move(segs_[s])});
    segs_[s] = build(si, std::move(events), std::move(local));
  }
  sweep(from);
}

void Simulator::undo() {
  CLEAVE_CHECK(undo_.valid, "simulator: nothing to undo");
  undo_.valid = false;
  for (auto it = undo_.ops.rbegin(); it != undo_.ops.rend(); ++it) p_.ops[it->first].config = std::move(it->second);
  for (auto it = undo_.tensors.rbegin(); it != undo_.tensors.rend(); ++it)
    p_.tensors[it->first].sharding = std::move(it->second);
  for (auto &[t, list] : undo_.pieces) pieces_[static_cast<size_t>(t)] = std::move(list);
  int from = static_cast<int>(segs_.size());
  for (auto &[s, seg] : undo_.segments) {
    segs_[static_cast<size_t>(s)] = std::move(seg);
    from = std::min(from, s);
  }
  undo_ = Undo{};
  // The restored segments carry their old times; those after them are timed again, to the values they had (the same
  // expressions over the same task graph).
  sweep(from);
}

std::vector<SimTask> Simulator::tasks() const {
  std::vector<SimTask> out;
  for (const Segment &seg : segs_)
    for (const Task &k : seg.tasks) out.push_back(k);
  return out;
}

std::vector<DeviceBusy> Simulator::busy() const {
  std::vector<DeviceBusy> out(static_cast<size_t>(p_.devices));
  for (const Segment &seg : segs_)
    for (const Task &k : seg.tasks) {
      if (k.kind == SimTask::Kind::compute) {
        out[static_cast<size_t>(k.device)].compute_seconds += k.seconds;
      } else if (k.kind == SimTask::Kind::copy || k.kind == SimTask::Kind::data) {
        out[static_cast<size_t>(k.device)].local_seconds += k.seconds;
      } else if (k.kind == SimTask::Kind::issue) {
        out[static_cast<size_t>(k.device)].comm_seconds += k.seconds;
      } else if (k.kind == SimTask::Kind::transfer) {
        out[static_cast<size_t>(k.device)].comm_seconds += k.seconds;
        out[static_cast<size_t>(k.peer)].comm_seconds += k.seconds;
      } else {
        for (int m : k.members) out[static_cast<size_t>(m)].comm_seconds += k.seconds;
      }
    }
  return out;
}

namespace {

std::string task_name(const Graph &g, const SimTask &k) {
  std::string op = k.op == kNoOp ? "(end of step)" : print_name(g.op(k.op).name);
  switch (k.kind) {
    case SimTask::Kind::compute: return op;
    case SimTask::Kind::copy: return "copy for " + op;
    case SimTask::Kind::data: return "read data";
    case SimTask::Kind::transfer: return "send_recv " + op;
    case SimTask::Kind::issue: return "issue send_recv " + op;
    case SimTask::Kind::collective:
      return std::string(comm_kind_name(k.comm)) + " " +
             (k.tensor == kNoTensor ? op : print_name(g.tensor(k.tensor).name) + " before " + op);
  }
  return op;
}

std::string where(const SimTask &k) {
  switch (k.kind) {
    case SimTask::Kind::compute:
    case SimTask::Kind::copy:
    case SimTask::Kind::data:
    case SimTask::Kind::issue: return "d" + std::to_string(k.device);
    case SimTask::Kind::transfer: return "d" + std::to_string(k.device) + "->d" + std::to_string(k.peer);
    case SimTask::Kind::collective: {
      std::string s;
      for (int m : k.members) s += (s.empty() ? "d" : "+d") + std::to_string(m);
      return s;
    }
  }
  return "";
}

const char *kind_name(SimTask::Kind k) {
  switch (k) {
    case SimTask::Kind::compute: return "compute";
    case SimTask::Kind::collective: return "collective";
    case SimTask::Kind::transfer: return "transfer";
    case SimTask::Kind::copy: return "copy";
    case SimTask::Kind::data: return "data";
    case SimTask::Kind::issue: return "issue";
  }
  return "?";
}

std::string xml_escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string timeline_text(const Graph &g, const Simulator &sim) {
  std::string s;
  char buf[96];
  std::snprintf(buf, sizeof buf, "# makespan %.6e s; %d devices; start_s end_s where kind name\n", sim.makespan(),
                sim.plan().devices);
  s += buf;
  for (const SimTask &k : sim.tasks()) {
    std::snprintf(buf, sizeof buf, "%.6e %.6e ", k.start, k.end);
    s += buf + where(k) + " " + kind_name(k.kind) + " " + task_name(g, k) + "\n";
  }
  return s;
}

std::string timeline_svg(const Graph &g, const Simulator &sim) {
  const int devices = sim.plan().devices;
  const double width = 1200, label = 90, row_h = 14, top = 24;
  const double span = sim.makespan() > 0 ? sim.makespan() : 1;
  const double height = top + 3 * devices * row_h + 20;
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"monospace\" "
                "font-size=\"10\">\n<text x=\"4\" y=\"14\">step %.6e s (%d devices): rows per device compute, send, "
                "receive</text>\n",
                width + label + 10, height, sim.makespan(), devices);
  s += buf;
  static const char *kRows[] = {"compute", "send", "recv"};
  for (int d = 0; d < devices; ++d)
    for (int r = 0; r < 3; ++r) {
      std::snprintf(buf, sizeof buf, "<text x=\"4\" y=\"%.1f\">d%d %s</text>\n", top + (3 * d + r + 0.8) * row_h, d,
                    kRows[r]);
      s += buf;
    }
  auto box = [&](int row, const SimTask &k, const char *fill) {
    double x = label + k.start / span * width, w = std::max(k.seconds / span * width, 0.5);
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" stroke=\"black\" "
                  "stroke-width=\"0.2\"><title>",
                  x, top + row * row_h + 1, w, row_h - 2, fill);
    s += buf;
    std::snprintf(buf, sizeof buf, "%.6e-%.6e ", k.start, k.end);
    s += buf + xml_escape(where(k) + " " + task_name(g, k)) + "</title></rect>\n";
  };
  for (const SimTask &k : sim.tasks()) {
    switch (k.kind) {
      case SimTask::Kind::compute: box(3 * k.device, k, "#4e79a7"); break;
      case SimTask::Kind::copy:
      case SimTask::Kind::data: box(3 * k.device, k, "#76b7b2"); break;
      case SimTask::Kind::issue: box(3 * k.device, k, "#bab0ac"); break;
      case SimTask::Kind::transfer:
        box(3 * k.device + 1, k, "#f28e2b");
        box(3 * k.peer + 2, k, "#f28e2b");
        break;
      case SimTask::Kind::collective:
        for (int m : k.members) {
          box(3 * m + 1, k, "#e15759");
          box(3 * m + 2, k, "#e15759");
        }
        break;
    }
  }
  s += "</svg>\n";
  return s;
}

}  // namespace cleave::plan
