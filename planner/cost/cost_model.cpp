#include "planner/cost/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/plan/region.h"
#include "planner/plan/validate.h"

namespace cleave::plan {

double all_reduce_seconds(double n, int p, double bandwidth, double latency) {
  if (p < 2) return 0;
  double ring = 2.0 * (p - 1) / p * n / bandwidth + 2.0 * (p - 1) * latency;
  double tree = 2.0 * std::ceil(std::log2(p)) * (latency + n / bandwidth);
  return std::min(ring, tree);
}

double all_gather_seconds(double n, int p, double bandwidth, double latency) {
  if (p < 2) return 0;
  return static_cast<double>(p - 1) / p * n / bandwidth + (p - 1) * latency;
}

double all_to_all_seconds(double m, int p, double bandwidth, double latency) {
  if (p < 2) return 0;
  return (p - 1) * (latency + m / bandwidth);
}

GroupLink group_link(const Topology &t, const std::vector<int> &group) {
  int p = static_cast<int>(group.size());
  const Level &lv = t.levels[static_cast<size_t>(std::max(t.level_spanned(group), 0))];
  return {lv.shared ? lv.bandwidth / p : lv.bandwidth, lv.latency};
}

namespace {


/** FLOPs and bytes moved to and from memory by one device's share of an op (descriptions restricted to its var
 *  ranges: the FLOP count of the same description with its extents cut to the ranges). */
struct Work {
  int64_t flops = 0, bytes = 0;
};

/** The work of output `k`'s description `d` of `op` restricted to the var `ranges`. */
Work ranges_work(const Graph &g, const Op &op, size_t k, const describe::Description &d,
                 const std::vector<Interval> &ranges) {
  describe::Description cut = d;
  for (size_t v = 0; v < cut.vars.size(); ++v) cut.vars[v].extent = std::max<int64_t>(ranges[v].size(), 0);
  Work w{describe::flops(cut), 0};
  OpRegion r = op_region(d, ranges);
  w.bytes += box_volume(r.output) * dtype_size(g.tensor(op.output(k)).dtype);
  for (const OperandRegion &o : r.operands)
    if (!box_empty(o.box)) w.bytes += box_volume(o.box) * dtype_size(g.tensor(op.input(o.slot)).dtype);
  return w;
}

Work device_work(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                 const ParallelConfig &config, int64_t index) {
  Work w;
  for (size_t k = 0; k < descs.size(); ++k) {
    if (op.output(k) == kNoTensor) continue;
    Work part = ranges_work(g, op, k, descs[k], var_ranges(descs[k], config, index));
    w.flops += part.flops;
    w.bytes += part.bytes;
  }
  return w;
}

double roofline_seconds(const Work &w, const Topology &t) {
  return std::max(static_cast<double>(w.flops) / t.device.peak_flops,
                  static_cast<double>(w.bytes) / t.device.memory_bandwidth);
}

/** The roofline seconds of a share given by its shard_key: the work of the description of `op`'s first present
 *  output with each var's extent cut to the key's (ranges from 0); nothing when the key does not name the
 *  description's vars in order (a profile of another version of the model). */
std::optional<double> key_roofline_seconds(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                           const std::string &key, const Topology &t) {
  for (size_t k = 0; k < descs.size(); ++k) {
    if (op.output(k) == kNoTensor) continue;
    std::vector<Interval> ranges;
    size_t at = 0;
    for (size_t v = 0; v < descs[k].vars.size(); ++v) {
      if (at > key.size()) return std::nullopt;  // the key ran out of vars
      size_t end = std::min(key.find(',', at), key.size());
      std::string item = key.substr(at, end - at), name = descs[k].vars[v].name + "=";
      if (item.rfind(name, 0) != 0) return std::nullopt;
      int64_t extent = 0;
      try {
        extent = std::stoll(item.substr(name.size()));
      } catch (const std::exception &) {
        return std::nullopt;
      }
      ranges.push_back({0, extent});
      at = end + 1;
    }
    if (at < key.size()) return std::nullopt;
    return roofline_seconds(ranges_work(g, op, k, descs[k], ranges), t);
  }
  return std::nullopt;
}

/** How an op's unmeasured shares are priced from its measured ones: seconds = intercept + slope · roofline seconds
 *  (each share's roofline from its key's extents, key_roofline_seconds), so the roofline's error on the measuring
 *  machine carries over. Where the measured shares' rooflines span a factor of 1.5 or more (a profile of plans that cut
 *  the op differently: the data plan and the single-device plan, say) the line is their least-squares fit: its intercept is
 *  what a kernel costs whatever its work (a GPU's launch and latency, which dominate small kernels: on an H200 a
 *  CNN step of 4 times the batch took 1.25 times as long), its slope what each unit of roofline work costs; kept to
 *  intercept, slope >= 0 (a constant where time falls with work, a line through 0 where the intercept would be
 *  negative). Where they span less, the line through 0 and their median measured / roofline ratio. Nothing when the
 *  profile has no usable share of the op. Without it a search would prefer configs only because nobody measured
 *  them: the roofline is several times too fast on small kernels. */
std::optional<ProfileMemo::Line> calibration(const Graph &g, const Op &op,
                                             const std::vector<describe::Description> &descs, const Topology &t,
                                             const Profile &profile) {
  auto measured = profile.compute.find(op.name);
  if (measured == profile.compute.end()) return std::nullopt;
  std::vector<std::pair<double, double>> pts;  // (roofline, measured) seconds
  for (const auto &[k, secs] : measured->second)
    if (std::optional<double> roof = key_roofline_seconds(g, op, descs, k, t); roof && *roof > 0)
      pts.emplace_back(*roof, secs);
  if (pts.empty()) return std::nullopt;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  // Rooflines closer than 1.5 times apart say little about the slope (weights the shares all read dominate them, or
  // the shares differ in shape, not size), and the machine's noise (tens of percent here) would make it anything.
  auto [lo, hi] = std::minmax_element(pts.begin(), pts.end());
  if (hi->first < lo->first * 1.5) {
    std::vector<double> ratios;
    for (auto [roof, secs] : pts) ratios.push_back(secs / roof);
    return ProfileMemo::Line{0, median(ratios)};
  }
  double n = static_cast<double>(pts.size()), mx = 0, my = 0;
  for (auto [x, y] : pts) {
    mx += x / n;
    my += y / n;
  }
  double sxx = 0, sxy = 0, sx2 = 0, sxy0 = 0;
  for (auto [x, y] : pts) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
    sx2 += x * x;
    sxy0 += x * y;
  }
  double slope = sxy / sxx, intercept = my - slope * mx;
  if (slope < 0) {
    std::vector<double> secs;
    for (auto [x, y] : pts) secs.push_back(y);
    return ProfileMemo::Line{median(secs), 0};
  }
  if (intercept < 0) return ProfileMemo::Line{0, sxy0 / sx2};
  return ProfileMemo::Line{intercept, slope};
}

/** An unmeasured share (`key`) of an op the profile measured at other shares: its roofline on the op's calibration
 *  line (derived once per op and topology: the profile's memo). At the mean rank's speed. */
std::optional<double> calibrated_seconds(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                         const std::string &key, const Topology &t, const Profile &profile) {
  char machine[64];
  std::snprintf(machine, sizeof machine, "%a %a", t.device.peak_flops, t.device.memory_bandwidth);
  std::optional<ProfileMemo::Line> line =
      profile.memo.line(op.name, machine, [&] { return calibration(g, op, descs, t, profile); });
  if (!line) return std::nullopt;
  std::optional<double> mine = key_roofline_seconds(g, op, descs, key, t);
  if (!mine) return std::nullopt;
  return line->intercept + line->slope * *mine;
}

/** The shares of one op under one config: device `index`'s is measured where the profile has its key (the device's
 *  rank_scale applied), else calibrated from the op's measured shares (calibrated_seconds; rank_scale applied), else
 *  the roofline of its work. Shares of equal extents have one key, and a config's shares mostly do: each key is
 *  looked up once (a search prices thousands of configs of 16 or more shares). */
class SharePrices {
 public:
  enum class Source : uint8_t { measured, calibrated, roofline };
  SharePrices(const Graph &g, const Op &op, const std::vector<describe::Description> &descs, const ParallelConfig &c,
              const Topology &t, const Profile *profile)
      : g_(g), op_(op), descs_(descs), c_(c), t_(t), profile_(profile) {
    if (profile_)
      if (auto o = profile_->compute.find(op_.name); o != profile_->compute.end()) measured_ = &o->second;
  }

