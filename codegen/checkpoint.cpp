#include "codegen/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/types.h"
#include "runtime/common/checkpoint_format.h"

namespace cleave::codegen {
namespace fs = std::filesystem;
namespace {

std::vector<rt::ckpt::Entry> read_entries(const std::string &path) {
  try {
    return rt::ckpt::decode(read_file(path), path);
  } catch (const rt::ckpt::Error &e) {
    CLEAVE_USER_ERROR(e.what());
  }
}

int element_size(const std::string &dtype, const std::string &path, const std::string &name) {
  std::optional<DType> dt = parse_dtype(dtype);
  if (!dt) CLEAVE_USER_ERROR(path, ": tensor \"", name, "\" has an unknown dtype \"", dtype, "\"");
  return dtype_size(*dt);
}

/** Calls f(flat index in the whole tensor, index in the box) for every element of the box, row-major. */
template <typename F>
void for_each_in_box(const std::vector<int64_t> &shape, const std::vector<int64_t> &begin,
                     const std::vector<int64_t> &end, F f) {
  int64_t count = 1;
  std::vector<int64_t> ext(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) count *= (ext[d] = end[d] - begin[d]);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i, flat = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      flat += (begin[d] + rem % ext[d]) * stride;
      rem /= ext[d];
      stride *= shape[d];
    }
    f(flat, i);
  }
}

int64_t box_count(const rt::ckpt::Layout &l) {
  int64_t n = 1;
  for (size_t d = 0; d < l.shape.size(); ++d) n *= l.end[d] - l.begin[d];
  return n;
}

}  // namespace

std::map<std::string, WholeTensor> assemble_shards(const std::vector<std::string> &files) {
  std::map<std::string, WholeTensor> whole;
  std::map<std::string, std::vector<bool>> covered;
  for (const std::string &path : files) {
    for (const rt::ckpt::Entry &e : read_entries(path)) {
      const rt::ckpt::Layout &l = e.layout;
      if (l.dtype.empty()) CLEAVE_USER_ERROR(path, ": tensor \"", l.name, "\" has no layout (a checkpoint of an older "
                                             "cleave: resume it with the bundle that wrote it)");
      int es = element_size(l.dtype, path, l.name);
      auto [it, fresh] = whole.try_emplace(l.name);
      WholeTensor &t = it->second;
      if (fresh) {
        t.dtype = l.dtype;
        t.shape = l.shape;
        t.bytes.assign(static_cast<size_t>(num_elements(l.shape) * es), 0);
        covered[l.name].assign(static_cast<size_t>(num_elements(l.shape)), false);
      } else if (t.dtype != l.dtype || t.shape != l.shape) {
        CLEAVE_USER_ERROR(path, ": tensor \"", l.name, "\" is ", l.dtype, " ", shape_str(l.shape),
                          " here but ", t.dtype, " ", shape_str(t.shape), " in an earlier file");
      }
      if (static_cast<int64_t>(e.bytes.size()) != box_count(l) * es)
        CLEAVE_USER_ERROR(path, ": the shard of \"", l.name, "\" has ", e.bytes.size(), " bytes, its box ",
                          rt::ckpt::box_text(l.begin, l.end), " needs ", box_count(l) * es);
      std::vector<bool> &cov = covered[l.name];
      for_each_in_box(l.shape, l.begin, l.end, [&](int64_t flat, int64_t i) {
        std::memcpy(t.bytes.data() + flat * es, e.bytes.data() + i * es, static_cast<size_t>(es));
        cov[static_cast<size_t>(flat)] = true;
      });
    }
  }
  for (const auto &[name, cov] : covered)
    if (std::find(cov.begin(), cov.end(), false) != cov.end())
      CLEAVE_USER_ERROR("tensor \"", name, "\": the shards of ", files.empty() ? "" : files[0],
                        " and the other rank files do not cover all of it");
  return whole;
}

