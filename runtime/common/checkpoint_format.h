#pragma once
// The one checkpoint format: the ranks write and read it (host_io.cpp), and the compiler writes the bundle's initial
// weights and reads trained shards and checkpoints with it (codegen/bundle_run.cpp), so both always agree. It ships
// inside bundles, so it includes nothing but the standard library, and reports problems by throwing ckpt::Error.
//
// A file is the magic "CLEAVEC2", a u64 count, then per buffer: its name, its dtype ("" = no layout), a u64 rank r,
// r int64s each of the tensor's shape and the box's begin and end, a u64 byte count, and the raw little-endian
// bytes of the box (row-major). Strings are a u64 length and the bytes. "CLEAVEC1" files (name and bytes only) are
// still read.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cleave::rt::ckpt {

/** A malformed checkpoint; the message starts with the file's path and is one line. */
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/** What a buffer is: the box [begin, end) of tensor `name` of `shape`, `bytes` long. dtype empty: no layout. */
struct Layout {
  std::string name, dtype;
  std::vector<int64_t> shape, begin, end;
  uint64_t bytes = 0;
};

/** Reads exactly n bytes into dst; throws Error when the file ends first. */
using Get = std::function<void(void *dst, size_t n)>;

/** The file header for `count` buffers. */
std::string file_header(uint64_t count);
/** A buffer's header; its `layout.bytes` raw bytes follow it. */
std::string entry_header(const Layout &layout);
/** Reads the file header: the buffer count; `version` becomes 1 or 2. */
uint64_t read_file_header(const Get &get, const std::string &path, int *version);
/** Reads a buffer's header (its bytes follow). */
Layout read_entry_header(const Get &get, int version, const std::string &path);

/** A whole file in memory, decoded: layouts and bytes. */
struct Entry {
  Layout layout;
  std::string bytes;
};
std::string encode(const std::vector<Entry> &entries);
std::vector<Entry> decode(const std::string &file, const std::string &path);

// A checkpoint is a directory CK/step-<k>/ (step_dir_name) holding rank_<r>.bin per rank and manifest.json, which
// rank 0 writes last: a directory without a manifest is incomplete and never read.

/** What manifest.json says. */
/** Dynamic loss scaling's state after a checkpoint's step (rt::TrainingRun::unscale_grads). */
struct ScalerState {
  double scale = 0;
  int64_t growth_tracker = 0;  // steps in a row without overflow
  int64_t skipped_steps = 0;
};

struct Manifest {
  int64_t step = -1;
  int64_t ranks = 0;
  int64_t samples_per_step = 0;
  /** A run with loss scaling records its scaler ("loss_scale", "growth_tracker", "skipped_steps"). */
  std::optional<ScalerState> scaler;
};
/** "step-00000042". */
std::string step_dir_name(int64_t step);
/** The manifest's text (JSON, one line). */
std::string manifest_text(const Manifest &m);
/** Parses manifest.json's text; throws Error starting with `path` unless it is a cleave checkpoint manifest. */
Manifest parse_manifest(const std::string &text, const std::string &path);
/** The complete checkpoints under `dir` (step-<k> directories holding a manifest), by step: their paths. Throws
 *  Error for a manifest that is not one. */
std::map<int64_t, std::string> complete_checkpoints(const std::string &dir);
/** The checkpoint `path` names: itself when it holds a manifest, else the newest complete one under it; nullopt
 *  when there is none. */
std::optional<std::string> find_checkpoint(const std::string &path);
/** The file's bytes; throws Error naming it when it cannot be read. */
std::string read_file(const std::string &path);

/** "[0:4, 2:8]": a box for messages. */
std::string box_text(const std::vector<int64_t> &begin, const std::vector<int64_t> &end);

}  // namespace cleave::rt::ckpt
