// The frontier-tracking algorithm on an abstract cost graph (frontier_solve.h).
#include "planner/search/frontier_solve.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <span>
#include <sstream>

#include "ir/error.h"

namespace cleave::plan::ft {

namespace {

struct Ranked {
  double time = 0, memory = 0;
  size_t index = 0;
};

/** Keeps at most `max_points` (>= 2) of the points `v` (least time first) spread evenly by rank, both ends kept. */
template <class T>
void spread_evenly(std::vector<T> &v, size_t max_points) {
  size_t m = v.size(), k = std::min(m, std::max<size_t>(max_points, 2));
  if (k == m) return;
  size_t kept = 0;
  for (size_t j = 0; j < k; ++j) {
    size_t pick = (j * (m - 1) + (k - 1) / 2) / (k - 1);  // strictly ascending in j (k <= m): over read slots
    v[kept++] = v[pick];
  }
  v.resize(kept);
}

/** pareto_keep over the `n` points `at(i)` (anything with .time and .memory), into `out`; `order` is scratch kept by
 *  the caller (this runs millions of times in a search: no allocation once the buffers have grown). */
template <class At>
void pareto_indices(size_t n, At at, size_t max_points, std::vector<Ranked> &order, std::vector<size_t> &out) {
  out.clear();
  if (n <= 1) {
    if (n == 1) out.push_back(0);
    return;
  }
  // The first point of the order (least time, then memory; the index breaks ties, as a stable sort would) and the
  // point of least memory (then time, index) are kept; any other point kept has less memory than the first and less
  // time than the second: only those are sorted (the rest lose to one of the two in the sweep below).
  auto by_time = [](const Ranked &a, const Ranked &b) {
    if (a.time != b.time) return a.time < b.time;
    if (a.memory != b.memory) return a.memory < b.memory;
    return a.index < b.index;
  };
  auto by_memory = [](const Ranked &a, const Ranked &b) {
    if (a.memory != b.memory) return a.memory < b.memory;
    if (a.time != b.time) return a.time < b.time;
    return a.index < b.index;
  };
  Ranked fastest{at(0).time, at(0).memory, 0}, smallest = fastest;
  for (size_t i = 1; i < n; ++i) {
    Ranked r{at(i).time, at(i).memory, i};
    if (by_time(r, fastest)) fastest = r;
    if (by_memory(r, smallest)) smallest = r;
  }
  order.clear();
  order.push_back(fastest);
  if (smallest.index != fastest.index) order.push_back(smallest);
  for (size_t i = 0; i < n; ++i) {
    const auto &p = at(i);
    if (p.memory < fastest.memory && p.time < smallest.time) order.push_back({p.time, p.memory, i});
  }
  std::sort(order.begin(), order.end(), by_time);
  double best_memory = std::numeric_limits<double>::infinity();
  for (const Ranked &r : order)
    if (out.empty() || r.memory < best_memory) {  // the first is kept even at infinite memory
      out.push_back(r.index);
      best_memory = r.memory;
    }
  spread_evenly(out, max_points);
}

}  // namespace

std::vector<size_t> pareto_keep(const std::vector<Cost> &points, size_t max_points) {
  std::vector<Ranked> order;
  std::vector<size_t> out;
  pareto_indices(points.size(), [&](size_t i) -> const Cost & { return points[i]; }, max_points, order, out);
  return out;
}

namespace {

/** A point of a set and how it was reached: `deriv` indexes Solver::arena_ (-1: nothing chosen yet). */
struct Pt {
  double time = 0, memory = 0;
  int deriv = -1;
};

/** A set's points: a node's per config, the global one. */
using Set = std::vector<Pt>;
/** A set's points, read-only, wherever they are stored (a Set, or a SetTable's). */
using Span = std::span<const Pt>;

/** An edge's sets, one per config pair, in one buffer (there are millions: the TensorOpt Transformer at 16 devices
 *  starts with 3.3 million, one point each): set i is points_[start_[i], start_[i + 1]). Built in order. */
class SetTable {
 public:
  size_t size() const { return start_.size() - 1; }
  Span operator[](size_t i) const { return Span(points_.data() + start_[i], start_[i + 1] - start_[i]); }
  void reserve(size_t sets) {
    start_.reserve(sets + 1);
    points_.reserve(sets);
  }
  void add(const Pt &p) {
    points_.push_back(p);
    close();
  }
  /** A set of the points of [first, last), as `at` makes them. */
  template <class It, class At>
  void add(It first, It last, At at) {
    for (; first != last; ++first) points_.push_back(at(*first));
    close();
  }

