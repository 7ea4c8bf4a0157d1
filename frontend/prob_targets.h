#pragma once
// Cross-entropy with probability targets. torch 1.13 exports F.cross_entropy(scores, probs) (targets of the scores'
// shape, each row a distribution over the classes: soft labels, mixup, distillation) as SoftmaxCrossEntropyLoss with
// float labels, which the op's schema does not allow (its labels are class indices). ONNX's checker rejects such a
// node, so before it runs the node becomes what torch computes: -sum_c probs[n, c, ...] * LogSoftmax(scores)[n, c, ...],
// reduced over the samples (and spatial positions) as `reduction` says.
#include <onnx/onnx_pb.h>

namespace cleave {

/** Replaces, in place, each main-graph SoftmaxCrossEntropyLoss (ai.onnx) whose labels are declared float (a graph
 *  input, initializer or value_info of a floating type) by LogSoftmax(axis 1), Mul, ReduceSum(axis 1), the
 *  reduction (ReduceMean or ReduceSum over all axes, or none) and Neg. Its log_prob output, when asked for, is the
 *  LogSoftmax's. New nodes are named `<node>/<OpType>` and new tensors `<node>/<what>`, made unique; when a node is
 *  replaced, every node is first named as the importer would name it (importer_names). A class weight or a
 *  non-negative ignore_index with float labels, or labels of rank 1, is an error naming the node (torch refuses both). */
void expand_prob_target_losses(onnx::ModelProto &m);

}  // namespace cleave
