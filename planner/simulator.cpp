// The task-graph simulator (simulator.h): building one op's tasks, full and delta timing, the timeline's text and SVG.
#include "planner/simulator.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
#include <set>

#include "ir/error.h"
#include "ir/printer.h"
#include "planner/validate.h"

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

/** Events and local statements grouped by the op they run before (the last group: the end of the step; data reads
 *  with the first op). */
struct BySegment {
  std::vector<std::vector<CommEvent>> events;
  std::vector<std::vector<LocalStatement>> local;
};
BySegment by_segment(const Graph &g, Communication comm) {
  BySegment out;
  size_t n = static_cast<size_t>(g.num_ops()) + 1;
  out.events.resize(n);
  out.local.resize(n);
  for (CommEvent &e : comm.events) out.events[e.op == kNoOp ? n - 1 : static_cast<size_t>(e.op)].push_back(std::move(e));
  for (const LocalStatement &l : comm.local)
    out.local[l.kind == LocalStatement::Kind::data ? 0 : l.op == kNoOp ? n - 1 : static_cast<size_t>(l.op)].push_back(l);
  return out;
}


}  // namespace

Simulator::Simulator(const Graph &g, Plan p, const Topology &t, const Profile *profile)
    : g_(g), t_(t), profile_(profile), p_(std::move(p)) {
  for (const Op &op : g.ops()) descs_.push_back(describe::describe(g, op));
  start();
}

Simulator::Simulator(const Graph &g, Plan p, const Topology &t,
                     const std::vector<std::vector<describe::Description>> &descs, const Profile *profile)
    : g_(g), t_(t), profile_(profile), p_(std::move(p)), descs_(descs) {
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
  for (OpId o = 0; o < g.num_ops(); ++o) {
    for (TensorId in : g.op(o).inputs) {
      if (in == kNoTensor || g.tensor(in).producer == kNoOp) continue;
      auto &r = readers_[g.tensor(in).producer];
      if (r.empty() || r.back() != o) r.push_back(o);
    }
  }
  channels_.resize(static_cast<size_t>(p_.devices) * 3);
  comm_cache_.descs = descs_;
  comm_cache_.config.assign(ops, {});
  comm_cache_.needs.assign(ops, {});
  compute_config_.resize(ops);
  compute_seconds_.resize(ops);
  BySegment by = by_segment(g, derive_communication(g, p_, &comm_cache_));
  for (size_t s = 0; s < by.events.size(); ++s) {
    segs_.push_back(build(static_cast<int>(s), std::move(by.events[s]), std::move(by.local[s])));
    insert(static_cast<int>(s));
  }
  std::vector<Key> all;
  for (size_t s = 0; s < segs_.size(); ++s)
    for (size_t i = 0; i < segs_[s].tasks.size(); ++i) all.push_back({static_cast<int>(s), static_cast<int>(i)});
  propagate(std::move(all));
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
  // Data reads, then the copies packing this op's communication: on their rank's compute channel.
  auto local_task = [&](const LocalStatement &l) {
    Task k;
    k.kind = l.kind == LocalStatement::Kind::data ? SimTask::Kind::data : SimTask::Kind::copy;
    k.op = l.kind == LocalStatement::Kind::data ? kNoOp : l.op;
    k.device = l.rank;
    k.seconds = local_seconds(l, t_, profile_);
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
    k.seconds = secs.collective;
    for (int m : e.group) {
      producers_on(e.tensor, m, k.producers);
      k.channels.push_back(m * 3 + kSend);
      k.channels.push_back(m * 3 + kRecv);
    }
    std::sort(k.channels.begin(), k.channels.end());
    k.channels.erase(std::unique(k.channels.begin(), k.channels.end()), k.channels.end());
    wait_packs(k, e.group);
    seg.tasks.push_back(std::move(k));
  }
  int comm_tasks = static_cast<int>(seg.tasks.size());
  auto takes_part = [&](const Task &c, int device) {
    return c.kind == SimTask::Kind::transfer ? c.device == device || c.peer == device
                                             : std::find(c.members.begin(), c.members.end(), device) != c.members.end();
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
      k.seconds = secs[i];
      producers_on(kNoTensor, k.device, k.producers);
      for (int j = first_comm; j < comm_tasks; ++j)
        if (takes_part(seg.tasks[static_cast<size_t>(j)], k.device)) k.local.push_back(j);
      k.channels = {k.device * 3 + kCompute};
      seg.compute_of[static_cast<size_t>(k.device)] = static_cast<int>(seg.tasks.size());
      seg.tasks.push_back(std::move(k));
    }
  }
  seg.local_waiting.resize(seg.tasks.size());
  for (size_t i = 0; i < seg.tasks.size(); ++i) {
    for (const std::pair<OpId, int> &p : seg.tasks[i].producers) {
      std::vector<int> &w = seg.waiting[p];
      if (w.empty() || w.back() != static_cast<int>(i)) w.push_back(static_cast<int>(i));
    }
    for (int j : seg.tasks[i].local) seg.local_waiting[static_cast<size_t>(j)].push_back(static_cast<int>(i));
  }
  seg.events = std::move(events);
  seg.local = std::move(local);
  return seg;
}