 private:
  /** Ends the set being added. */
  void close() {
    CLEAVE_CHECK(points_.size() <= std::numeric_limits<uint32_t>::max(), "FT edge set table overflows");
    start_.push_back(static_cast<uint32_t>(points_.size()));
  }

  std::vector<Pt> points_;
  std::vector<uint32_t> start_{0};
};

/** A derivation: the sum of `left` and `right` (either -1: nothing), and with node >= 0 `config` picked for `node`. */
struct Deriv {
  int node = -1, config = 0, left = -1, right = -1;
};

/** A point not yet materialised: its derivation is (pick node/config of) the sum of derivations a and b. */
struct Cand {
  double time = 0, memory = 0;
  int a = -1, b = -1;
  int node = -1, config = 0;
};

/** The Pareto points of candidates offered one at a time: pareto_keep's rule (least time first; of equal points the
 *  first offered) without storing the dominated ones. A search offers each set's candidates once (the TensorOpt
 *  Transformer at 16 devices: 150 million), and most are dominated on arrival. */
class Front {
 public:
  void clear() { points_.clear(); }
  const std::vector<Cand> &points() const { return points_; }
  std::vector<Cand> &points() { return points_; }

  void offer(const Cand &c) {
    // points_: time strictly ascending, memory strictly descending. The last point no slower than c has the least
    // memory of all points no slower than c: c is dominated (or equal to an earlier one) iff it has no more memory.
    auto after = std::upper_bound(points_.begin(), points_.end(), c.time,
                                  [](double t, const Cand &p) { return t < p.time; });
    if (after != points_.begin() && std::prev(after)->memory <= c.memory) return;
    // c dominates the points no faster than it that have no less memory: a run from the first point no faster.
    auto first = std::lower_bound(points_.begin(), after, c.time, [](const Cand &p, double t) { return p.time < t; });
    auto last = first;
    while (last != points_.end() && last->memory >= c.memory) ++last;
    if (first == last) {
      points_.insert(first, c);
    } else {
      *first = c;
      points_.erase(first + 1, last);
    }
  }

 private:
  std::vector<Cand> points_;
};

class Solver {
 public:
  Solver(const CostGraph &g, const SolveOptions &o, SolveStats &stats) : g_(g), o_(o), stats_(stats) {
    size_t n = g.nodes.size();
    node_.resize(n);
    alive_.assign(n, true);
    adj_.resize(n);
    for (size_t v = 0; v < n; ++v) {
      CLEAVE_CHECK(!g.nodes[v].empty(), "cost graph node ", v, " has no config");
      for (const Cost &c : g.nodes[v]) node_[v].push_back(Set{Pt{c.time, c.memory, -1}});
    }
    for (const CostGraph::Edge &e : g.edges) {
      CLEAVE_CHECK(e.a != e.b && e.cost.size() == static_cast<size_t>(g.configs(e.a)) * g.configs(e.b),
                   "malformed cost graph edge");
      SetTable sets;
      sets.reserve(e.cost.size());
      for (const Cost &c : e.cost) sets.add(Pt{c.time, c.memory, -1});
      add_edge(e.a, e.b, std::move(sets));
    }
    global_ = Set{Pt{}};
    CLEAVE_CHECK(o.guide.empty() || o.guide.size() == n, "guide assignment of the wrong size");
    for (size_t v = 0; v < o.guide.size(); ++v)
      CLEAVE_CHECK(o.guide[v] >= 0 && o.guide[v] < configs(static_cast<int>(v)), "guide config out of range");
  }

