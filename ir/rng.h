#pragma once
// Counter-based RNG for Dropout (DESIGN §3): the draw for an element depends only on (seed, step, global element
// index), never on how the tensor is split or in which order elements are visited. Header-only and free of
// dependencies so the runtime's backends can carry a byte-identical copy.
#include <cstdint>

// __host__ __device__ under nvcc, so CUDA kernels draw exactly the CPU backend's numbers.
#if !defined(CLEAVE_HD)
#if defined(__CUDACC__)
#define CLEAVE_HD __host__ __device__
#else
#define CLEAVE_HD
#endif
#endif

namespace cleave {

/** splitmix64's finaliser: a bijective 64-bit mix. */
CLEAVE_HD inline constexpr uint64_t rng_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/** Uniform in [0, 1) with 24 random bits (exactly representable in float32). */
CLEAVE_HD inline constexpr float rng_uniform(uint64_t seed, int64_t step, int64_t index) {
  uint64_t h = rng_mix64(seed ^ rng_mix64(static_cast<uint64_t>(step) ^ rng_mix64(static_cast<uint64_t>(index))));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

/** Dropout keeps element `index` iff its draw is at least `ratio`. */
CLEAVE_HD inline constexpr bool dropout_keep(uint64_t seed, int64_t step, int64_t index, float ratio) {
  return rng_uniform(seed, step, index) >= ratio;
}

}  // namespace cleave
