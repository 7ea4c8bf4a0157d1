#pragma once
// Collective recognition (DESIGN §4): communication is derived as "who needs which box of whom"; these predicates
// say when such a pattern is exactly a collective, so lowering can call all-gather / reduce-scatter / all-to-all
// instead of the generic grouped send/recv.
#include <cstdint>
#include <vector>

#include "planner/plan/region.h"

namespace cleave::codegen {

using plan::Box;

using plan::box_intersect;
using plan::box_volume;
bool box_contains(const Box &outer, const Box &inner);

/** The groups of `devices` (laid out row-major over `mesh`) whose mesh coordinates differ only along `axis`, in
 *  order of their other coordinates, each ordered by its coordinate along `axis`: the communicators of that axis. */
std::vector<std::vector<int>> axis_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          size_t axis);

/** The groups of `devices` whose mesh coordinates differ only along `axes`, in order of their other coordinates, each
 *  ordered row-major by its coordinates along `axes`: the communicators of the product of those axes (one all-reduce
 *  of a tensor partial on several axes runs over such a group). */
std::vector<std::vector<int>> axes_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          const std::vector<size_t> &axes);

/** `blocks` are non-empty, of one size, inside `whole`, pairwise disjoint, and cover it. */
bool tiles(const std::vector<Box> &blocks, const Box &whole);

/** `blocks`, in order, are consecutive row-major element ranges of `whole` starting at its first element: a buffer
 *  holding `whole` is the concatenation of buffers holding the blocks. */
bool concatenates(const std::vector<Box> &blocks, const Box &whole);

/** All-to-all: member i owns owned[i] and needs wanted[i]; every owned[i] ∩ wanted[j] is non-empty and of one size,
 *  the owned boxes are pairwise disjoint, and each wanted[j] is covered by its parts. */
bool all_to_all_pattern(const std::vector<Box> &owned, const std::vector<Box> &wanted);

}  // namespace cleave::codegen
