// What a data read costs on this machine (the read_latency and read_row_latency of models/topologies/cpu-local.json):
// times rt::npy_read_samples' pattern (runtime/common/host_io.cpp read_samples: fopen, one fseek and one fread of the
// run of consecutive rows, the conversion of every value, fclose) for ROWS rows of BYTES bytes each, and prints the
// median seconds of 2000 calls.
// Usage: g++ -O2 tests/bench/read_cost.cpp -o /tmp/read_cost && cd /tmp && ./read_cost 1 64 && ./read_cost 64 8
// read_latency = t(1 row) - read_row_latency; read_row_latency = (t(64 rows) - t(1 row)) / 63.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
int main(int argc, char **argv) {
  int rows = argc == 3 ? std::atoi(argv[1]) : 0, row = argc == 3 ? std::atoi(argv[2]) : 0;
  if (rows < 1 || row < 1) {
    std::fprintf(stderr, "error: usage: read_cost ROWS BYTES_PER_ROW (positive integers)\n");
    return 2;
  }
  std::FILE *w = std::fopen("y.npy", "wb");
  std::vector<char> z(static_cast<size_t>(rows) * row + 128, 0);
  std::fwrite(z.data(), 1, z.size(), w);
  std::fclose(w);
  std::vector<double> t;
  std::vector<char> buf(static_cast<size_t>(rows) * row);
  std::vector<float> out(buf.size() / 4 + 1);
  for (int i = 0; i < 2000; ++i) {
    auto a = std::chrono::steady_clock::now();
    std::FILE *f = std::fopen("y.npy", "rb");
    std::fseek(f, 128, SEEK_SET);
    if (std::fread(buf.data(), 1, buf.size(), f) != buf.size()) return 1;
    for (size_t j = 0; j + 4 <= buf.size(); j += 4) std::memcpy(&out[j / 4], buf.data() + j, 4);
    std::fclose(f);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  std::printf("%d rows x %d B: median %.3e s\n", rows, row, t[t.size() / 2]);
}
