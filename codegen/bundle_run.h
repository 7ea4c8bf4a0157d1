#pragma once
// A bundle's life after `cleave compile` wrote it: read its manifest, build its rank programs (CMake + Ninja in
// DIR/build), run them under mpirun, and put the tensors the ranks saved back together. `cleave run` and
// `cleave profile` both go through these.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cleave::codegen {

/** A graph input as the manifest describes it: its full shape (dim `sample_axis` = samples per step) and dtype (f32,
 *  i64...). */
struct BundleInput {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  int sample_axis = 0;
};

/** What a bundle's manifest.json says. */
struct Bundle {
  std::string dir;  // absolute
  int ranks = 0;
  std::string backend;  // cpu | cuda
  std::string precision = "fp32";  // fp32 | tf32 | bf16 | fp16 | fp64 (the runtime computes in double)
  std::string model;    // the model the bundle was compiled from
  bool shared_program = false;  // one program, "ranks", runs as every rank (manifest "program")
  /** The executable rank r runs, in the build directory. */
  std::string program(int r) const { return shared_program ? "ranks" : "rank_" + std::to_string(r); }
  bool shared_weights = false;  // one weights file, weights/ranks.bin, for every rank (manifest "weights")
  /** Rank r's initial state, relative to the bundle directory. */
  std::string weights(int r) const {
    return shared_weights ? "weights/ranks.bin" : "weights/rank_" + std::to_string(r) + ".bin";
  }
  std::vector<BundleInput> inputs;
  std::string manifest;  // the manifest's text
};

/** `s` quoted for /bin/sh (single quotes). */
std::string shell_quote(const std::string &s);

/** Runs `cmd` with /bin/sh after flushing stdout; its exit status (128 + the signal when a signal ended it). */
int shell(const std::string &cmd);

/** A file's bytes; UserError naming it when it cannot be read. */
std::string read_file(const std::string &path);

/** Reads DIR/manifest.json. Throws UserError naming `dir` when it is not a bundle or its manifest is malformed. */
Bundle read_bundle(const std::string &dir);

struct BuildOptions {
  std::string runtime_dir;  // a prebuilt runtime library directory; empty: the runtime cache's (runtime_cache_dir)
  std::string build_type = "Release";
};

/** Where bundles' runtimes are built once per machine and kept: $CLEAVE_CACHE_DIR, else $XDG_CACHE_HOME/cleave, else
 *  $HOME/.cache/cleave; empty when CLEAVE_RUNTIME_CACHE=0 or none of them is set (each bundle then builds its own). */
std::string runtime_cache_dir();

/** The file name of `b`'s runtime library in a prebuilt runtime directory: libcleave_rt_<backend>.a, or
 *  libcleave_rt_cpu_f64.a for a float64 bundle (its runtime computes in double: -DCLEAVE_RT_F64=ON). */
std::string runtime_library(const Bundle &b);

/** The prebuilt runtime library directory for `b`'s backend, precision and `build_type`, from the cache: built there
 *  from the bundle's runtime/ the first time (keyed by the FNV-1a-64 of its files, the backend, whether it is float64
 *  and the build type, so a
 *  changed runtime builds anew), reused by every later bundle. Concurrent builds of one key are safe: each builds in
 *  its own directory and the first to finish is kept. Throws UserError when the build fails. */
std::string cached_runtime(const Bundle &b, const std::string &build_type);

/** Builds the bundle's rank programs in DIR/build against `options.runtime_dir`, else the cached runtime, else the
 *  bundle's own copy: configures once, and again when the build type, backend or runtime changes (Ninja makes an
 *  unchanged rebuild a no-op); the tools' output goes to stderr. Returns the build directory. Throws UserError naming
 *  the bundle when configuring or building fails. */
std::string build_bundle(const Bundle &b, const BuildOptions &options);

struct RunOptions {
  int64_t steps = 1;                        // 0: not passed (the ranks' --epochs decides)
  std::map<std::string, std::string> data;  // input name -> .npy path
  std::string save_prefix;                  // non-empty: each rank saves its trained shards to PREFIX.rank_<r>.bin
  std::vector<std::pair<std::string, std::string>> env;  // set for the ranks (e.g. CLEAVE_PROFILE)
  std::vector<std::string> rank_args;  // further flags of every rank program (rt::TrainingRun's)
  bool stdout_to_stderr = false;  // send the ranks' stdout (loss lines) to stderr
  std::string log_file;    // non-empty: mpirun's and the ranks' stderr go to this file (truncated), not to stderr
  std::string status_dir;  // non-empty: emptied and passed to the ranks as CLEAVE_STATUS_DIR, where they keep their
                           // run status and failure records (runtime/common/run_status.h, codegen/run_failure.h)
};

/** Runs the built ranks under mpirun, one app context per rank; returns mpirun's exit status. */
int run_bundle(const Bundle &b, const std::string &build_dir, const RunOptions &options);

/** The tensors the ranks saved (RunOptions::save_prefix), each whole: every rank's shards put back at their boxes
 *  (assemble_shards), by name, as raw little-endian bytes. */
std::map<std::string, std::vector<uint8_t>> gather_saved(const Bundle &b, const std::string &save_prefix);

}  // namespace cleave::codegen