  /** Device `index`'s seconds; `work()` gives its Work when the roofline prices it. */
  template <class WorkOf>
  double seconds(int64_t index, WorkOf work, Source &source) {
    if (measured_) {  // an op the profile never measured has no key to look up
      std::string key = shard_key(op_, descs_, c_, index);
      auto seen = std::find_if(keys_.begin(), keys_.end(), [&](const Keyed &k) { return k.key == key; });
      if (seen == keys_.end()) seen = keys_.insert(keys_.end(), lookup(std::move(key)));
      if (seen->source != Source::roofline) {
        source = seen->source;
        return seen->seconds * profile_->scale(c_.devices[static_cast<size_t>(index)]);
      }
    }
    source = Source::roofline;
    return roofline_seconds(work(), t_);
  }

 private:
  struct Keyed {
    std::string key;
    Source source = Source::roofline;
    double seconds = 0;  // before the rank scale
  };
  Keyed lookup(std::string key) const {
    Keyed k{std::move(key)};
    if (auto m = measured_->find(k.key); m != measured_->end()) {
      k.source = Source::measured;
      k.seconds = m->second;
    } else if (auto cal = calibrated_seconds(g_, op_, descs_, k.key, t_, *profile_)) {
      k.source = Source::calibrated;
      k.seconds = *cal;
    }
    return k;
  }
  const Graph &g_;
  const Op &op_;
  const std::vector<describe::Description> &descs_;
  const ParallelConfig &c_;
  const Topology &t_;
  const Profile *profile_;
  const std::map<std::string, double> *measured_ = nullptr;  // the profile's shares of this op, if any
  std::vector<Keyed> keys_;
};

/** α-β seconds of one CommEvent (comm_event_seconds without a profile). */
CommSeconds comm_event_seconds_modelled(const CommEvent &e, const Topology &t) {
  CommSeconds out;
  if (e.kind == CommEvent::Kind::send_recv) {
    // On a shared level the op's senders over that level split its bandwidth.
    std::map<int, std::vector<int>> senders;  // level -> distinct senders
    for (const auto &tr : e.transfers) {
      auto &v = senders[t.level_between(tr.src, tr.dst)];
      if (std::find(v.begin(), v.end(), tr.src) == v.end()) v.push_back(tr.src);
    }
    for (const auto &tr : e.transfers) {
      int l = t.level_between(tr.src, tr.dst);
      const Level &lv = t.levels[static_cast<size_t>(std::max(l, 0))];
      double bw = lv.shared ? lv.bandwidth / static_cast<double>(senders[l].size()) : lv.bandwidth;
      out.transfers.push_back(lv.latency + static_cast<double>(tr.bytes) / bw);
    }
    return out;
  }
  int p = static_cast<int>(e.group.size());
  if (p < 2) return out;
  const Level &lv = t.levels[static_cast<size_t>(std::max(t.level_spanned(e.group), 0))];
  double bw = lv.shared ? lv.bandwidth / p : lv.bandwidth;
  double n = static_cast<double>(e.count * e.elem_bytes);
  switch (e.kind) {
    case CommEvent::Kind::all_reduce:
    case CommEvent::Kind::sync: out.collective = all_reduce_seconds(n, p, bw, lv.latency); break;
    case CommEvent::Kind::all_gather:
    case CommEvent::Kind::reduce_scatter: out.collective = all_gather_seconds(n * p, p, bw, lv.latency); break;
    case CommEvent::Kind::all_to_all: out.collective = all_to_all_seconds(n, p, bw, lv.latency); break;
    case CommEvent::Kind::send_recv: break;
  }
  return out;
}

}  // namespace

