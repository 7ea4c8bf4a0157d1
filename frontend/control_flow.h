#pragma once
// Control flow whose course is known at compile time, imported as the nodes it runs.
//
// If of a constant condition: torch writes one where a value it did not know while tracing (a dim's size) picks the
// code: nn.LocalResponseNorm's squeeze exports as If(Equal(Shape(x)[d], 1), Squeeze, Identity). With static shapes
// the importer folds such a condition to a constant, and the If is the branch it takes.
//
// Loop of a constant trip count: torch writes one for nn.EmbeddingBag (a bag per iteration, its bounds read from
// offsets). With static shapes and constant offsets the count and every bound fold, and the Loop is its body
// unrolled, each iteration's nodes translated with the iteration number a constant.
//
// Both run at translation, not as ModelProto passes before it: the condition or count is usually a chain of shape
// ops on intermediate tensors, whose value only the importer knows (after --batch fixed the inputs and the IR's shape
// rules ran). In file order, a subgraph's constants and nested Ifs and Loops are known when a later node needs them.
#include "frontend/importer.h"

namespace cleave {

/** Translates If node `n` whose condition is a compile-time constant as the nodes of the branch it selects
 *  (then_branch if the one element is nonzero, else else_branch), translated in order, nested Ifs in turn.
 *
 *  Names follow ONNX's scoping: a branch node's input that the branch does not define is the outer scope's tensor
 *  of that name. The branch's k-th output becomes the node's k-th output (its producer writes it directly, or an
 *  Identity copies an outer tensor or a branch initializer); its other tensors keep their names, made unique, and
 *  its nodes become IR ops `<If node>/<branch node>` (an unnamed one `<OpType>_<index in the branch>`).
 *
 *  A condition that is not a compile-time constant, or a branch node without a translator (function ops are not
 *  expanded inside branches), fails with the importer's unsupported-node line (exit 2) naming that node. */
void translate_if(Importer &im, const NodeCtx &n);

/** Translates Loop node `n` as its body unrolled: for i = 0, 1, ... while i < M and cond, the body's nodes translated
 *  with iter_num = i and cond_in = cond as constants and the loop-carried inputs bound to the previous iteration's
 *  outputs (the node's initial values at i = 0). M (input 0; unbounded where absent) and cond (input 1, true where
 *  absent) must be compile-time constants, as must each iteration's cond_out; at most kMaxLoopUnroll iterations run.
 *  The node's loop-carried outputs are the last iteration's (Identity copies); its scan outputs are the iterations'
 *  values stacked along a new first axis (Reshape + Concat). Names and unsupported nodes as for If, the body's nodes
 *  becoming ops `<Loop node>/<body node>` once per iteration, made unique. */
void translate_loop(Importer &im, const NodeCtx &n);

/** The most iterations translate_loop unrolls: each one copies the body into the graph. */
constexpr int64_t kMaxLoopUnroll = 4096;

}  // namespace cleave
