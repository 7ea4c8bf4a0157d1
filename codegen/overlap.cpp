// Splitting reductions into start/wait pairs, and the collective-order check (overlap.h).
#include "codegen/overlap.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "ir/error.h"

namespace cleave::codegen {
namespace {

/** The group id and count of an in-place all-reduce statement of buffer `b` ("rt::all_reduce_sum(G3, $7$, $7$, 40);"),
 *  or false. */
bool in_place_all_reduce(const Instr &in, int &gid, int &b, std::string &count) {
  static const std::string head = "rt::all_reduce_sum(G";
  const std::string &c = in.code;
  if (in.buffers.size() != 1 || c.rfind(head, 0) != 0 || c.find('\n') != std::string::npos) return false;
  size_t comma = c.find(", ", head.size());
  if (comma == std::string::npos) return false;
  gid = std::stoi(c.substr(head.size(), comma - head.size()));
  b = in.buffers[0];
  std::string ref = "$" + std::to_string(b) + "$";
  std::string args = ref + ", " + ref + ", ";
  if (c.compare(comma + 2, args.size(), args) != 0) return false;
  size_t start = comma + 2 + args.size();
  if (c.size() < start + 3 || c.compare(c.size() - 2, 2, ");") != 0) return false;
  count = c.substr(start, c.size() - 2 - start);
  return true;
}

/** The collectives statement code issues on groups, as (group id, function name), in order: every
 *  "rt::NAME(G<id>," or "rt::NAME(G<id>)" in it, kernels that exchange inside included. */
std::vector<std::pair<int, std::string>> group_calls(const std::string &c) {
  std::vector<std::pair<int, std::string>> out;
  for (size_t at = c.find("rt::"); at != std::string::npos; at = c.find("rt::", at + 4)) {
    size_t open = at + 4;
    while (open < c.size() && (std::isalnum(static_cast<unsigned char>(c[open])) || c[open] == '_')) ++open;
    if (open == at + 4 || open + 1 >= c.size() || c[open] != '(' || c[open + 1] != 'G') continue;
    size_t end = open + 2;
    while (end < c.size() && std::isdigit(static_cast<unsigned char>(c[end]))) ++end;
    if (end == open + 2 || (c[end] != ',' && c[end] != ')')) continue;
    out.emplace_back(std::stoi(c.substr(open + 2, end - open - 2)), c.substr(at + 4, open - at - 4));
  }
  return out;
}

/** Whether a statement issues communication: a collective on a group, point-to-point transfers or a barrier. */
bool communicates(const Instr &in) {
  const std::string &c = in.code;
  return !group_calls(c).empty() || c.find("rt::send_recv(") != std::string::npos ||
         c.find("rt::barrier(") != std::string::npos;
}

}  // namespace

void overlap_reductions(RankProgram &prog) {
  std::vector<Instr> &step = prog.step;
  // starts[i]: the start statements to place right before statement i (in the order their all-reduces appeared).
  std::map<size_t, std::vector<Instr>> starts;
  int pending = 0;
  size_t floor = 0;  // where the last start went: a later one may not go before it
  for (size_t i = 0; i < step.size(); ++i) {
    int gid = -1, b = -1;
    std::string count;
    if (!in_place_all_reduce(step[i], gid, b, count)) continue;
    // Back to the statement that touches the buffer, but never past communication nor before an earlier start:
    // every rank then issues its collectives and transfers in the order it did before (the plan's op order, the
    // same on all ranks), so no two ranks can start collectives that share members in different orders (a deadlock
    // under NCCL's one communication stream as under MPI).
    size_t j = i;
    while (j > 0 && !communicates(step[j - 1]) &&
           std::find(step[j - 1].buffers.begin(), step[j - 1].buffers.end(), b) == step[j - 1].buffers.end())
      --j;
    // With nothing to overlap (a source, or the producer right before) the pair is still emitted, back to back:
    // MPI does not match a blocking all-reduce with a started one, and a member whose producer lies elsewhere may
    // start this same all-reduce early.
    if (j == 0) j = i;
    j = std::max(j, floor);
    floor = j;
    std::string name = "pending_" + std::to_string(pending++);
    std::string ref = "$" + std::to_string(b) + "$";
    // The start is timed as communication of the op the all-reduce runs before, like its wait.
    starts[j].push_back({"rt::Pending " + name + " = rt::all_reduce_sum_start(G" + std::to_string(gid) + ", " + ref +
                             ", " + count + ");",
                         {b}, step[i].timing});
    // The wait keeps the all-reduce's place and its timing site: what is left of the reduction is paid there.
    step[i].code = "rt::wait(" + name + ");";
  }
  if (starts.empty()) return;
  std::vector<Instr> out;
  out.reserve(step.size() + static_cast<size_t>(pending));
  for (size_t i = 0; i < step.size(); ++i) {
    if (auto it = starts.find(i); it != starts.end())
      for (Instr &s : it->second) out.push_back(std::move(s));
    out.push_back(std::move(step[i]));
  }
  step = std::move(out);
}

void check_collective_order(const Lowered &l) {
  // Per rank and group: the names of the collectives it starts on the group in program order (every "rt::NAME(G<id>"
  // in the statements, kernels included: what NCCL and MPI see issued), and the order they complete in, as indices
  // into the first list (a started all-reduce completes at its wait, where the cpu backend runs it: rt.h).
  std::vector<std::map<int, std::vector<std::string>>> started(l.ranks.size());
  std::vector<std::map<int, std::vector<size_t>>> completed(l.ranks.size());
  for (size_t r = 0; r < l.ranks.size(); ++r) {
    std::map<std::string, std::pair<int, size_t>> pending;  // pending name -> (group id, index among the started)
    for (const Instr &in : l.ranks[r].step) {
      static const std::string wait = "rt::wait(";
      if (in.code.rfind(wait, 0) == 0) {
        std::string name = in.code.substr(wait.size(), in.code.find(')') - wait.size());
        auto it = pending.find(name);
        CLEAVE_CHECK(it != pending.end(), "codegen: rank ", r, " waits for ", name, ", which it did not start");
        completed[r][it->second.first].push_back(it->second.second);
        pending.erase(it);
        continue;
      }
      for (auto &[gid, name] : group_calls(in.code)) {
        std::vector<std::string> &seq = started[r][gid];
        seq.push_back(name);
        if (name != "all_reduce_sum_start") {
          completed[r][gid].push_back(seq.size() - 1);
          continue;
        }
        static const std::string decl = "rt::Pending ";
        CLEAVE_CHECK(in.code.rfind(decl, 0) == 0, "codegen: a started all-reduce is not named: ", in.code);
        pending[in.code.substr(decl.size(), in.code.find(' ', decl.size()) - decl.size())] = {gid, seq.size() - 1};
      }
    }
    CLEAVE_CHECK(pending.empty(), "codegen: rank ", r, " never waits for ", pending.begin()->first);
  }
  for (size_t gid = 0; gid < l.groups.size(); ++gid) {
    const std::vector<int> &members = l.groups[gid];
    int g = static_cast<int>(gid);
    size_t first = static_cast<size_t>(members[0]);
    for (int m : members) {
      size_t r = static_cast<size_t>(m);
      CLEAVE_CHECK(started[r][g] == started[first][g], "codegen: ranks ", members[0], " and ", m,
                   " start the collectives of group ", gid, " in different orders");
      CLEAVE_CHECK(completed[r][g] == completed[first][g], "codegen: ranks ", members[0], " and ", m,
                   " complete the collectives of group ", gid, " in different orders");
    }
  }
}

}  // namespace cleave::codegen