double op_slowest_compute_seconds(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                  const ParallelConfig &config, const Topology &t) {
  double secs = 0;
  for (size_t i = 0; i < config.devices.size(); ++i)
    secs = std::max(secs, roofline_seconds(device_work(g, op, descs, config, static_cast<int64_t>(i)), t));
  return secs;
}

namespace {

class Estimator {
 public:
  Estimator(const Graph &g, const Plan &p, const Topology &t, const Profile *profile, CommCache *cache)
      : g_(g), p_(p), t_(t), profile_(profile), cache_(cache) {
    if (p.devices > t.devices())
      CLEAVE_USER_ERROR("the plan uses ", p.devices, " devices, topology ", t.name, " has ", t.devices());
    r_.topology = t.name;
    for (const Level &l : t.levels) r_.level_names.push_back(l.name);
    r_.devices.resize(static_cast<size_t>(p.devices));
    for (auto &d : r_.devices) d.comm_bytes_per_level.assign(t.levels.size(), 0);
    r_.comm_bytes_per_level.assign(t.levels.size(), 0);
    r_.ops.resize(static_cast<size_t>(g.num_ops()));
    // Per device and program position: seconds spent there (compute then communication).
    op_comm_.assign(static_cast<size_t>(g.num_ops()) + 1, std::vector<double>(static_cast<size_t>(p.devices), 0));
  }

