#pragma once
// Elementwise fusion (DESIGN §6): a chain of elementwise ops on one rank becomes one generated functor marked
// CLEAVE_HD, launched once by rt::map, so the intermediate tensors are never written to memory and both backends
// run the same body.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cleave::codegen {

/** out[i] = f(ins[0][i], ins[1][i], ...) for i in [0, n): f's body is `lets`, each a float expression over the
 *  parameters x0, x1, ... (one per input) and the earlier lets v0, v1, ...; the last let is the result. With
 *  `block_inner` > 0, ins[0] broadcasts as one block instead (rt::map_block): x0 is ins[0][i / inner % mid]. */
struct MapSpec {
  int64_t n = 0;
  std::vector<std::string> ins;  // pointer expressions, distinct
  std::string out;               // pointer expression
  std::vector<std::string> lets;
  int64_t block_inner = 0, block_mid = 0;
};

/** `expr` with each whole-word identifier w replaced by rename(w) (x3 -> x5, v0 -> v2, a -> x0, ...); qualified
 *  names (std::exp) and float suffixes are left alone. */
std::string rename_words(const std::string &expr, const std::function<std::string(const std::string &)> &rename);

/** One elementwise op: `expr` is written over a, b, c (the op's operands in order). */
MapSpec elementwise(int64_t n, const std::string &expr, const std::vector<std::string> &ins, const std::string &out);

/** Whether fuse() can inline `producer` into `consumer`: same n, the consumer reads the producer's result, has no
 *  block operand of its own and does not read the producer's (a fused map has at most one block operand, first). */
bool fusable(const MapSpec &producer, const MapSpec &consumer);

/** The spec computing `consumer` with `producer` inlined: `producer.out` is one of the consumer's inputs and is not
 *  stored. Preconditions: fusable(producer, consumer); the producer's result is needed nowhere else. */
MapSpec fuse(const MapSpec &producer, const MapSpec &consumer);

/** rt::map(n, [] CLEAVE_HD (float x0, ...) { const float v0 = ...; return vK; }, out, x0, ...); or, with a block
 *  operand, rt::map_block(n, inner, mid, <the same functor>, out, x0, ...). */
std::string map_code(const MapSpec &spec);

}  // namespace cleave::codegen
