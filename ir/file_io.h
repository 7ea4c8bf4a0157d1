#pragma once
// Writing output files so that a failure leaves nothing half-written and nothing but a regular file is ever replaced.
// Every output of the compiler (plans, models, tables, profiles, bundles) goes through here; the runtime, which may
// include nothing of ours, keeps its own copy of the same rules.
#include <functional>
#include <string>

namespace cleave {

/** Checks, before any work, that `path` can be written by write_file_atomically: its directory exists and `path` is
 *  missing or a regular file (symlinks are followed). Throws UserError "FLAG: ..." otherwise. */
void check_output_file(const std::string &flag, const std::string &path);

/** Writes `bytes` to `path` through a temporary file in the same directory, fsynced and then renamed over `path`:
 *  readers see the old file or the new one, never a part. Refuses (UserError "FLAG: ...", nothing written) when
 *  `path` exists and is not a regular file, e.g. a device node, a directory or a fifo. */
void write_file_atomically(const std::string &flag, const std::string &path, const std::string &bytes);

/** Checks, before any work, that the directory `path` can be written by write_dir_atomically: its parent exists and
 *  `path` is missing, an empty directory, or a directory holding `marker` (a previous output of the same kind). */
void check_output_dir(const std::string &flag, const std::string &path, const std::string &marker);

/** Fills a fresh temporary directory beside `path` with `fill(tmp_dir)`, then replaces `path` with it (after the
 *  same checks as check_output_dir). On any exception the temporary directory is removed and `path` is untouched. */
void write_dir_atomically(const std::string &flag, const std::string &path, const std::string &marker,
                          const std::function<void(const std::string &tmp_dir)> &fill);

}  // namespace cleave
