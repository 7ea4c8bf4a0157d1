#include "tools/cli/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "ir/error.h"
#include "ir/types.h"

namespace cleave {
namespace {

template <typename T>
void convert(const char *src, size_t n, std::vector<double> &out) {
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
}

/** The text after `'key':` in the header dict, up to the next top-level comma or closing brace. */
std::string header_field(const std::string &header, const std::string &key, const std::string &path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) CLEAVE_USER_ERROR(path, ": not a valid .npy file (no '", key, "' in header)");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) CLEAVE_USER_ERROR(path, ": not a valid .npy file (bad header)");
  size_t start = colon + 1;
  while (start < header.size() && header[start] == ' ') ++start;
  if (start < header.size() && header[start] == '(') {
    size_t end = header.find(')', start);
    if (end == std::string::npos) CLEAVE_USER_ERROR(path, ": not a valid .npy file (bad shape)");
    return header.substr(start, end - start + 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end - start);
}

}  // namespace

NpyArray read_npy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) CLEAVE_USER_ERROR(path, ": cannot open data file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    CLEAVE_USER_ERROR(path, ": not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else {
    if (bytes.size() < 12) CLEAVE_USER_ERROR(path, ": truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  }
  if (bytes.size() < header_start + header_len) CLEAVE_USER_ERROR(path, ": truncated .npy header");
  std::string header = bytes.substr(header_start, header_len);

  NpyArray arr;
  std::string descr = header_field(header, "descr", path);
  if (descr.size() < 2) CLEAVE_USER_ERROR(path, ": bad dtype in .npy header");
  arr.descr = descr.substr(1, descr.size() - 2);
  if (header_field(header, "fortran_order", path).find("True") != std::string::npos)
    CLEAVE_USER_ERROR(path, ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
  std::string shape = header_field(header, "shape", path);
  for (size_t i = 1; i < shape.size();) {
    size_t j = shape.find_first_of(",)", i);
    std::string num = shape.substr(i, j - i);
    num.erase(0, num.find_first_not_of(' '));
    if (!num.empty()) arr.shape.push_back(std::stoll(num));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  int64_t n = checked_num_elements(arr.shape, path);
  const char *data = bytes.data() + header_start + header_len;
  size_t avail = bytes.size() - header_start - header_len;
  auto need = [&](size_t elem) {
    if (avail < static_cast<size_t>(n) * elem)
      CLEAVE_USER_ERROR(path, ": truncated .npy data (", avail, " bytes, shape ", shape_str(arr.shape), " needs ",
                        static_cast<size_t>(n) * elem, ")");
  };
  const std::string &d = arr.descr;
  if (d == "<f4") { need(4); convert<float>(data, n, arr.data); }
  else if (d == "<f8") { need(8); convert<double>(data, n, arr.data); }
  else if (d == "<i8") { need(8); convert<int64_t>(data, n, arr.data); }
  else if (d == "<i4") { need(4); convert<int32_t>(data, n, arr.data); }
  else if (d == "|b1" || d == "|u1") { need(1); convert<uint8_t>(data, n, arr.data); }
  else CLEAVE_USER_ERROR(path, ": unsupported .npy dtype '", d, "' (use float32, float64, int64, int32 or bool)");
  return arr;
}

}  // namespace cleave