void Simulator::insert(int s) {
  for (size_t i = 0; i < segs_[s].tasks.size(); ++i)
    for (int c : segs_[s].tasks[i].channels) {
      auto &ch = channels_[static_cast<size_t>(c)];
      Key k{s, static_cast<int>(i)};
      ch.insert(std::lower_bound(ch.begin(), ch.end(), k), k);
    }
}

void Simulator::erase(int s) {
  for (auto &ch : channels_) {
    auto lo = std::lower_bound(ch.begin(), ch.end(), Key{s, 0});
    auto hi = std::lower_bound(lo, ch.end(), Key{s + 1, 0});
    ch.erase(lo, hi);
  }
}

bool Simulator::time(const Key &k) {
  Segment &seg = segs_[static_cast<size_t>(k.first)];
  Task &task = seg.tasks[static_cast<size_t>(k.second)];
  double start = 0;
  for (const auto &[o, d] : task.producers) {
    int i = segs_[static_cast<size_t>(o)].compute_of[static_cast<size_t>(d)];
    CLEAVE_CHECK(i >= 0, "simulator: op ", g_.op(o).name, " has no kernel on device ", d);
    start = std::max(start, segs_[static_cast<size_t>(o)].tasks[static_cast<size_t>(i)].end);
  }
  for (int j : task.local) start = std::max(start, seg.tasks[static_cast<size_t>(j)].end);
  for (int c : task.channels) {
    const auto &ch = channels_[static_cast<size_t>(c)];
    auto it = std::lower_bound(ch.begin(), ch.end(), k);
    if (it != ch.begin()) {
      const Key &prev = *(it - 1);
      start = std::max(start, segs_[static_cast<size_t>(prev.first)].tasks[static_cast<size_t>(prev.second)].end);
    }
  }
  double end = start + task.seconds;
  bool changed = end != task.end;
  task.start = start;
  task.end = end;
  return changed;
}

void Simulator::propagate(std::vector<Key> seeds) {
  // Every dependency points forward in program order, so taking tasks in that order times each one after all of its
  // predecessors; a task is re-timed only if a predecessor's end changed (or it was rebuilt).
  // Work is a min-heap of keys, each pushed once (`queued`): every key pushed lies after the one being timed, so a
  // key taken never comes back.
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> heap;
  std::vector<Key> pushed;
  auto push = [&](const Key &k) {
    std::vector<char> &q = queued_[static_cast<size_t>(k.first)];
    if (q.size() <= static_cast<size_t>(k.second)) q.resize(segs_[static_cast<size_t>(k.first)].tasks.size(), 0);
    if (q[static_cast<size_t>(k.second)]) return;
    q[static_cast<size_t>(k.second)] = 1;
    pushed.push_back(k);
    heap.push(k);
  };
  queued_.resize(segs_.size());
  for (const Key &k : seeds) push(k);
  std::set<Key> fresh(seeds.begin(), seeds.end());
  recomputed_ = 0;
  while (!heap.empty()) {
    Key k = heap.top();
    heap.pop();
    ++recomputed_;
    if (recording_) {
      const Task &before = segs_[static_cast<size_t>(k.first)].tasks[static_cast<size_t>(k.second)];
      undo_.times.push_back({k, {before.start, before.end}});
    }
    bool changed = time(k);
    if (!changed && !fresh.count(k)) continue;
    const Task &task = segs_[static_cast<size_t>(k.first)].tasks[static_cast<size_t>(k.second)];
    for (int c : task.channels) {
      const auto &ch = channels_[static_cast<size_t>(c)];
      auto it = std::upper_bound(ch.begin(), ch.end(), k);
      if (it != ch.end()) push(*it);
    }
    if (task.kind == SimTask::Kind::compute) {
      auto depends = [&](int s) {
        const Segment &seg = segs_[static_cast<size_t>(s)];
        auto w = seg.waiting.find({k.first, task.device});
        if (w != seg.waiting.end())
          for (int i : w->second) push({s, i});
      };
      for (OpId r : readers_[static_cast<size_t>(k.first)]) depends(r);
      depends(g_.num_ops());
    } else {
      const Segment &seg = segs_[static_cast<size_t>(k.first)];
      for (int i : seg.local_waiting[static_cast<size_t>(k.second)])
        if (i > k.second) push({k.first, i});
    }
  }
  for (const Key &k : pushed) queued_[static_cast<size_t>(k.first)][static_cast<size_t>(k.second)] = 0;
  finish();
}