std::optional<Checkpoint> find_checkpoint(const std::string &path) {
  try {
    std::optional<std::string> dir = rt::ckpt::find_checkpoint(path);
    if (!dir) return std::nullopt;
    std::string manifest = (fs::path(*dir) / "manifest.json").string();
    rt::ckpt::Manifest m = rt::ckpt::parse_manifest(rt::ckpt::read_file(manifest), manifest);
    fs::path at = fs::absolute(*dir).lexically_normal();
    if (at.filename().empty()) at = at.parent_path();  // "ck/step-00000004/"
    return Checkpoint{at.string(), m.step, static_cast<int>(m.ranks), m.scaler};
  } catch (const rt::ckpt::Error &e) {
    throw UserError(e.what());
  }
}

std::vector<std::string> checkpoint_files(const Checkpoint &ck) {
  std::vector<std::string> files;
  for (int r = 0; r < ck.ranks; ++r) files.push_back((fs::path(ck.dir) / ("rank_" + std::to_string(r) + ".bin")).string());
  return files;
}

namespace {

/** The layouts of bundle b's rank r (its weights file). */
std::vector<rt::ckpt::Layout> bundle_layouts(const Bundle &b, int r) {
  std::vector<rt::ckpt::Layout> out;
  for (rt::ckpt::Entry &e : read_entries((fs::path(b.dir) / b.weights(r)).string()))
    out.push_back(std::move(e.layout));
  return out;
}

bool same_box(const rt::ckpt::Layout &a, const rt::ckpt::Layout &b) {
  return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.begin == b.begin && a.end == b.end;
}

}  // namespace

bool same_layout(const Checkpoint &ck, const Bundle &b) {
  if (ck.ranks != b.ranks) return false;
  for (int r = 0; r < b.ranks; ++r) {
    std::vector<rt::ckpt::Layout> want = bundle_layouts(b, r), have;
    for (rt::ckpt::Entry &e : read_entries(checkpoint_files(ck)[static_cast<size_t>(r)])) have.push_back(e.layout);
    for (const rt::ckpt::Layout &w : want)
      if (std::none_of(have.begin(), have.end(), [&](const rt::ckpt::Layout &h) { return same_box(w, h); }))
        return false;
  }
  return true;
}

void reshard_checkpoint(const Checkpoint &ck, const Bundle &b, const std::string &out_dir) {
  std::map<std::string, WholeTensor> whole = assemble_shards(checkpoint_files(ck));
  fs::create_directories(out_dir);
  for (int r = 0; r < b.ranks; ++r) {
    std::vector<rt::ckpt::Entry> shards;
    for (const rt::ckpt::Layout &l : bundle_layouts(b, r)) {
      auto it = whole.find(l.name);
      if (it == whole.end())
        CLEAVE_USER_ERROR(ck.dir, ": the checkpoint has no tensor \"", l.name, "\", which this bundle's rank ", r,
                          " needs (a checkpoint of another model or optimizer?)");
      const WholeTensor &t = it->second;
      if (t.dtype != l.dtype || t.shape != l.shape)
        CLEAVE_USER_ERROR(ck.dir, ": tensor \"", l.name, "\" is ", t.dtype, " ", shape_str(t.shape),
                          " in the checkpoint, this bundle needs ", l.dtype, " ", shape_str(l.shape));
      int es = element_size(l.dtype, ck.dir, l.name);
      rt::ckpt::Entry e;
      e.layout = l;
      e.bytes.resize(static_cast<size_t>(box_count(l) * es));
      for_each_in_box(l.shape, l.begin, l.end, [&](int64_t flat, int64_t i) {
        std::memcpy(e.bytes.data() + i * es, t.bytes.data() + flat * es, static_cast<size_t>(es));
      });
      shards.push_back(std::move(e));
    }
    write_file_atomically("--resume", (fs::path(out_dir) / ("rank_" + std::to_string(r) + ".bin")).string(),
                          rt::ckpt::encode(shards));
  }
  nlohmann::json m = {{"format", "cleave-checkpoint-1"}, {"step", ck.step}, {"ranks", b.ranks}, {"resharded_from", ck.dir}};
  if (ck.scaler) {  // the scaler's state is the run's, not a rank's: it carries over whole
    m["loss_scale"] = ck.scaler->scale;
    m["growth_tracker"] = ck.scaler->growth_tracker;
    m["skipped_steps"] = ck.scaler->skipped_steps;
  }
  write_file_atomically("--resume", (fs::path(out_dir) / "manifest.json").string(), m.dump() + "\n");
}

}  // namespace cleave::codegen