  CostReport run() {
    std::vector<const ParallelConfig *> config(static_cast<size_t>(g_.num_ops()));
    for (const auto &o : p_.ops) config[*g_.find_op(o.name)] = &o.config;
    // First: with a cache, the replay leaves every op's descriptions there, for its config in this plan.
    Communication comm = derive_communication(g_, p_, cache_);
    for (OpId o = 0; o < g_.num_ops(); ++o) {
      const Op &op = g_.op(o);
      OpCost &oc = r_.ops[o];
      oc.op = o;
      const ParallelConfig &c = *config[o];
      std::vector<Work> works;
      std::vector<describe::Description> described;
      if (!cache_) described = describe::describe(g_, op);
      const std::vector<describe::Description> &descs = cache_ ? cache_->descs[static_cast<size_t>(o)] : described;
      if (cache_ && !cache_->work[static_cast<size_t>(o)].empty()) {
        for (const auto &[flops, bytes] : cache_->work[static_cast<size_t>(o)]) works.push_back({flops, bytes});
      } else {
        for (size_t i = 0; i < c.devices.size(); ++i)
          works.push_back(device_work(g_, op, descs, c, static_cast<int64_t>(i)));
        if (cache_)
          for (const Work &w : works) cache_->work[static_cast<size_t>(o)].emplace_back(w.flops, w.bytes);
      }
      SharePrices prices(g_, op, descs, c, t_, profile_);
      for (size_t i = 0; i < c.devices.size(); ++i) {
        const Work &w = works[i];
        SharePrices::Source source{};
        double secs = prices.seconds(static_cast<int64_t>(i), [&] { return w; }, source);
        if (profile_) ++(source == SharePrices::Source::measured ? r_.measured_shares : r_.roofline_shares);
        r_.calibrated_shares += source == SharePrices::Source::calibrated;
        DeviceCost &d = r_.devices[c.devices[i]];
        d.flops += w.flops;
        d.compute_seconds += secs;
        oc.flops += w.flops;
        oc.compute_seconds = std::max(oc.compute_seconds, secs);
      }
    }
    for (const CommEvent &e : comm.events) price(e);
    for (const LocalStatement &s : comm.local) {
      bool measured = false;
      double secs = local_seconds(s, t_, profile_, &measured);
      if (profile_) ++(measured ? r_.measured_local : r_.modelled_local);
      DeviceCost &d = r_.devices[s.rank];
      if (s.kind == LocalStatement::Kind::data) {
        d.data_seconds += secs;
        continue;
      }
      d.copy_seconds += secs;
    }
    for (size_t pos = 0; pos < op_comm_.size(); ++pos)
      for (size_t r = 0; r < op_comm_[pos].size(); ++r) {
        if (pos < r_.ops.size())
          r_.ops[pos].comm_seconds = std::max(r_.ops[pos].comm_seconds, op_comm_[pos][r]);
        else
          r_.end_comm_seconds = std::max(r_.end_comm_seconds, op_comm_[pos][r]);
      }
    memory(comm);
    std::vector<int64_t> statements = device_statements(p_, comm);
    for (size_t r = 0; r < r_.devices.size(); ++r) {
      DeviceCost &d = r_.devices[r];
      d.statements = statements[r];
      if (profile_) d.gap_seconds = profile_->statement_gap * static_cast<double>(d.statements);
      d.step_seconds = d.compute_seconds + d.comm_seconds + d.copy_seconds + d.data_seconds + d.gap_seconds;
      r_.flops += d.flops;
      r_.comm_bytes += d.comm_bytes;
      for (size_t l = 0; l < d.comm_bytes_per_level.size(); ++l) r_.comm_bytes_per_level[l] += d.comm_bytes_per_level[l];
      r_.peak_memory_bytes = std::max(r_.peak_memory_bytes, d.peak_memory_bytes);
      r_.predicted_step_seconds = std::max(r_.predicted_step_seconds, d.step_seconds);
    }
    return std::move(r_);
  }

