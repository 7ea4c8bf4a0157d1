#pragma once
// Runs one case of ONNX's own conformance data (data/node/<test>/, data/simple/<test>/) through the importer and the
// reference interpreter and compares with the expected outputs, the way ONNX's backend test runner does.
#include <string>
#include <vector>

namespace cleave::conformance {

enum class Outcome { pass, fail, skip };

struct CaseResult {
  /** "node/test_abs", "simple/test_gradient_of_add". */
  std::string name;
  Outcome outcome = Outcome::fail;
  /** fail: the first problem (import error, run error, or first mismatching element); skip: the specific reason. */
  std::string detail;
  /** skip: the reason's group for the summary (e.g. "unsupported ops: Where"); empty otherwise. */
  std::string skip_group;
};

/** Relative tolerance and absolute tolerance of ONNX's runner (onnx/backend/test/runner: rtol 1e-3, atol 1e-7). */
inline constexpr double kRtol = 1e-3;
inline constexpr double kAtol = 1e-7;

/** The conformance data root: $CLEAVE_ONNX_TESTDATA, else /usr/share/libonnx-testdata/data (Debian). */
std::string testdata_root();
/** Every case under root/node and root/simple, sorted by name ("node/...", then "simple/..."). */
std::vector<std::string> list_cases(const std::string &root);

/** Imports root/<name>/model.onnx once per test_data_set_* (the set's integer and bool inputs bound as constants
 *  through ImportOptions::input_values, plus any float input the importer reports it needs at compile time, e.g.
 *  Dropout's ratio; other float inputs fed), runs it with the interpreter and compares each output (floats:
 *  |got - want| <= atol + rtol * |want|, NaN equal to NaN; integers and bools exactly). Data files of uint16 for a
 *  value the model declares bfloat16 are read as bf16: ONNX's generator stores bfloat16 as its bit pattern.
 *  Before import, a model whose ai.onnx opset is below 13 is lifted to 13 with ONNX's version converter, and the
 *  few model files known upstream to contradict their expected outputs are patched (see patch_known_model_bugs);
 *  a pass's detail then says so.
 *  Skips, with the reason, cases the IR cannot express: non-tensor or unsupported element types, what the importer
 *  rejects as unsupported (exit code 2), and outputs that depend on numpy's RNG (training-mode Dropout, ratio > 0;
 *  for those the RNG-independent semantics are still checked and a violation is a failure). */
CaseResult run_case(const std::string &root, const std::string &name);

/** Whether the importer has a translator for every node of the case's model after function expansion (its ops are
 *  ones Cleave supports, so a skip of it counts against the conformance rate). */
bool ops_supported(const std::string &root, const std::string &name);

}  // namespace cleave::conformance
