#pragma once
// If nodes of a compile-time constant condition. torch writes them where a value it did not know while tracing (a dim's
// size) picks the code: nn.LocalResponseNorm's squeeze exports as If(Equal(Shape(x)[d], 1), Squeeze, Identity). With
// static shapes the importer folds such a condition to a constant, and the If is the branch it takes.
//
// The fold runs at translation, not as a ModelProto pass before it: the condition is usually a chain of shape ops
// on intermediate tensors, whose value only the importer knows (after --batch fixed the inputs and the IR's shape
// rules ran). In file order, a branch's constants and nested Ifs are known when a later If needs them.
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

}  // namespace cleave