 private:
  /** Charges `rank` `bytes` sent over `level` and `secs` of communication at the event's position. */
  void charge(const CommEvent &e, int rank, int level, int64_t bytes, double secs) {
    size_t pos = e.op == kNoOp ? r_.ops.size() : static_cast<size_t>(e.op);
    DeviceCost &d = r_.devices[rank];
    d.comm_bytes += bytes;
    if (level >= 0) d.comm_bytes_per_level[level] += bytes;
    d.comm_seconds += secs;
    op_comm_[pos][rank] += secs;
    if (e.op == kNoOp)
      r_.end_comm_bytes += bytes;
    else
      r_.ops[e.op].comm_bytes += bytes;
  }

  void price(const CommEvent &e) {
    if (e.kind == CommEvent::Kind::send_recv) {
      // Per rank: sends and receives proceed at once (full duplex), each transfer priced by comm_event_seconds.
      std::map<int, double> send_s, recv_s;
      std::map<int, std::map<int, int64_t>> sent;  // rank -> level -> bytes
      CommSeconds cs = comm_event_seconds(e, t_, profile_);
      for (size_t i = 0; i < e.transfers.size(); ++i) {
        const auto &tr = e.transfers[i];
        int l = t_.level_between(tr.src, tr.dst);
        double s = cs.transfers[i];
        send_s[tr.src] += s;
        recv_s[tr.dst] += s;
        sent[tr.src][l] += tr.bytes;
      }
      std::map<int, bool> ranks;
      for (const auto &tr : e.transfers) ranks[tr.src] = ranks[tr.dst] = true;
      if (profile_) ++(cs.measured ? r_.measured_comm : r_.modelled_comm);
      for (const auto &[r, unused] : ranks) {
        double secs = std::max(send_s[r], recv_s[r]);
        bool first = true;
        for (const auto &[l, b] : sent[r]) {
          charge(e, r, l, b, first ? secs : 0);
          first = false;
        }
        if (first) charge(e, r, -1, 0, secs);
      }
      return;
    }
    int p = static_cast<int>(e.group.size());
    if (p < 2) return;
    int l = std::max(t_.level_spanned(e.group), 0);
    int64_t n = e.count * e.elem_bytes;
    int64_t sent = 0;
    switch (e.kind) {
      case CommEvent::Kind::all_reduce:
      case CommEvent::Kind::sync: sent = 2 * (p - 1) * n / p; break;
      case CommEvent::Kind::all_gather:
      case CommEvent::Kind::reduce_scatter:  // n is one block; the whole is p blocks
      case CommEvent::Kind::all_to_all: sent = (p - 1) * n; break;
      case CommEvent::Kind::send_recv: break;
    }
    CommSeconds cs = comm_event_seconds(e, t_, profile_);
    double secs = cs.collective;
    if (profile_) ++(cs.measured ? r_.measured_comm : r_.modelled_comm);
    for (int r : e.group) charge(e, r, l, sent, secs);
  }

  /** Live bytes per device over program positions 0..ops (the end), by difference arrays. */
  void memory(const Communication &comm) {
    int end = 2 * g_.num_ops();  // two positions per op (StepBuffer)
    std::vector<std::vector<int64_t>> delta(r_.devices.size(), std::vector<int64_t>(static_cast<size_t>(end) + 2, 0));
    auto live = [&](int rank, int from, int to, int64_t bytes) {
      delta[rank][from] += bytes;
      delta[rank][std::max(from, to) + 1] -= bytes;
    };
    for (const auto &te : p_.tensors) {
      const Tensor &tensor = g_.tensor(*g_.find_tensor(te.name));
      if (tensor.producer != kNoOp || is_data(tensor)) continue;
      for (size_t i = 0; i < te.sharding.devices.size(); ++i) {
        int r = te.sharding.devices[i];
        int64_t b = std::max<int64_t>(box_volume(shard_region(tensor.shape, te.sharding, static_cast<int64_t>(i))), 1) *
                    dtype_size(tensor.dtype);
        r_.devices[r].persistent_bytes += b;
        live(r, 0, end, b);
      }
    }
    for (const StepBuffer &b : comm.buffers) live(b.rank, b.at, b.until, b.bytes);
    for (size_t r = 0; r < r_.devices.size(); ++r) {
      int64_t cur = 0, peak = 0;
      for (int pos = 0; pos <= end; ++pos) peak = std::max(peak, cur += delta[r][pos]);
      r_.devices[r].peak_memory_bytes = peak;
    }
  }

