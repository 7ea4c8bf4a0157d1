#pragma once
// Checkpoints on the compiler's side: finding the newest complete one, putting tensors back together from the
// ranks' shards, and cutting them again for another plan (reshard). The ranks write them (rt::TrainingRun), in the
// format of runtime/common/checkpoint_format.h: CK/step-<k>/rank_<r>.bin, then CK/step-<k>/manifest.json.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/bundle_run.h"
#include "runtime/common/checkpoint_format.h"

namespace cleave::codegen {

/** A tensor put back together from shards: row-major little-endian bytes. */
struct WholeTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/** Every tensor of `files` (checkpoint files with layouts), whole: each shard written at its box. Throws UserError
 *  naming the file and tensor when shards disagree on a tensor's dtype or shape, a shard's size is not its box's, or
 *  the shards leave part of a tensor uncovered. */
std::map<std::string, WholeTensor> assemble_shards(const std::vector<std::string> &files);

/** A complete checkpoint: its step directory (holding manifest.json and rank_<r>.bin), step and rank count. */
struct Checkpoint {
  std::string dir;
  int64_t step = 0;
  int ranks = 0;
  /** Loss scaling's state, for a run with it (rt::ckpt::Manifest::scaler). */
  std::optional<rt::ckpt::ScalerState> scaler;
};

/** The checkpoint `path` names: `path` itself when it holds manifest.json, else the complete step-<k> directory
 *  under it with the highest k; nullopt when there is none. Throws UserError for an unreadable manifest. */
std::optional<Checkpoint> find_checkpoint(const std::string &path);

/** The rank files of `ck`, in rank order. */
std::vector<std::string> checkpoint_files(const Checkpoint &ck);

/** Whether bundle `b`'s ranks hold exactly the boxes `ck`'s ranks held, rank by rank (a resume needs no reshard). */
bool same_layout(const Checkpoint &ck, const Bundle &b);

/** Writes to `out_dir` a complete checkpoint of `ck`'s step for bundle `b`: every persistent box of every rank of b
 *  (its weights files say which) cut from `ck`'s whole tensors. Throws UserError naming a tensor b needs that
 *  `ck` lacks or holds with another shape. */
void reshard_checkpoint(const Checkpoint &ck, const Bundle &b, const std::string &out_dir);

}  // namespace cleave::codegen
