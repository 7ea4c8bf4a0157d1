#include "codegen/run_failure.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <vector>

namespace cleave::codegen {
namespace {
namespace fs = std::filesystem;

/** A rank's failure record: `<unix ms> <message>`. */
struct Record {
  int64_t unix_ms = 0;
  std::string message;
};

/** What the launcher says ended the job: the first rank it reports, and how. */
struct LauncherReport {
  enum Kind { abort, signal, exit_code, improper } kind = abort;
  int rank = -1;
  int number = 0;          // the signal or the exit code
  std::string signal_name;  // as the launcher names it, e.g. "Killed"
};

std::map<int, Record> read_records(const std::string &status_dir, int ranks) {
  std::map<int, Record> records;
  for (int r = 0; r < ranks && !status_dir.empty(); ++r) {
    std::ifstream f(fs::path(status_dir) / ("rank_" + std::to_string(r) + ".failure"));
    std::string line;
    if (!f || !std::getline(f, line)) continue;
    size_t space = line.find(' ');
    if (space == std::string::npos || space + 1 >= line.size()) continue;
    records[r] = {std::atoll(line.substr(0, space).c_str()), line.substr(space + 1)};
  }
  return records;
}

std::vector<std::string> read_lines(const std::string &path) {
  std::vector<std::string> lines;
  std::ifstream f(path, std::ios::binary);
  for (std::string line; std::getline(f, line);)
    if (line.size() <= 4096) lines.push_back(line);  // the launcher's lines are short; a rank's dump is not a cause
  return lines;
}

/** The first rank whose end Open MPI's mpirun (4.x; prterun of 5.x alike) reports in `lines`. */
std::optional<LauncherReport> launcher_report(const std::vector<std::string> &lines) {
  static const std::regex abort_re(R"(MPI_ABORT was invoked on rank (\d+))");
  static const std::regex signal_re(
      R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)(?: \(([^)]*)\))?)");
  static const std::regex name_re(R"(Process name:\s*\[.*[,.](\d+)\]+\s*$)");
  static const std::regex code_re(R"(Exit code:\s*(\d+))");
  static const std::regex improper_re(R"(due to process rank (\d+) with PID \d+ on node \S+ exiting improperly)");
  std::smatch m;
  int named = -1;  // "Process name: [[job,1],R]": the next line has its exit code
  for (const std::string &line : lines) {
    if (std::regex_search(line, m, abort_re)) return LauncherReport{LauncherReport::abort, std::stoi(m[1]), 0, ""};
    if (std::regex_search(line, m, signal_re))
      return LauncherReport{LauncherReport::signal, std::stoi(m[1]), std::stoi(m[2]), m[3].str()};
    if (std::regex_search(line, m, improper_re))
      return LauncherReport{LauncherReport::improper, std::stoi(m[1]), 0, ""};
    if (named >= 0 && std::regex_search(line, m, code_re))
      return LauncherReport{LauncherReport::exit_code, named, std::stoi(m[1]), ""};
    named = std::regex_search(line, m, name_re) ? std::stoi(m[1]) : -1;
  }
  return std::nullopt;
}

/** "rank R: ..." from the first line rank R (any rank when R < 0) printed in the runtime's format. */
std::string rank_line(const std::vector<std::string> &lines, int rank) {
  static const std::regex line_re(R"(^cleave rank (\d+): (.*)$)");
  std::smatch m;
  for (const std::string &line : lines)
    if (std::regex_search(line, m, line_re) && (rank < 0 || std::stoi(m[1]) == rank))
      return "rank " + m[1].str() + ": " + m[2].str();
  return "";
}

std::string cause(const std::string &bundle, int ranks, const std::string &status_dir, const std::string &log_file,
                  int exit_status) {
  std::map<int, Record> records = read_records(status_dir, ranks);
  std::vector<std::string> lines = read_lines(log_file);
  if (std::optional<LauncherReport> report = launcher_report(lines)) {
    int r = report->rank;
    std::string rank = "rank " + std::to_string(r);
    if (records.count(r)) return records[r].message;
    switch (report->kind) {
      case LauncherReport::signal: {
        std::string name = report->signal_name.empty() ? strsignal(report->number) : report->signal_name;
        return rank + " was killed by signal " + std::to_string(report->number) + " (" + name + ")";
      }
      case LauncherReport::exit_code:
        return rank + " exited with code " + std::to_string(report->number);
      case LauncherReport::improper:
        return rank + " exited without finishing (no MPI_Finalize)";
      case LauncherReport::abort: {
        std::string said = rank_line(lines, r);
        return said.empty() ? rank + " aborted the job" : said;
      }
    }
  }
  if (!records.empty()) {
    auto first = records.begin();
    for (auto it = records.begin(); it != records.end(); ++it)
      if (it->second.unix_ms < first->second.unix_ms) first = it;
    return first->second.message;
  }
  std::string said = rank_line(lines, -1);
  if (!said.empty()) return said;
  return bundle + ": the training job failed (mpirun exit status " + std::to_string(exit_status) + ")";
}

}  // namespace

std::string explain_run_failure(const std::string &bundle, int ranks, const std::string &status_dir,
                                const std::string &log_file, int exit_status) {
  return cause(bundle, ranks, status_dir, log_file, exit_status) + "; log: " + log_file;
}

}  // namespace cleave::codegen
