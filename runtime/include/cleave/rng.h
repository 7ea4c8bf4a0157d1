#pragma once
// Counter-based RNG for Dropout and RandomLike (DESIGN §3): the draw for an element depends only on (seed, step,
// global element index), never on how the tensor is split or in which order elements are visited. Header-only and
// free of dependencies so the runtime's backends can carry a byte-identical copy.
#include <cmath>
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

/** A standard normal draw for element `index`: Box-Muller over the uniform draws 2 * index and 2 * index + 1 of a
 *  stream of its own (the seed mixed with a constant, so a uniform draw of the same seed is not correlated with it), in
 *  float arithmetic (backends agree up to their logf/cosf). */
CLEAVE_HD inline float rng_normal(uint64_t seed, int64_t step, int64_t index) {
  uint64_t s = seed ^ 0x6E6F726D616C0000ull;
  float u1 = 1.0f - rng_uniform(s, step, 2 * index);  // in (0, 1]: log(u1) is finite
  float u2 = rng_uniform(s, step, 2 * index + 1);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

/** RandomLike's value for element `index`: uniform in [a, b) or normal with mean a and scale b, in float. A uniform
 *  a + (b - a) * u that rounds up to b is the float below it. */
CLEAVE_HD inline float rng_draw(bool normal, float a, float b, uint64_t seed, int64_t step, int64_t index) {
  if (normal) return a + b * rng_normal(seed, step, index);
  float r = a + (b - a) * rng_uniform(seed, step, index);
  return a < b && r >= b ? nextafterf(b, a) : r;
}

/** Dropout keeps element `index` iff its draw is at least `ratio`. */
CLEAVE_HD inline constexpr bool dropout_keep(uint64_t seed, int64_t step, int64_t index, float ratio) {
  return rng_uniform(seed, step, index) >= ratio;
}

}  // namespace cleave
