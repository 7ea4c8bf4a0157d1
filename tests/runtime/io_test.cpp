// Files and process plumbing of the runtime: the rng.h copy, .npy sample reading (files written by numpy),
// checkpoints, the arena, and the loss log line.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cleave/rt.h"
#include "runtime/common/checkpoint_format.h"

namespace cleave::rt::testing {
namespace {

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_dir() {
  std::string dir = std::string(CLEAVE_BINARY_DIR) + "/tests/runtime/io_test_tmp";
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(RuntimeFiles, RngHeaderIsAByteIdenticalCopyOfTheIrOne) {
  std::string ir = slurp(std::string(CLEAVE_SOURCE_DIR) + "/ir/rng.h");
  std::string rt = slurp(std::string(CLEAVE_SOURCE_DIR) + "/runtime/include/cleave/rng.h");
  ASSERT_FALSE(ir.empty());
  EXPECT_EQ(ir, rt) << "runtime/include/cleave/rng.h must be a byte-identical copy of ir/rng.h";
}

TEST(RuntimeFiles, NpyReadsOnlyTheRequestedSamplesWrappingAround) {
  std::string dir = temp_dir();
  // numpy writes the files: 7 samples of [2, 3] float32 (value = flat index / 4) and int64 labels 10 * i.
  std::string cmd = "/usr/bin/python3 -c \"import numpy as np; "
                    "np.save('" + dir + "/x.npy', (np.arange(42).reshape(7, 2, 3) / 4).astype(np.float32)); "
                    "np.save('" + dir + "/y.npy', np.arange(7, dtype=np.int64) * 10); "
                    "np.save('" + dir + "/d.npy', np.arange(10, dtype=np.float64).reshape(5, 2))\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  NpyFile x = npy_open(dir + "/x.npy");
  EXPECT_EQ(x.shape, (Dims{7, 2, 3}));
  EXPECT_EQ(x.sample_elems, 6);
  std::vector<float> buf(4 * 6);
  npy_read_samples(x, 5, 4, buf.data());  // samples 5, 6, 0, 1
  const int64_t expect_samples[] = {5, 6, 0, 1};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(buf[static_cast<size_t>(i * 6 + j)], (expect_samples[i] * 6 + j) / 4.0f);
  NpyFile y = npy_open(dir + "/y.npy");
  std::vector<int64_t> labels(3);
  npy_read_samples(y, 13, 3, labels.data());  // samples 6, 0, 1
  EXPECT_EQ(labels, (std::vector<int64_t>{60, 0, 10}));
  NpyFile d = npy_open(dir + "/d.npy");
  std::vector<float> dv(2);
  npy_read_samples(d, 3, 1, dv.data());
  EXPECT_EQ(dv, (std::vector<float>{6, 7}));
  // Fed to a tensor whose sample axis is dim 1 ([2, count, 3], outer 2): element [o, s, j] is sample s's [o, j].
  x.outer = 2;
  npy_read_samples(x, 5, 4, buf.data());
  for (int o = 0; o < 2; ++o)
    for (int s = 0; s < 4; ++s)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(buf[static_cast<size_t>((o * 4 + s) * 3 + j)], (expect_samples[s] * 6 + o * 3 + j) / 4.0f)
            << o << "," << s << "," << j;
}

TEST(RuntimeFiles, CheckpointRoundTripsNamedBuffers) {
  std::string path = temp_dir() + "/ck.bin";
  std::vector<float> w = {1.5f, -2.0f, 3.25f};
  std::vector<int64_t> steps = {7};
  checkpoint_save(path, {{"w", w.data(), 12}, {"step", steps.data(), 8}});
  std::vector<float> w2(3, 0);
  std::vector<int64_t> s2(1, 0);
  checkpoint_load(path, {{"step", s2.data(), 8}, {"w", w2.data(), 12}});  // order need not match
  EXPECT_EQ(w2, w);
  EXPECT_EQ(s2, steps);
}

TEST(RuntimeFiles, ArenaHandsOutAlignedZeroedOffsets) {
  Arena a(1000, 128);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.at(0)) % 128, 0u);
  float *f = a.reals(256, 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(f[i], 0.0f);
  EXPECT_EQ(static_cast<char *>(a.at(256)), reinterpret_cast<char *>(f));
}

TEST(RuntimeFiles, LossLineHasTheEvalFormat) {
  ::testing::internal::CaptureStdout();
  const float loss = 0.1f;
  log_loss(3, &loss);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "step 3 loss 0.100000001\n");
}

// A run with loss scaling keeps the scaler's state in the checkpoint manifest (TrainingRun::write_checkpoint), which
// every rank reads back on resume; a manifest without it is a run without loss scaling.
TEST(RuntimeFiles, ManifestCarriesTheLossScaler) {
  ckpt::Manifest m{12, 2, 32, ckpt::ScalerState{262144.0, 2, 6}};
  std::string text = ckpt::manifest_text(m);
  EXPECT_EQ(text, "{\"format\": \"cleave-checkpoint-1\", \"step\": 12, \"ranks\": 2, \"samples_per_step\": 32, "
                  "\"loss_scale\": 262144, \"growth_tracker\": 2, \"skipped_steps\": 6}\n");
  ckpt::Manifest back = ckpt::parse_manifest(text, "m.json");
  ASSERT_TRUE(back.scaler.has_value());
  EXPECT_EQ(back.scaler->scale, 262144.0);
  EXPECT_EQ(back.scaler->growth_tracker, 2);
  EXPECT_EQ(back.scaler->skipped_steps, 6);
  m.scaler.reset();
  EXPECT_FALSE(ckpt::parse_manifest(ckpt::manifest_text(m), "m.json").scaler.has_value());
  EXPECT_THROW(ckpt::parse_manifest("{\"format\": \"cleave-checkpoint-1\", \"step\": 1, \"ranks\": 1, "
                                    "\"loss_scale\": 8}", "m.json"),
               ckpt::Error);
}

TEST(RuntimeFilesDeathTest, BadNpyAbortsNamingTheFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenBLAS has started threads
  std::string path = temp_dir() + "/bad.npy";
  std::ofstream(path) << "not numpy";
  EXPECT_EXIT(npy_open(path), ::testing::ExitedWithCode(1), "cleave rank -?[0-9]+: .*bad.npy: not a .npy file");
}

// The ranks read .npy files with the reader `cleave run` checks them with (runtime/common/npy_format.h): the files it
// refuses up front (tests/cli/hostile_input.sh) are the ones a rank refuses, with the same message.
TEST(RuntimeFilesDeathTest, RefusesWhatTheCliRefuses) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string dir = temp_dir();
  std::string cmd = "/usr/bin/python3 -c \"import numpy as np; "
                    "np.save('" + dir + "/b.npy', np.ones((2, 3), bool)); "
                    "np.save('" + dir + "/f.npy', np.asfortranarray(np.ones((2, 3), np.float32))); "
                    "np.save('" + dir + "/yf.npy', np.array([3.5, 1.0]))\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EXIT(npy_open(dir + "/b.npy"), ::testing::ExitedWithCode(1), "b.npy: unsupported .npy dtype '\\|b1'");
  EXPECT_EXIT(npy_open(dir + "/f.npy"), ::testing::ExitedWithCode(1), "f.npy: fortran_order=True arrays are not supported");
  EXPECT_EXIT(npy_open(dir), ::testing::ExitedWithCode(1), "is a directory, not a .npy file");
  NpyFile y = npy_open(dir + "/yf.npy");
  std::vector<int64_t> labels(2);
  EXPECT_EXIT(npy_read_samples(y, 0, 2, labels.data()), ::testing::ExitedWithCode(1),
              "yf.npy: labels and indices must be an integer array");
}

