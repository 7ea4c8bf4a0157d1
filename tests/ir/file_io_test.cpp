// ir/file_io.h: outputs replace only regular files, leave nothing behind on failure, and keep symlinks.
#include "ir/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/error.h"

namespace cleave {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("cleave_file_io_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string error_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const UserError &e) {
    return e.what();
  }
  return "(no error)";
}

size_t entries(const fs::path &dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto &e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(FileIo, WritesAndReplacesRegularFiles) {
  TempDir d;
  fs::path p = d.path / "out.txt";
  write_file_atomically("-o", p.string(), "one");
  EXPECT_EQ(slurp(p), "one");
  write_file_atomically("-o", p.string(), "two");
  EXPECT_EQ(slurp(p), "two");
  EXPECT_EQ(entries(d.path), 1u);  // no temporary left
}

TEST(FileIo, RefusesAnythingButARegularFile) {
  TempDir d;
  EXPECT_EQ(error_of([] { write_file_atomically("--save-model", "/dev/null", "x"); }),
            "--save-model: /dev/null exists and is not a regular file; refusing to replace it");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  fs::create_directory(d.path / "dir");
  EXPECT_EQ(error_of([&] { write_file_atomically("-o", (d.path / "dir").string(), "x"); }),
            "-o: " + (d.path / "dir").string() + " exists and is not a regular file; refusing to replace it");
  EXPECT_EQ(error_of([&] { check_output_file("-o", (d.path / "no" / "f").string()); }),
            "-o: directory " + (d.path / "no").string() + " does not exist");
  EXPECT_EQ(entries(d.path), 1u);
}

TEST(FileIo, SymlinkToAFileKeepsTheLink) {
  TempDir d;
  std::ofstream(d.path / "real.txt") << "old";
  fs::create_symlink(d.path / "real.txt", d.path / "link.txt");
  write_file_atomically("-o", (d.path / "link.txt").string(), "new");
  EXPECT_TRUE(fs::is_symlink(d.path / "link.txt"));
  EXPECT_EQ(slurp(d.path / "real.txt"), "new");
}

TEST(FileIo, DirectoriesAreReplacedOnlyWhenTheyHoldTheMarker) {
  TempDir d;
  fs::path b = d.path / "bundle";
  auto fill = [](const std::string &dir) { std::ofstream(fs::path(dir) / "manifest.json") << "{}"; };
  write_dir_atomically("-o", b.string(), "manifest.json", fill);
  write_dir_atomically("-o", b.string(), "manifest.json", fill);  // a previous bundle: replaced
  EXPECT_TRUE(fs::exists(b / "manifest.json"));
  fs::create_directory(d.path / "home");
  std::ofstream(d.path / "home" / "keep.txt") << "mine";
  EXPECT_EQ(error_of([&] { write_dir_atomically("-o", (d.path / "home").string(), "manifest.json", fill); }),
            "-o: " + (d.path / "home").string() + " is a directory without manifest.json; refusing to replace it");
  EXPECT_TRUE(fs::exists(d.path / "home" / "keep.txt"));
  // A failure while filling leaves the old output and no temporary.
  EXPECT_EQ(error_of([&] {
              write_dir_atomically("-o", b.string(), "manifest.json",
                                   [](const std::string &) { throw UserError("boom"); });
            }),
            "boom");
  EXPECT_TRUE(fs::exists(b / "manifest.json"));
  EXPECT_EQ(entries(d.path), 2u);
}

}  // namespace
}  // namespace cleave