  const Graph &g_;
  const Plan &p_;
  const Topology &t_;
  const Profile *profile_;
  CommCache *cache_;
  CostReport r_;
  std::vector<std::vector<double>> op_comm_;
};

}  // namespace

std::vector<double> op_compute_seconds(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                       const ParallelConfig &config, const Topology &t, const Profile *profile) {
  std::vector<double> out;
  SharePrices prices(g, op, descs, config, t, profile);
  for (size_t i = 0; i < config.devices.size(); ++i) {
    int64_t index = static_cast<int64_t>(i);
    SharePrices::Source source{};
    out.push_back(prices.seconds(index, [&] { return device_work(g, op, descs, config, index); }, source));
  }
  return out;
}

double local_seconds(const LocalStatement &s, const Topology &t, const Profile *profile, bool *measured) {
  double bytes = static_cast<double>(s.bytes);
  const char *kind = s.kind == LocalStatement::Kind::data ? "data" : "copy";
  if (profile)
    if (auto m = profile->statement_seconds(kind, bytes, s.rank)) {
      if (measured) *measured = true;
      return *m;
    }
  if (s.kind == LocalStatement::Kind::copy) return 2 * bytes / t.device.memory_bandwidth;
  return t.device.read_latency + static_cast<double>(s.rows) * t.device.read_row_latency +
         bytes / t.device.memory_bandwidth;
}

CommSeconds comm_event_seconds(const CommEvent &e, const Topology &t, const Profile *profile) {
  CommSeconds out = comm_event_seconds_modelled(e, t);
  if (!profile) return out;
  if (e.kind == CommEvent::Kind::send_recv) {
    std::set<int> exchanging;
    for (const auto &tr : e.transfers) exchanging.insert({tr.src, tr.dst});
    for (size_t i = 0; i < e.transfers.size(); ++i)
      if (auto m = profile->collective_seconds("send_recv", static_cast<int>(exchanging.size()),
                                               static_cast<double>(e.transfers[i].bytes))) {
        out.transfers[i] = *m;
        out.measured = true;
      }
    return out;
  }
  int p = static_cast<int>(e.group.size());
  if (p < 2) return out;
  const char *kind = e.kind == CommEvent::Kind::sync ? "all_reduce" : comm_kind_name(e.kind).data();
  if (auto m = profile->collective_seconds(kind, p, static_cast<double>(e.count * e.elem_bytes))) {
    out.collective = *m;
    out.measured = true;
  }
  return out;
}

std::vector<int> event_ranks(const CommEvent &e) {
  std::vector<int> ranks = e.group;
  for (const CommEvent::Transfer &x : e.transfers) ranks.insert(ranks.end(), {x.src, x.dst});
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::vector<int64_t> device_statements(const Plan &p, const Communication &comm) {
  std::vector<int64_t> n(static_cast<size_t>(p.devices), 0);
  for (const OpEntry &o : p.ops)
    for (int d : o.config.devices) ++n[static_cast<size_t>(d)];
  for (const CommEvent &e : comm.events)
    for (int r : event_ranks(e)) ++n[static_cast<size_t>(r)];
  for (const LocalStatement &s : comm.local) ++n[static_cast<size_t>(s.rank)];
  return n;
}

CostReport estimate_cost(const Graph &g, const Plan &p, const Topology &t, const Profile *profile, CommCache *cache) {
  validate_plan(g, p, cache ? &cache->valid : nullptr);
  return Estimator(g, p, t, profile, cache).run();
}

}  // namespace cleave::plan
