#include "checkpoint_format.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace cleave::rt::ckpt {
namespace {

constexpr char kMagic1[8] = {'C', 'L', 'E', 'A', 'V', 'E', 'C', '1'};
constexpr char kMagic2[8] = {'C', 'L', 'E', 'A', 'V', 'E', 'C', '2'};
// Bounds that no real checkpoint reaches; past them a file is corrupt (and a length would allocate without limit).
constexpr uint64_t kMaxString = 1u << 20, kMaxRank = 64;

void put_u64(std::string &s, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  s.append(b, 8);
}

void put_string(std::string &s, const std::string &v) {
  put_u64(s, v.size());
  s += v;
}

uint64_t get_u64(const Get &get) {
  uint64_t v = 0;
  get(&v, 8);
  return v;
}

std::string get_string(const Get &get, const std::string &path) {
  uint64_t n = get_u64(get);
  if (n > kMaxString) throw Error(path + ": corrupt checkpoint (a name of " + std::to_string(n) + " bytes)");
  std::string s(n, '\0');
  if (n > 0) get(s.data(), n);
  return s;
}

}  // namespace

std::string file_header(uint64_t count) {
  std::string s(kMagic2, 8);
  put_u64(s, count);
  return s;
}

std::string entry_header(const Layout &l) {
  std::string s;
  put_string(s, l.name);
  put_string(s, l.dtype);
  put_u64(s, l.shape.size());
  for (const auto *dims : {&l.shape, &l.begin, &l.end})
    for (size_t d = 0; d < l.shape.size(); ++d) put_u64(s, d < dims->size() ? static_cast<uint64_t>((*dims)[d]) : 0);
  put_u64(s, l.bytes);
  return s;
}

uint64_t read_file_header(const Get &get, const std::string &path, int *version) {
  char magic[8];
  get(magic, 8);
  if (std::memcmp(magic, kMagic2, 8) == 0)
    *version = 2;
  else if (std::memcmp(magic, kMagic1, 8) == 0)
    *version = 1;
  else
    throw Error(path + ": not a cleave checkpoint");
  return get_u64(get);
}

Layout read_entry_header(const Get &get, int version, const std::string &path) {
  Layout l;
  l.name = get_string(get, path);
  if (version >= 2) {
    l.dtype = get_string(get, path);
    uint64_t rank = get_u64(get);
    if (rank > kMaxRank) throw Error(path + ": corrupt checkpoint (buffer \"" + l.name + "\" of rank " +
                                     std::to_string(rank) + ")");
    for (auto *dims : {&l.shape, &l.begin, &l.end}) {
      dims->resize(rank);
      for (auto &v : *dims) v = static_cast<int64_t>(get_u64(get));
    }
    for (uint64_t d = 0; d < rank; ++d)
      if (l.begin[d] < 0 || l.begin[d] > l.end[d] || l.end[d] > l.shape[d])
        throw Error(path + ": corrupt checkpoint (buffer \"" + l.name + "\" has box " + box_text(l.begin, l.end) +
                    " outside its tensor)");
  }
  l.bytes = get_u64(get);
  return l;
}

std::string encode(const std::vector<Entry> &entries) {
  std::string s = file_header(entries.size());
  for (const Entry &e : entries) {
    Layout l = e.layout;
    l.bytes = e.bytes.size();
    s += entry_header(l);
    s += e.bytes;
  }
  return s;
}

std::vector<Entry> decode(const std::string &file, const std::string &path) {
  size_t at = 0;
  Get get = [&](void *dst, size_t n) {
    if (n > file.size() - at) throw Error(path + ": truncated checkpoint");
    std::memcpy(dst, file.data() + at, n);
    at += n;
  };
  int version = 0;
  uint64_t count = read_file_header(get, path, &version);
  std::vector<Entry> out;
  for (uint64_t i = 0; i < count; ++i) {
    Entry e;
    e.layout = read_entry_header(get, version, path);
    if (e.layout.bytes > file.size() - at) throw Error(path + ": truncated checkpoint");
    e.bytes = file.substr(at, e.layout.bytes);
    at += e.layout.bytes;
    out.push_back(std::move(e));
  }
  return out;
}

