#pragma once
// Internal to the CPU backend: what its files share beyond rt.h.
#include <string>
#include <vector>

#include "cleave/rt.h"
#include "common/strided_index.h"

namespace cleave::rt::detail {

/** Calls row(flat, at, n, s) for each run of the innermost merged dim (hd::coalesce_dims) of the row-major
 *  `dims`: its n elements from `flat` lie at at + j * s in the other buffer. An odometer over the outer dims (no
 *  divisions), the run left to the caller's loop, which the compiler can vectorise. Nothing for an empty tensor; one
 *  run of one element for a scalar. */
template <class Row>
void for_each_row(const Dims &dims, const std::vector<int64_t> &st, Row row) {
  Dims md = dims;
  std::vector<int64_t> ms = st;
  hd::coalesce_dims(md, ms);
  int64_t n = 1;
  for (int64_t v : md) n *= v;
  if (n == 0) return;
  if (md.empty()) {
    row(0, 0, 1, 0);
    return;
  }
  size_t r = md.size();
  const int64_t inner = md[r - 1], s = ms[r - 1];
  std::vector<int64_t> idx(r, 0);
  int64_t at = 0;
  for (int64_t f = 0; f < n; f += inner) {
    row(f, at, inner, s);
    for (size_t d = r - 1; d-- > 0;) {
      at += ms[d];
      if (++idx[d] < md[d]) break;
      at -= ms[d] * idx[d];
      idx[d] = 0;
    }
  }
}

/** A row-major tensor reduced over some axes: `ny` output slots (the kept dims, row-major) for `nx` input elements.
 *  fail()s naming `what` on an axis out of range. */
class ReductionWalk {
 public:
  ReductionWalk(const Dims &x_shape, const Dims &axes, const char *what) : shape_(x_shape), ostride_(x_shape.size()) {
    size_t rank = x_shape.size();
    std::vector<bool> reduced(rank, false);
    for (int64_t a : axes) {
      if (a < 0 || a >= static_cast<int64_t>(rank))
        fail(std::string(what) + ": axis " + std::to_string(a) + " out of range");
      reduced[static_cast<size_t>(a)] = true;
    }
    // Output strides over the input's dims (0 on reduced dims), so each input element knows its output slot.
    for (size_t d = rank; d-- > 0;) {
      nx *= x_shape[d];
      if (!reduced[d]) {
        ostride_[d] = ny;
        ny *= x_shape[d];
      }
    }
  }

  /** Calls visit(f, o) for every input element f in order, o its output slot. */
  template <class Visit>
  void each(Visit visit) const {
    std::vector<int64_t> idx(shape_.size(), 0);
    int64_t o = 0;
    for (int64_t f = 0; f < nx; ++f) {
      visit(f, o);
      for (size_t d = shape_.size(); d-- > 0;) {
        o += ostride_[d];
        if (++idx[d] < shape_[d]) break;
        o -= ostride_[d] * idx[d];
        idx[d] = 0;
      }
    }
  }

  /** Calls row(f, o, n, s) for runs of n consecutive input elements from f whose output slots are o + j * s: s is 0
   *  where the innermost dims are reduced (a row sum) and 1 where they are kept (a column sum). The same visit as
   *  each(), with the innermost run of dims (merged where they are both reduced or both kept and contiguous) hoisted
   *  into a loop the caller can vectorise. */
  template <class Row>
  void each_row(Row row) const {
    for_each_row(shape_, ostride_, row);
  }

  int64_t ny = 1, nx = 1;

 private:
  Dims shape_;
  std::vector<int64_t> ostride_;
};

/** acc[o + j * s] += x[j] for j in [0, n), in double: a row's sum (s == 0, four interleaved partial sums) or a
 *  column update (s != 0). The reductions' inner loop (ReductionWalk::each_row). */
inline void accumulate_row(const real *x, int64_t n, double *acc, int64_t s) {
  if (s != 0) {
    for (int64_t j = 0; j < n; ++j) acc[j * s] += x[j];
    return;
  }
  double t[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int k = 0; k < 4; ++k) t[k] += x[j + k];
  for (; j < n; ++j) t[0] += x[j];
  *acc += (t[0] + t[1]) + (t[2] + t[3]);
}

/** Creates the point-to-point communicator (mpi.cpp); called by init() on every rank. */
void init_communication();
/** The threads of this rank's kernels (threads.cpp): CLEAVE_THREADS, else every core of the node for a rank alone on
 *  it, else the node's cores shared among its ranks (at least one, at most the cores the rank is bound to). */
int threads_per_rank();
/** Sets OpenBLAS's and oneDNN's (OpenMP's) thread counts to threads_per_rank(), widening the rank's CPU binding when
 *  it owns more cores than it is bound to; called by init(). */
void configure_threads();
/** Frees the cached group communicators (mpi.cpp); called by finalize(). */
void release_communicators();

/** Starts the communication watchdog (watchdog.cpp) unless CLEAVE_COMM_TIMEOUT is 0. The timeout in seconds comes
 *  from CLEAVE_COMM_TIMEOUT (default 900). Called once by init(). */
void start_watchdog(int rank);

/** Marks a blocking communication call in progress for the watchdog: if it lasts longer than the timeout, the
 *  process prints `cleave rank R: <what> on group [..] timed out after N s ...` and exits, which makes the launcher
 *  end the whole job, so a dead or stuck peer never hangs the others. */
class CommWatch {
 public:
  CommWatch(const char *what, const std::vector<int> &ranks);
  ~CommWatch();
  CommWatch(const CommWatch &) = delete;
  CommWatch &operator=(const CommWatch &) = delete;
};

}  // namespace cleave::rt::detail