  std::vector<FrontierPoint> run() {
    for (;;) {
      if (reduce_once()) continue;
      std::vector<int> rest = remaining();
      if (rest.empty()) break;
      if (rest.size() <= o_.ldp_max_nodes) {
        ldp(rest);
        break;
      }
      heuristic(rest);
    }
    std::vector<FrontierPoint> out;
    for (const Pt &p : global_) {
      FrontierPoint f;
      f.cost = {p.time, p.memory};
      f.choice.assign(g_.nodes.size(), -1);
      reconstruct(p.deriv, f.choice);
      for (int c : f.choice) CLEAVE_CHECK(c >= 0, "frontier point misses a node's config");
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  struct EdgeState {
    int a = 0, b = 0;
    SetTable cost;  // [ca * configs(b) + cb]
  };

  int configs(int v) const { return static_cast<int>(node_[static_cast<size_t>(v)].size()); }

  /** The set of edge `e` with node `v` under cv and its other end under cn. */
  Span edge_set(int e, int v, int cv, int cn) const {
    const EdgeState &s = edges_[static_cast<size_t>(e)];
    return s.a == v ? s.cost[static_cast<size_t>(cv * configs(s.b) + cn)]
                    : s.cost[static_cast<size_t>(cn * configs(s.b) + cv)];
  }

  /** One derivation for a candidate (none when it adds nothing to one of its parts). */
  int materialise(const Cand &c) {
    if (c.node < 0 && (c.a < 0 || c.b < 0)) return c.a < 0 ? c.b : c.a;
    arena_.push_back({c.node, c.config, c.a, c.b});
    return static_cast<int>(arena_.size()) - 1;
  }

  /** A front's points as a set: at most `limit` of them (0: max_points) spread evenly, their derivations
   *  materialised. */
  Set finish(Front &f, size_t limit = 0) {
    std::vector<Cand> &kept = f.points();
    spread_evenly(kept, limit ? limit : o_.max_points);
    Set out;
    out.reserve(kept.size());
    for (const Cand &c : kept) out.push_back({c.time, c.memory, materialise(c)});
    return out;
  }

  /** finish's set (max_points) added to `out`. */
  void finish(Front &f, SetTable &out) {
    std::vector<Cand> &kept = f.points();
    spread_evenly(kept, o_.max_points);
    out.add(kept.begin(), kept.end(), [&](const Cand &c) { return Pt{c.time, c.memory, materialise(c)}; });
  }

  /** Offers the candidates of a + b (every pair), optionally picking (node, config). */
  static void add_sum(Span a, Span b, Front &out, int node = -1, int config = 0) {
    for (const Pt &x : a)
      for (const Pt &y : b) out.offer({x.time + y.time, x.memory + y.memory, x.deriv, y.deriv, node, config});
  }

  Set sum(Span a, Span b, size_t limit = 0) {
    if (a.size() == 1 && b.size() == 1)  // one point: nothing to prune
      return Set{{a[0].time + b[0].time, a[0].memory + b[0].memory, materialise({0, 0, a[0].deriv, b[0].deriv})}};
    sum_.clear();
    add_sum(a, b, sum_);
    return finish(sum_, limit);
  }

  /** sum's set (max_points) added to `out`. */
  void sum(Span a, Span b, SetTable &out) {
    if (a.size() == 1 && b.size() == 1) {
      out.add(Pt{a[0].time + b[0].time, a[0].memory + b[0].memory, materialise({0, 0, a[0].deriv, b[0].deriv})});
      return;
    }
    sum_.clear();
    add_sum(a, b, sum_);
    finish(sum_, out);
  }

  /** Adds a folded sub-graph's set to the global one, which keeps up to final_points. */
  void add_global(const Set &s) { global_ = sum(global_, s, std::max(o_.final_points, o_.max_points)); }

  void add_edge(int a, int b, SetTable sets) {
    auto it = adj_[static_cast<size_t>(a)].find(b);
    if (it == adj_[static_cast<size_t>(a)].end()) {
      int e = static_cast<int>(edges_.size());
      edges_.push_back({a, b, std::move(sets)});
      adj_[static_cast<size_t>(a)][b] = e;
      adj_[static_cast<size_t>(b)][a] = e;
      return;
    }
    // Edge elimination: the existing edge and this one become one.
    ++stats_.edge;
    EdgeState &s = edges_[static_cast<size_t>(it->second)];
    SetTable summed;
    summed.reserve(s.cost.size());
    for (int cx = 0; cx < configs(s.a); ++cx)  // in the existing edge's order
      for (int cy = 0; cy < configs(s.b); ++cy) {
        size_t theirs = static_cast<size_t>(cx * configs(s.b) + cy);
        size_t mine = s.a == a ? theirs : static_cast<size_t>(cy * configs(b) + cx);
        sum(s.cost[theirs], sets[mine], summed);
      }
    s.cost = std::move(summed);
  }

  void remove_edge(int a, int b) {
    adj_[static_cast<size_t>(a)].erase(b);
    adj_[static_cast<size_t>(b)].erase(a);
  }

  /** One elimination: of the lowest-id node of degree 0 or 1 (branch: no new edge), else of degree 2 (node);
   *  false when none applies. */
  bool reduce_once() {
    for (size_t most : {size_t{1}, size_t{2}})
      for (size_t v = 0; v < alive_.size(); ++v) {
        if (!alive_[v] || adj_[v].size() > most) continue;
        if (adj_[v].empty())
          fold_isolated(static_cast<int>(v));
        else if (adj_[v].size() == 1)
          branch(static_cast<int>(v));
        else
          node(static_cast<int>(v));
        return true;
      }
    return false;
  }

  void fold_isolated(int v) {
    Front &c = front_;
    c.clear();
    for (int cv = 0; cv < configs(v); ++cv)
      for (const Pt &p : node_[static_cast<size_t>(v)][static_cast<size_t>(cv)])
        c.offer({p.time, p.memory, p.deriv, -1, v, cv});
    add_global(finish(c));
    alive_[static_cast<size_t>(v)] = false;
  }

  void branch(int v) {
    ++stats_.branch;
    auto [u, e] = *adj_[static_cast<size_t>(v)].begin();
    Front &c = front_;
    for (int cu = 0; cu < configs(u); ++cu) {
      c.clear();
      for (int cv = 0; cv < configs(v); ++cv)
        add_sum(edge_set(e, u, cu, cv), node_[static_cast<size_t>(v)][static_cast<size_t>(cv)], c, v, cv);
      Set &nu = node_[static_cast<size_t>(u)][static_cast<size_t>(cu)];
      nu = sum(nu, finish(c));
    }
    remove_edge(u, v);
    alive_[static_cast<size_t>(v)] = false;
  }

  void node(int v) {
    ++stats_.node;
    auto it = adj_[static_cast<size_t>(v)].begin();
    auto [u, eu] = *it++;
    auto [w, ew] = *it;
    // x[cu * configs(v) + cv] = E(u,v) + N(v): shared by every cw.
    SetTable x;
    x.reserve(static_cast<size_t>(configs(u)) * static_cast<size_t>(configs(v)));
    for (int cu = 0; cu < configs(u); ++cu)
      for (int cv = 0; cv < configs(v); ++cv)
        sum(edge_set(eu, u, cu, cv), node_[static_cast<size_t>(v)][static_cast<size_t>(cv)], x);
    SetTable sets;
    sets.reserve(static_cast<size_t>(configs(u)) * static_cast<size_t>(configs(w)));
    Front &c = front_;
    for (int cu = 0; cu < configs(u); ++cu)
      for (int cw = 0; cw < configs(w); ++cw) {
        c.clear();
        for (int cv = 0; cv < configs(v); ++cv)
          add_sum(x[static_cast<size_t>(cu * configs(v) + cv)], edge_set(ew, w, cw, cv), c, v, cv);
        finish(c, sets);
      }
    remove_edge(u, v);
    remove_edge(v, w);
    alive_[static_cast<size_t>(v)] = false;
    add_edge(u, w, std::move(sets));
  }

  static double least_time(Span s) {
    double t = std::numeric_limits<double>::infinity();
    for (const Pt &p : s) t = std::min(t, p.time);
    return t;
  }

  static double least_memory(Span s) {
    double m = std::numeric_limits<double>::infinity();
    for (const Pt &p : s) m = std::min(m, p.memory);
    return m;
  }

  void heuristic(const std::vector<int> &rest) {
    ++stats_.heuristic;
    int v = rest.front();
    for (int r : rest)
      if (adj_[static_cast<size_t>(r)].size() > adj_[static_cast<size_t>(v)].size()) v = r;
    int best = o_.guide.empty() ? 0 : o_.guide[static_cast<size_t>(v)];
    double best_bound = std::numeric_limits<double>::infinity();
    for (int cv = 0; cv < configs(v) && o_.guide.empty(); ++cv) {
      double bound = least_time(node_[static_cast<size_t>(v)][static_cast<size_t>(cv)]);
      for (const auto &[n, e] : adj_[static_cast<size_t>(v)]) {
        double m = std::numeric_limits<double>::infinity();
        for (int cn = 0; cn < configs(n); ++cn)
          m = std::min(m, least_time(edge_set(e, v, cv, cn)) +
                              least_time(node_[static_cast<size_t>(n)][static_cast<size_t>(cn)]));
        bound += m;
      }
      if (bound < best_bound) {
        best_bound = bound;
        best = cv;
      }
    }
    std::vector<std::pair<int, int>> nbrs(adj_[static_cast<size_t>(v)].begin(), adj_[static_cast<size_t>(v)].end());
    for (const auto &[n, e] : nbrs) {
      for (int cn = 0; cn < configs(n); ++cn) {
        Set &s = node_[static_cast<size_t>(n)][static_cast<size_t>(cn)];
        s = sum(s, edge_set(e, v, best, cn));
      }
      remove_edge(v, n);
    }
    // v keeps its one config: fold it in with that pick only.
    Front &c = front_;
    c.clear();
    for (const Pt &p : node_[static_cast<size_t>(v)][static_cast<size_t>(best)])
      c.offer({p.time, p.memory, p.deriv, -1, v, best});
    add_global(finish(c));
    alive_[static_cast<size_t>(v)] = false;
  }

  void ldp(const std::vector<int> &order) {
    std::map<int, size_t> position;
    for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
    // The last position at which each node has a neighbour: it leaves the frontier after that.
    std::vector<size_t> last(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      last[i] = i;
      for (const auto &[n, e] : adj_[static_cast<size_t>(order[i])]) last[i] = std::max(last[i], position.at(n));
    }
    std::vector<int> frontier;  // nodes, in processing order
    std::map<std::vector<int>, Set> states{{{}, Set{Pt{}}}};
    for (size_t i = 0; i < order.size(); ++i) {
      ++stats_.ldp_nodes;
      int v = order[i];
      std::vector<int> next;
      std::vector<size_t> keep;  // indices into frontier kept in next
      for (size_t k = 0; k < frontier.size(); ++k)
        if (last[position.at(frontier[k])] > i) {
          next.push_back(frontier[k]);
          keep.push_back(k);
        }
      bool v_stays = last[i] > i;
      if (v_stays) next.push_back(v);
      std::map<std::vector<int>, Front> merged;
      for (const auto &[key, set] : states)
        for (int cv = 0; cv < configs(v); ++cv) {
          Set s = sum(set, node_[static_cast<size_t>(v)][static_cast<size_t>(cv)]);
          for (size_t k = 0; k < frontier.size(); ++k) {
            auto it = adj_[static_cast<size_t>(v)].find(frontier[k]);
            if (it != adj_[static_cast<size_t>(v)].end()) s = sum(s, edge_set(it->second, v, cv, key[k]));
          }
          std::vector<int> nk;
          for (size_t k : keep) nk.push_back(key[k]);
          if (v_stays) nk.push_back(cv);
          Front &c = merged[nk];
          for (const Pt &p : s) c.offer({p.time, p.memory, p.deriv, -1, v, cv});
        }
      std::vector<std::pair<std::vector<int>, Set>> all;
      for (auto &[key, c] : merged) all.emplace_back(key, finish(c));
      states.clear();
      if (all.size() > o_.max_states) {
        // Both ends of the frontier: states taken alternately by least time and by least memory.
        std::vector<size_t> by_time(all.size()), by_memory(all.size());
        std::iota(by_time.begin(), by_time.end(), size_t{0});
        std::iota(by_memory.begin(), by_memory.end(), size_t{0});
        std::stable_sort(by_time.begin(), by_time.end(),
                         [&](size_t x, size_t y) { return least_time(all[x].second) < least_time(all[y].second); });
        std::stable_sort(by_memory.begin(), by_memory.end(),
                         [&](size_t x, size_t y) { return least_memory(all[x].second) < least_memory(all[y].second); });
        std::vector<char> taken(all.size(), 0);
        size_t count = 0;
        for (size_t i = 0; count < o_.max_states; ++i)
          for (const std::vector<size_t> *order : {&by_time, &by_memory}) {
            size_t k = (*order)[i];
            if (count < o_.max_states && !taken[k]) {
              taken[k] = 1;
              ++count;
            }
          }
        stats_.ldp_states_dropped += static_cast<int64_t>(all.size() - o_.max_states);
        for (size_t k = 0; k < all.size(); ++k)
          if (taken[k]) states.emplace(std::move(all[k].first), std::move(all[k].second));
      } else {
        for (auto &[key, s] : all) states.emplace(key, std::move(s));
      }
      frontier = std::move(next);
    }
    Front &c = front_;
    c.clear();
    for (const auto &[key, s] : states)
      for (const Pt &p : s) c.offer({p.time, p.memory, p.deriv, -1, -1, 0});
    add_global(finish(c, std::max(o_.final_points, o_.max_points)));
    for (int v : order) {
      alive_[static_cast<size_t>(v)] = false;
      adj_[static_cast<size_t>(v)].clear();
    }
  }

  std::vector<int> remaining() const {
    std::vector<int> r;
    for (size_t v = 0; v < alive_.size(); ++v)
      if (alive_[v]) r.push_back(static_cast<int>(v));
    return r;
  }

  void reconstruct(int d, std::vector<int> &choice) const {
    std::vector<int> todo{d};
    while (!todo.empty()) {
      int x = todo.back();
      todo.pop_back();
      if (x < 0) continue;
      const Deriv &r = arena_[static_cast<size_t>(x)];
      if (r.node >= 0) choice[static_cast<size_t>(r.node)] = r.config;
      todo.push_back(r.left);
      todo.push_back(r.right);
    }
  }

  const CostGraph &g_;
  const SolveOptions &o_;
  SolveStats &stats_;
  std::vector<std::vector<Set>> node_;
  std::vector<bool> alive_;
  std::vector<std::map<int, int>> adj_;  // neighbour -> edge
  std::vector<EdgeState> edges_;
  // A deque: it grows to about ten million derivations (the TensorOpt Transformer at 16 devices: 11.5 million), which
  // a vector would copy at every doubling.
  std::deque<Deriv> arena_;
  Set global_;
  Front front_;  // the eliminations' scratch
  Front sum_;    // sum's
};

Cost parse_cost(const std::string &word, const std::string &where) {
  size_t slash = word.find('/');
  try {
    size_t used = 0;
    if (slash == std::string::npos) throw std::invalid_argument(word);
    double t = std::stod(word.substr(0, slash), &used);
    if (used != slash) throw std::invalid_argument(word);
    double m = std::stod(word.substr(slash + 1), &used);
    if (used != word.size() - slash - 1) throw std::invalid_argument(word);
    return {t, m};
  } catch (const std::exception &) {
    CLEAVE_USER_ERROR(where, ": expected TIME/MEMORY, got \"", word, "\"");
  }
}

}  // namespace

CostGraph parse_cost_graph(const std::string &text, const std::string &source) {
  CostGraph g;
  std::map<std::string, int> ids;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string where = source + ":" + std::to_string(n);
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind)) continue;
    if (kind == "node") {
      std::string name, w;
      if (!(words >> name)) CLEAVE_USER_ERROR(where, ": node without a name");
      if (!ids.emplace(name, static_cast<int>(g.nodes.size())).second)
        CLEAVE_USER_ERROR(where, ": node \"", name, "\" defined twice");
      g.names.push_back(name);
      g.nodes.emplace_back();
      while (words >> w) g.nodes.back().push_back(parse_cost(w, where));
      if (g.nodes.back().empty()) CLEAVE_USER_ERROR(where, ": node \"", name, "\" has no config");
    } else if (kind == "edge") {
      std::string a, b, w;
      if (!(words >> a >> b)) CLEAVE_USER_ERROR(where, ": edge needs two node names");
      for (const std::string *s : {&a, &b})
        if (!ids.count(*s)) CLEAVE_USER_ERROR(where, ": unknown node \"", *s, "\"");
      if (a == b) CLEAVE_USER_ERROR(where, ": edge from \"", a, "\" to itself");
      CostGraph::Edge e{ids[a], ids[b], {}};
      while (words >> w) e.cost.push_back(parse_cost(w, where));
      size_t want = static_cast<size_t>(g.configs(e.a)) * g.configs(e.b);
      if (e.cost.size() != want)
        CLEAVE_USER_ERROR(where, ": edge ", a, "-", b, " has ", e.cost.size(), " costs, want ", want);
      g.edges.push_back(std::move(e));
    } else {
      CLEAVE_USER_ERROR(where, ": expected node or edge, got \"", kind, "\"");
    }
  }
  return g;
}