std::string box_text(const std::vector<int64_t> &begin, const std::vector<int64_t> &end) {
  std::string s = "[";
  for (size_t d = 0; d < begin.size() && d < end.size(); ++d)
    s += (d ? ", " : "") + std::to_string(begin[d]) + ":" + std::to_string(end[d]);
  return s + "]";
}

namespace {

/** The integer after `"key":` in a manifest (manifest_text's, or the compiler's JSON), if there is one. */
std::optional<int64_t> json_int(const std::string &text, const std::string &key) {
  size_t at = text.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nullopt;
  const char *begin = text.c_str() + at + key.size() + 3;
  char *end = nullptr;
  long long v = std::strtoll(begin, &end, 10);
  if (end == begin) return std::nullopt;
  return v;
}

/** The number after `"key":`, if there is one. */
std::optional<double> json_double(const std::string &text, const std::string &key) {
  size_t at = text.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nullopt;
  const char *begin = text.c_str() + at + key.size() + 3;
  char *end = nullptr;
  double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  return v;
}

}  // namespace

std::string step_dir_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::string manifest_text(const Manifest &m) {
  std::string s = "{\"format\": \"cleave-checkpoint-1\", \"step\": " + std::to_string(m.step) + ", \"ranks\": " +
                  std::to_string(m.ranks) + ", \"samples_per_step\": " + std::to_string(m.samples_per_step);
  if (m.scaler) {
    char scale[40];
    std::snprintf(scale, sizeof scale, "%.17g", m.scaler->scale);
    s += ", \"loss_scale\": " + std::string(scale) + ", \"growth_tracker\": " +
         std::to_string(m.scaler->growth_tracker) + ", \"skipped_steps\": " + std::to_string(m.scaler->skipped_steps);
  }
  return s + "}\n";
}

Manifest parse_manifest(const std::string &text, const std::string &path) {
  Manifest m;
  std::optional<int64_t> step = json_int(text, "step"), ranks = json_int(text, "ranks");
  if (text.find("\"cleave-checkpoint-1\"") == std::string::npos || !step || !ranks || *step < 0 ||
      *ranks < 1)
    throw Error(path + ": not a cleave checkpoint manifest");
  m.step = *step;
  m.ranks = *ranks;
  m.samples_per_step = json_int(text, "samples_per_step").value_or(0);
  if (std::optional<double> scale = json_double(text, "loss_scale")) {
    std::optional<int64_t> tracker = json_int(text, "growth_tracker"), skipped = json_int(text, "skipped_steps");
    if (!(*scale > 0) || !std::isfinite(*scale) || !tracker || !skipped || *tracker < 0 || *skipped < 0)
      throw Error(path + ": a loss scale without a valid growth_tracker and skipped_steps");
    m.scaler = ScalerState{*scale, *tracker, *skipped};
  }
  return m;
}

std::string read_file(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot read it: " + std::strerror(errno));
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

std::map<int64_t, std::string> complete_checkpoints(const std::string &dir) {
  namespace fs = std::filesystem;
  std::map<int64_t, std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    fs::path manifest = it->path() / "manifest.json";
    if (it->path().filename().string().rfind("step-", 0) != 0 || !fs::exists(manifest)) continue;
    out[parse_manifest(read_file(manifest.string()), manifest.string()).step] = it->path().string();
  }
  return out;
}

std::optional<std::string> find_checkpoint(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(path) / "manifest.json", ec)) return path;
  std::map<int64_t, std::string> all = complete_checkpoints(path);
  if (all.empty()) return std::nullopt;
  return all.rbegin()->second;
}

}  // namespace cleave::rt::ckpt
