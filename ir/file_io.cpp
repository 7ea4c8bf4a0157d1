#include "ir/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ir/error.h"

namespace cleave {
namespace {
namespace fs = std::filesystem;

fs::path parent_dir(const fs::path &p) { return p.parent_path().empty() ? fs::path(".") : p.parent_path(); }

void check_parent(const std::string &flag, const fs::path &p) {
  fs::path dir = p.parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::is_directory(dir, ec))
    CLEAVE_USER_ERROR(flag, ": directory ", dir.string(), " does not exist");
}

/** fsync of an open path (a file or a directory); best effort for directories, whose fsync some file systems
 *  refuse. */
bool sync_path(const fs::path &p, bool directory) {
  int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return directory;
  bool ok = ::fsync(fd) == 0 || directory;
  ::close(fd);
  return ok;
}

mode_t default_mode() {
  mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

}  // namespace

void check_output_file(const std::string &flag, const std::string &path) {
  check_parent(flag, path);
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);  // follows symlinks
  if (fs::exists(st) && !fs::is_regular_file(st))
    CLEAVE_USER_ERROR(flag, ": ", path, " exists and is not a regular file; refusing to replace it");
}

void write_file_atomically(const std::string &flag, const std::string &path, const std::string &bytes) {
  check_output_file(flag, path);
  // A symlink to a regular file: write the file it points at, and keep the link.
  std::error_code ec;
  fs::path target(path);
  if (fs::is_symlink(fs::symlink_status(path, ec))) {
    target = fs::canonical(path, ec);
    if (ec) CLEAVE_USER_ERROR(flag, ": cannot resolve ", path, ": ", ec.message());
  }
  mode_t mode = default_mode();
  struct stat old {};
  if (::stat(target.c_str(), &old) == 0) mode = old.st_mode & 07777;
  std::string tmpl = (parent_dir(target) / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) CLEAVE_USER_ERROR(flag, ": cannot write ", path, ": ", std::strerror(errno));
  auto fail = [&](int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmpl.c_str());
    CLEAVE_USER_ERROR(flag, ": cannot write ", path, ": ", std::strerror(err));
  };
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode) != 0) fail(errno);
  if (::fsync(fd) != 0) fail(errno);
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) fail(errno);
  // The checks above ran before the write; a path that became a non-file meanwhile is still not replaced.
  struct stat now {};
  if (::lstat(target.c_str(), &now) == 0 && !S_ISREG(now.st_mode)) {
    ::unlink(tmpl.c_str());
    CLEAVE_USER_ERROR(flag, ": ", path, " exists and is not a regular file; refusing to replace it");
  }
  if (::rename(tmpl.c_str(), target.c_str()) != 0) fail(errno);
  sync_path(parent_dir(target), true);
}

void check_output_dir(const std::string &flag, const std::string &path, const std::string &marker) {
  check_parent(flag, path);
  std::error_code ec;
  fs::file_status st = fs::symlink_status(path, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_directory(st))
    CLEAVE_USER_ERROR(flag, ": ", path, " exists and is not a directory; refusing to replace it");
  if (!fs::is_empty(path, ec) && !fs::exists(fs::path(path) / marker))
    CLEAVE_USER_ERROR(flag, ": ", path, " is a directory without ", marker, "; refusing to replace it");
}

void write_dir_atomically(const std::string &flag, const std::string &path, const std::string &marker,
                          const std::function<void(const std::string &tmp_dir)> &fill) {
  check_output_dir(flag, path, marker);
  fs::path target(path);
  fs::path tmp = parent_dir(target) / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    fs::create_directory(tmp);
    fill(tmp.string());
    for (const fs::directory_entry &e : fs::recursive_directory_iterator(tmp))
      if (e.is_regular_file() && !sync_path(e.path(), false))
        CLEAVE_USER_ERROR(flag, ": cannot write ", e.path().string(), ": ", std::strerror(errno));
    sync_path(tmp, true);
    check_output_dir(flag, path, marker);
    fs::remove_all(target);
    fs::rename(tmp, target);
    sync_path(parent_dir(target), true);
  } catch (const fs::filesystem_error &e) {
    fs::remove_all(tmp, ec);
    CLEAVE_USER_ERROR(flag, ": cannot write ", path, ": ", e.code().message());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace cleave
