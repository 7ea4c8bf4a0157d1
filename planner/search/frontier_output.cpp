// The frontier's table and SVG plot (frontier.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "planner/search/frontier.h"

namespace cleave::plan {
namespace {

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string sci(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6e", x);
  return buf;
}

}  // namespace

std::string frontier_table(const FrontierResult &r, const std::string &topology) {
  std::ostringstream out;
  out << "# frontier devices=" << r.devices << " topology=" << topology << " ops=" << r.ops << " configs=" << r.configs
      << " edges=" << r.edges << " candidates=" << r.candidates << "\n";
  out << "# eliminations: edge=" << r.stats.edge << " node=" << r.stats.node << " branch=" << r.stats.branch
      << " heuristic=" << r.stats.heuristic << " ldp_nodes=" << r.stats.ldp_nodes
      << " ldp_states_dropped=" << r.stats.ldp_states_dropped << "\n";
  out << "# point step_seconds peak_memory_bytes ft_seconds ft_memory_bytes split_ops replicated_ops\n";
  for (size_t i = 0; i < r.frontier.size(); ++i) {
    const FrontierPlan &f = r.frontier[i];
    int split = 0;
    for (const OpEntry &e : f.plan.ops)
      split += std::any_of(e.config.vars.begin(), e.config.vars.end(), [](const std::string &v) { return !v.empty(); });
    out << i << " " << sci(f.step_seconds) << " " << f.peak_memory_bytes << " " << sci(f.model.time) << " "
        << static_cast<int64_t>(std::llround(f.model.memory)) << " " << split << " "
        << static_cast<int>(f.plan.ops.size()) - split << "\n";
  }
  return out.str();
}

std::string frontier_svg(const FrontierResult &r, const std::vector<LabelledPoint> &others, const std::string &title) {
  const double w = 640, h = 480, left = 90, right = 20, top = 40, bottom = 60;
  double tmin = std::numeric_limits<double>::infinity(), tmax = 0, mmin = tmin, mmax = 0;
  auto see = [&](double t, double m) {
    tmin = std::min(tmin, t);
    tmax = std::max(tmax, t);
    mmin = std::min(mmin, m);
    mmax = std::max(mmax, m);
  };
  for (const FrontierPlan &f : r.frontier) see(f.step_seconds, static_cast<double>(f.peak_memory_bytes));
  for (const LabelledPoint &p : others) see(p.step_seconds, static_cast<double>(p.peak_memory_bytes));
  if (!(tmin <= tmax)) tmin = 0, tmax = 1, mmin = 0, mmax = 1;
  double tpad = (tmax - tmin) * 0.05 + tmax * 1e-3 + 1e-12, mpad = (mmax - mmin) * 0.05 + mmax * 1e-3 + 1;
  tmin = std::max(0.0, tmin - tpad), tmax += tpad, mmin = std::max(0.0, mmin - mpad), mmax += mpad;
  auto x = [&](double t) { return left + (t - tmin) / (tmax - tmin) * (w - left - right); };
  auto y = [&](double m) { return h - bottom - (m - mmin) / (mmax - mmin) * (h - top - bottom); };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
    << "\" font-family=\"sans-serif\" "
    << "font-size=\"11\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << w / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n";
  s << "<line x1=\"" << left << "\" y1=\"" << h - bottom << "\" x2=\"" << w - right << "\" y2=\"" << h - bottom
    << "\" stroke=\"black\"/>\n";
  s << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << h - bottom
    << "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    double t = tmin + (tmax - tmin) * i / 4, m = mmin + (mmax - mmin) * i / 4;
    s << "<text x=\"" << fixed(x(t), 1) << "\" y=\"" << h - bottom + 16 << "\" text-anchor=\"middle\">"
      << fixed(t * 1e3, 2) << "</text>\n";
    s << "<text x=\"" << left - 6 << "\" y=\"" << fixed(y(m) + 4, 1) << "\" text-anchor=\"end\">"
      << fixed(m / (1 << 20), mmax < 10.0 * (1 << 20) ? 3 : 0) << "</text>\n";
  }
  s << "<text x=\"" << (left + w - right) / 2 << "\" y=\"" << h - 15 << "\" text-anchor=\"middle\">predicted step time "
    << "(ms)</text>\n";
  s << "<text x=\"20\" y=\"" << (top + h - bottom) / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 "
    << (top + h - bottom) / 2 << ")\">peak memory per device (MiB)</text>\n";
  if (!r.frontier.empty()) {
    s << "<polyline fill=\"none\" stroke=\"steelblue\" stroke-width=\"1.5\" points=\"";
    for (const FrontierPlan &f : r.frontier)
      s << fixed(x(f.step_seconds), 1) << "," << fixed(y(static_cast<double>(f.peak_memory_bytes)), 1) << " ";
    s << "\"/>\n";
  }
  for (const FrontierPlan &f : r.frontier)
    s << "<circle cx=\"" << fixed(x(f.step_seconds), 1) << "\" cy=\""
      << fixed(y(static_cast<double>(f.peak_memory_bytes)), 1) << "\" r=\"4\" fill=\"steelblue\"/>\n";
  for (const LabelledPoint &p : others) {
    double px = x(p.step_seconds), py = y(static_cast<double>(p.peak_memory_bytes));
    s << "<path d=\"M" << fixed(px - 4, 1) << "," << fixed(py - 4, 1) << " l8,8 m0,-8 l-8,8\" stroke=\"firebrick\" "
      << "stroke-width=\"1.5\"/>\n";
    s << "<text x=\"" << fixed(px + 6, 1) << "\" y=\"" << fixed(py - 6, 1) << "\" fill=\"firebrick\">" << p.label
      << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace cleave::plan
