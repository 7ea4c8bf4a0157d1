#pragma once
// Computes an op's output directly from its Description (loop over output vars and reduction vars, evaluate the
// body), so descriptions can be checked against the reference interpreter's kernels (Tofu could not).
#include <cstdint>
#include <vector>

#include "ir/describe/description.h"

namespace cleave::describe {

/** An input operand's value, row-major. */
struct EvalInput {
  Shape shape;
  const std::vector<double> *data = nullptr;
};

/** The output values (row-major, d.output_shape) of a description. `inputs` is indexed by op input slot (absent
 *  slots may be empty); `step` is the training step t. Precondition: is_evaluable(d). Accumulates in double. */
std::vector<double> evaluate(const Description &d, const std::vector<EvalInput> &inputs, int64_t step = 1);

}  // namespace cleave::describe