TEST(RuntimeFilesDeathTest, CheckpointSizeMismatchNamesTheBuffer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string path = temp_dir() + "/ck2.bin";
  std::vector<float> w = {1, 2, 3};
  checkpoint_save(path, {{"w", w.data(), 12}});
  EXPECT_EXIT(checkpoint_load(path, {{"w", w.data(), 8}}), ::testing::ExitedWithCode(1),
              "buffer \"w\" has 12 bytes, expected 8");
}

// A checkpoint of another plan holds other boxes of the same tensors: loading it names the tensor and both boxes.
TEST(RuntimeFilesDeathTest, CheckpointOfAnotherSplitNamesTheBoxes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string path = temp_dir() + "/ck3.bin";
  std::vector<float> w = {1, 2, 3, 4};
  checkpoint_save(path, {{"w", w.data(), 16, "f32", {2, 4}, {0, 0}, {1, 4}}});
  std::vector<float> back(4, 0);
  checkpoint_load(path, {{"w", back.data(), 16, "f32", {2, 4}, {0, 0}, {1, 4}}});
  EXPECT_EQ(back, w);
  EXPECT_EXIT(checkpoint_load(path, {{"w", back.data(), 16, "f32", {2, 4}, {1, 0}, {2, 4}}}),
              ::testing::ExitedWithCode(1), "holds f32 box \\[0:1, 0:4\\] of \"w\", this rank needs f32 box \\[1:2, 0:4\\]");
}

}  // namespace
}  // namespace cleave::rt::testing
