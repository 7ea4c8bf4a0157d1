// ONNX's own conformance data through the importer and the reference interpreter (tests/conformance/
// node_test_runner.h). Prints `N passed, M failed, S skipped` and the grouped skip reasons.
//
// Environment: CLEAVE_CONFORMANCE_FILTER=<substring> runs only matching cases; CLEAVE_CONFORMANCE_VERBOSE=1 prints
// one line per case (`skip (ops supported)` for the skips that count against the rate); CLEAVE_ONNX_TESTDATA
// overrides the data root.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "tests/conformance/node_test_runner.h"

namespace cleave::conformance {
namespace {

/** tests/conformance/known_failures.txt: `<case> <reason...>` per line, `#` comments. Each entry needs a reason. */
std::map<std::string, std::string> known_failures() {
  std::map<std::string, std::string> out;
  std::ifstream in(std::string(CLEAVE_SOURCE_DIR) + "/tests/conformance/known_failures.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name, reason;
    ls >> name;
    std::getline(ls, reason);
    reason.erase(0, reason.find_first_not_of(" \t"));
    if (name.empty()) continue;
    EXPECT_FALSE(reason.empty()) << "known_failures.txt: entry " << name << " has no reason";
    out[name] = reason;
  }
  return out;
}

/** Cases that must pass (not fail, not skip): the training ops and losses Cleave's training path is built on.
 *  The `_expanded` variants of the losses are ONNX function bodies using GatherElements/Where/Equal/Cast, which the
 *  IR does not have; they are run by the suite test like any other case but not required. */
bool is_required(const std::string &name) {
  auto starts = [&](const char *p) { return name.rfind(p, 0) == 0; };
  auto ends = [&](const char *s) {
    std::string suf(s);
    return name.size() >= suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends("_expanded")) return false;
  return starts("node/test_adam") || starts("node/test_momentum") || name == "node/test_nesterov_momentum" ||
         starts("node/test_adagrad") || starts("node/test_sce_") || starts("node/test_nllloss_") ||
         (starts("node/test_batchnorm_") && ends("_training_mode")) || starts("simple/test_gradient_of_add");
}

const char *outcome_name(Outcome o) {
  switch (o) {
    case Outcome::pass: return "pass";
    case Outcome::fail: return "FAIL";
    case Outcome::skip: return "skip";
  }
  return "?";
}

std::vector<std::string> selected_cases(const std::string &root) {
  std::vector<std::string> all = list_cases(root);
  const char *filter = std::getenv("CLEAVE_CONFORMANCE_FILTER");
  if (!filter || !*filter) return all;
  std::vector<std::string> out;
  for (const auto &c : all)
    if (c.find(filter) != std::string::npos) out.push_back(c);
  return out;
}

bool verbose() {
  const char *v = std::getenv("CLEAVE_CONFORMANCE_VERBOSE");
  return v && *v && std::string(v) != "0";
}

TEST(OnnxConformance, NodeAndSimpleTests) {
  const std::string root = testdata_root();
  std::vector<std::string> cases = selected_cases(root);
  ASSERT_FALSE(cases.empty()) << "no conformance cases under " << root
                              << " (install libonnx-testdata or set CLEAVE_ONNX_TESTDATA)";
  std::map<std::string, std::string> known = known_failures();
  EXPECT_LE(known.size(), 10u) << "known_failures.txt must stay small: fix the causes instead";

  int passed = 0, failed = 0, skipped = 0, rewritten = 0, supported_skips = 0;
  std::map<std::string, std::string> skips;  // case -> reason
  std::map<std::string, std::vector<std::string>> skip_groups;
  std::vector<CaseResult> failures;
  for (const std::string &name : cases) {
    CaseResult r = run_case(root, name);
    // A skip of a case whose ops Cleave imports counts against the rate; verbose output marks it.
    bool counted_skip = r.outcome == Outcome::skip && ops_supported(root, name);
    if (verbose()) std::cout << outcome_name(r.outcome) << (counted_skip ? " (ops supported)" : "") << " " << name
                             << (r.detail.empty() ? "" : ": ") << r.detail << "\n";
    switch (r.outcome) {
      case Outcome::pass:
        ++passed;
        rewritten += !r.detail.empty();
        break;
      case Outcome::fail:
        ++failed;
        failures.push_back(r);
        break;
      case Outcome::skip:
        ++skipped;
        skip_groups[r.skip_group].push_back(name);
        skips[name] = r.skip_group;
        supported_skips += counted_skip;
        break;
    }
    auto k = known.find(name);
    if (k != known.end() && r.outcome != Outcome::fail)
      ADD_FAILURE() << name << " is listed in known_failures.txt but did not fail (" << outcome_name(r.outcome)
                    << "): remove the entry";
    if (r.outcome == Outcome::fail && k == known.end()) ADD_FAILURE() << name << ": " << r.detail;
  }

  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped (of " << cases.size()
            << " cases under " << root << ")\n";
  // The rate over the cases whose every op Cleave imports: a skip of such a case (an element type, attribute or
  // mode the IR lacks) counts as not passed.
  int supported = passed + failed + supported_skips;
  double rate = supported ? 100.0 * passed / supported : 0.0;
  std::printf("%d of %d cases whose ops Cleave supports pass (%.1f%%)\n", passed, supported, rate);
  if (cases.size() == list_cases(root).size()) {
    // tests/conformance/skipped.txt lists every skipped case with its reason: a change in what is skipped shows in
    // review. CLEAVE_CONFORMANCE_WRITE_SKIPS=1 rewrites it.
    std::string path = std::string(CLEAVE_SOURCE_DIR) + "/tests/conformance/skipped.txt";
    std::string text = "# Conformance cases the runner skips, with the reason (generated by test_conformance with\n"
                       "# CLEAVE_CONFORMANCE_WRITE_SKIPS=1; the test fails when it is out of date).\n";
    for (const auto &[name, why] : skips) text += name + " " + why + "\n";
    const char *write = std::getenv("CLEAVE_CONFORMANCE_WRITE_SKIPS");
    if (write && std::string(write) == "1") {
      std::ofstream(path) << text;
    } else {
      std::ifstream in(path);
      std::stringstream committed;
      committed << in.rdbuf();
      EXPECT_EQ(committed.str(), text) << path << " is out of date: rerun with CLEAVE_CONFORMANCE_WRITE_SKIPS=1";
    }
  }
  if (rewritten > 0)
    std::cout << rewritten << " of the passes ran on a model lifted to opset 13 by ONNX's version converter or "
              << "patched for a known upstream model bug (CLEAVE_CONFORMANCE_VERBOSE=1 lists them)\n";
  if (!skip_groups.empty()) std::cout << "skip reasons:\n";
  for (const auto &[group, names] : skip_groups) {
    std::cout << "  " << names.size() << " x " << group << ":";
    for (size_t i = 0; i < names.size() && i < 4; ++i) std::cout << " " << names[i];
    if (names.size() > 4) std::cout << " ...";
    std::cout << "\n";
  }
  for (const CaseResult &r : failures)
    std::cout << (known.count(r.name) ? "known failure " : "failure ") << r.name << ": " << r.detail << "\n";
}

TEST(OnnxConformance, TrainingOpsAndLossesPass) {
  const std::string root = testdata_root();
  int count = 0;
  for (const std::string &name : list_cases(root)) {
    if (!is_required(name)) continue;
    ++count;
    CaseResult r = run_case(root, name);
    EXPECT_EQ(r.outcome, Outcome::pass) << name << " must pass, got " << outcome_name(r.outcome) << ": " << r.detail;
  }
  // libonnx-testdata 1.12 holds 2 adam, 2 momentum, 1 nesterov, 2 adagrad, 2 batchnorm training, 2 gradient-of-add,
  // 18 nllloss and 34 sce (non-expanded) cases: a missing directory must not make this test pass vacuously.
  EXPECT_GE(count, 60) << "required conformance cases not found under " << root;
}

}  // namespace
}  // namespace cleave::conformance