Cost assignment_cost(const CostGraph &g, const std::vector<int> &choice) {
  Cost c;
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    const Cost &x = g.nodes[v][static_cast<size_t>(choice[v])];
    c.time += x.time;
    c.memory += x.memory;
  }
  for (const CostGraph::Edge &e : g.edges) {
    const Cost &x = e.cost[static_cast<size_t>(choice[static_cast<size_t>(e.a)] * g.configs(e.b) +
                                               choice[static_cast<size_t>(e.b)])];
    c.time += x.time;
    c.memory += x.memory;
  }
  return c;
}

std::vector<FrontierPoint> solve_frontier(const CostGraph &g, const SolveOptions &options, SolveStats *stats) {
  SolveStats local;
  return Solver(g, options, stats ? *stats : local).run();
}

std::vector<FrontierPoint> brute_force_frontier(const CostGraph &g) {
  std::vector<FrontierPoint> all;
  std::vector<int> choice(g.nodes.size(), 0);
  for (;;) {
    all.push_back({assignment_cost(g, choice), choice});
    size_t v = 0;
    while (v < choice.size() && ++choice[v] == g.configs(static_cast<int>(v))) choice[v++] = 0;
    if (v == choice.size()) break;
  }
  std::vector<Cost> costs;
  for (const FrontierPoint &p : all) costs.push_back(p.cost);
  std::vector<FrontierPoint> out;
  for (size_t i : pareto_keep(costs, std::numeric_limits<size_t>::max())) out.push_back(all[i]);
  return out;
}

}  // namespace cleave::plan::ft
