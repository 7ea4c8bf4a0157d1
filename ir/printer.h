#pragma once
// The IR's canonical text form (DESIGN §2). One item per line, in id order, so the text is deterministic and
// parse(print(g)) reproduces g exactly (ids, names, attributes, constant data). Param data is not printed;
// `zeros` marks optimizer state that starts at zero (Tensor::zero_init).
//
//   graph main
//   tensor x f32[16,64] input
//   tensor c f32[] constant = [0.5]
//   tensor fc.weight.velocity f32[10,64] optimizer_state zeros
//   op Gemm_0 Gemm forward (x, fc.weight, fc.bias) -> (h) {alpha=1.0, beta=1.0, transA=0, transB=1}
//   op Gemm_0.grad Gemm backward group=Gemm_0 (h.grad, fc.weight, _) -> (x.grad) {...}
//   output loss
//   loss loss
//   assign fc.weight <- fc.weight.new
//
// Names made only of [A-Za-z0-9_.:/+-] print bare, others double-quoted with \" and \\ escapes; `_` is an absent
// operand. Floats print as the shortest text that reads back to the same value, always with a '.' or exponent.
#include <string>

#include "ir/graph.h"

namespace cleave {

std::string print_graph(const Graph &g);
/** The one-line form of an op, as in print_graph. */
std::string print_op(const Graph &g, const Op &op);
/** A name as it appears in the text (bare or quoted). */
std::string print_name(const std::string &name);
/** An attribute value as it appears in the text. */
std::string print_attr(const Attr &a);

}  // namespace cleave