void Simulator::finish() {
  makespan_ = 0;
  for (const Segment &seg : segs_)
    for (const Task &k : seg.tasks) makespan_ = std::max(makespan_, k.end);
}

void Simulator::set_config(OpId o, const ParallelConfig &config) { set_configs({{o, config}}); }

void Simulator::set_configs(const std::vector<std::pair<OpId, ParallelConfig>> &changes) {
  undo_ = Undo{};
  undo_.valid = true;
  undo_.makespan = makespan_;
  auto set_sharding = [&](TensorId t, Sharding s) {
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
  BySegment by = by_segment(g_, derive_communication(g_, p_, &comm_cache_));
  std::vector<bool> rebuild(segs_.size(), false);
  for (const auto &[o, config] : changes) {
    rebuild[static_cast<size_t>(o)] = true;
    for (OpId r : readers_[static_cast<size_t>(o)]) rebuild[static_cast<size_t>(r)] = true;
  }
  rebuild.back() = true;  // the end of the step: small, and its collectives may wait for o's kernels
  for (size_t s = 0; s < segs_.size(); ++s)
    if (!same_events(by.events[s], segs_[s].events) || by.local[s] != segs_[s].local) rebuild[s] = true;
  // Rebuild first, then seed: a seed taken while a later segment is still to be rebuilt could name a task it drops.
  std::vector<std::set<int>> touched(segs_.size());
  for (size_t s = 0; s < segs_.size(); ++s) {
    if (!rebuild[s]) continue;
    int si = static_cast<int>(s);
    for (const Task &k : segs_[s].tasks) touched[s].insert(k.channels.begin(), k.channels.end());
    erase(si);
    undo_.segments.push_back({si, std::move(segs_[s])});
    segs_[s] = build(si, std::move(by.events[s]), std::move(by.local[s]));
    insert(si);
    for (const Task &k : segs_[s].tasks) touched[s].insert(k.channels.begin(), k.channels.end());
  }
  std::vector<Key> seeds;
  for (size_t s = 0; s < segs_.size(); ++s) {
    if (!rebuild[s]) continue;
    int si = static_cast<int>(s);
    for (size_t i = 0; i < segs_[s].tasks.size(); ++i) seeds.push_back({si, static_cast<int>(i)});
    // The first task after this segment on each channel it used or uses has a new predecessor.
    for (int c : touched[s]) {
      const auto &ch = channels_[static_cast<size_t>(c)];
      auto it = std::lower_bound(ch.begin(), ch.end(), Key{si + 1, 0});
      if (it != ch.end()) seeds.push_back(*it);
    }
  }
  recording_ = true;
  propagate(std::move(seeds));
  recording_ = false;
}

void Simulator::undo() {
  CLEAVE_CHECK(undo_.valid, "simulator: nothing to undo");
  undo_.valid = false;
  for (auto it = undo_.ops.rbegin(); it != undo_.ops.rend(); ++it) p_.ops[it->first].config = std::move(it->second);
  for (auto it = undo_.tensors.rbegin(); it != undo_.tensors.rend(); ++it)
    p_.tensors[it->first].sharding = std::move(it->second);
  std::vector<bool> restored(segs_.size(), false);
  for (auto &[s, seg] : undo_.segments) {
    erase(s);
    segs_[static_cast<size_t>(s)] = std::move(seg);
    insert(s);
    restored[static_cast<size_t>(s)] = true;
  }
  // Times of tasks outside the restored segments (those carry their own); in reverse, so the earliest save wins.
  for (auto it = undo_.times.rbegin(); it != undo_.times.rend(); ++it) {
    if (restored[static_cast<size_t>(it->first.first)]) continue;
    Task &k = segs_[static_cast<size_t>(it->first.first)].tasks[static_cast<size_t>(it->first.second)];
    k.start = it->second.first;
    k.end = it->second.second;
  }
  makespan_ = undo_.makespan;
  undo_ = Undo{};
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
    case SimTask::Kind::data: return "d" + std::to_string(k.device);
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
