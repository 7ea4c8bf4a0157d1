#include "tools/cli/npy.h"

#include "ir/error.h"
#include "ir/types.h"
#include "runtime/common/npy_format.h"

namespace cleave {
namespace {

rt::npy::Header header_of(const std::string &path) {
  try {
    return rt::npy::read_header(path);
  } catch (const rt::npy::Error &e) {
    throw UserError(e.what());
  }
}

NpyArray from_header(const rt::npy::Header &h) {
  NpyArray a;
  a.shape = h.shape;
  a.descr = h.descr;
  a.integer = h.kind == 'i';
  return a;
}

}  // namespace

NpyArray read_npy_header(const std::string &path) { return from_header(header_of(path)); }

NpyArray read_npy(const std::string &path) {
  rt::npy::Header h = header_of(path);
  NpyArray a = from_header(h);
  if (h.shape.empty() || h.shape[0] == 0) return a;  // no samples: the caller reports the shape
  a.data.resize(static_cast<size_t>(h.shape[0] * h.sample_elems));
  try {
    rt::npy::read_samples(h, 0, h.shape[0], a.data.data());
  } catch (const rt::npy::Error &e) {
    throw UserError(e.what());
  }
  return a;
}

void check_npy_feeds(const NpyArray &a, const std::string &path, bool integer) {
  rt::npy::Header h;
  h.path = path;
  h.kind = a.integer ? 'i' : 'f';
  h.descr = a.descr;
  std::string why = rt::npy::feed_problem(h, integer);
  if (!why.empty()) throw UserError(why);
}

}  // namespace cleave
