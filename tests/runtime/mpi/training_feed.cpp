// What a CUDA graph replay feeds its step (TrainingRun::read_samples_to_host, runtime/cuda/graph.cu) must be what
// read_samples gives a step that runs as it comes: checked on the cpu backend, whose buffers are host memory, for
// samples in file order and shuffled, sample-major and with the sample axis second (NpyFile::outer), float and int64,
// across the end of the file. Also: run_step runs the step once on this backend. Run by CTest under mpirun -np 1;
// a mismatch fails through rt::fail naming the case.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cleave/rt.h"

namespace rt = cleave::rt;

namespace {

/** A version-1 .npy file of `shape` with `data` (descr "<f4" or "<i8"). */
template <typename T>
void write_npy(const std::string &path, const std::vector<int64_t> &shape, const std::vector<T> &data) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  std::string header = std::string("{'descr': '") + (sizeof(T) == 4 ? "<f4" : "<i8") +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f) rt::fail("cannot write " + path);
  const unsigned short len = static_cast<unsigned short>(header.size());
  std::fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  std::fwrite(&len, 2, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::fwrite(data.data(), sizeof(T), data.size(), f);
  std::fclose(f);
}

template <typename T>
void check_feed(rt::TrainingRun &run, const rt::NpyFile &f, const std::string &what) {
  const int64_t count = 4;
  for (int64_t first : {0, 3, 8, 13}) {
    std::vector<T> eager(static_cast<size_t>(count * f.sample_elems)), fed(eager.size(), T(-1));
    run.read_samples(f, first, count, eager.data());
    run.read_samples_to_host(f, first, count, fed.data());
    if (std::memcmp(eager.data(), fed.data(), eager.size() * sizeof(T)) != 0)
      rt::fail(what + ": samples from " + std::to_string(first) + " differ between read_samples and the feed");
  }
}

}  // namespace

int main(int argc, char **argv) {
  rt::init(&argc, &argv);
  std::string dir = argc > 1 ? argv[1] : ".";
  const int64_t n = 10;
  std::vector<float> x(static_cast<size_t>(n * 6));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>(i * 7 % 10);
  write_npy(dir + "/feed_x.npy", {n, 2, 3}, x);
  write_npy(dir + "/feed_y.npy", {n}, y);
  std::string xa = "x=" + dir + "/feed_x.npy", ya = "y=" + dir + "/feed_y.npy";
  for (bool shuffled : {false, true}) {
    std::vector<std::string> args = {"training_feed", xa, ya};
    if (shuffled) args.insert(args.end(), {"--shuffle", "7"});
    std::vector<char *> ptrs;
    for (std::string &a : args) ptrs.push_back(a.data());
    rt::TrainingRun run(static_cast<int>(ptrs.size()), ptrs.data(), 4);
    std::string mode = shuffled ? "shuffled" : "in file order";
    check_feed<float>(run, run.data("x"), "x " + mode);
    check_feed<float>(run, run.data("x", 2), "x with its sample axis second, " + mode);
    check_feed<int64_t>(run, run.data("y"), "y " + mode);
    int calls = 0;
    run.run_step(1, [&] { ++calls; });
    if (calls != 1) rt::fail("run_step ran the step " + std::to_string(calls) + " times");
  }
  std::printf("training_feed: ok\n");
  rt::finalize();
  return 0;
}
