#pragma once
// Function ops: an op Cleave has no translator for, but which ONNX (its schema's function body) or the model (a
// FunctionProto of ModelProto.functions) defines as a composition of other ops, is imported as that composition.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace cleave {

/** Main-graph nodes that have a function body but were left as they are, by their index in the graph after
 *  expansion, each with why (`its function body needs RandomUniformLike`). */
using UnexpandedNodes = std::map<int, std::string>;

/** Replaces, in place and in order, every main-graph node that has no translator (find_translator: native
 *  translation always wins) but a function body by the body's nodes: a model-local function of the node's
 *  (domain, op) first, else the schema's body at the model's opset of the domain (HasFunction), else a body the
 *  schema builds from the node's attributes and the declared types of its inputs (HasContextDependentFunction;
 *  declared = graph inputs, initializers, value_info: expansion runs before shape inference).
 *
 *  Formal inputs and outputs become the node's actual ones (a missing optional input stays missing, an output
 *  the node does not ask for gets a fresh name); every other tensor and every body node is named
 *  `<node>/<name in the body>`, made unique against all names of the model, so IR ops trace back to the node.
 *  Attributes referring to the node's (ref_attr_name) take its value, else the schema's default, else are
 *  dropped. Body nodes without a translator are expanded in turn, at the body's opsets, at most 8 deep and 100000
 *  body nodes per model.
 *
 *  A node is expanded entirely or not at all. It is left as it is, with a reason, when a body node (after nested
 *  expansion) has no translator, uses a domain the model does not import, or was written for an opset at which
 *  its op means something else than at the model's opset (body nodes are translated at the model's opset, like
 *  every node; within ai.onnx 13..17 ops only gained types and attributes whose defaults keep the old meaning,
 *  except BatchNormalization and RoiAlign). When any node lacks a translator, every node of the graph gets the name
 *  the importer would have given it (an unnamed one `<OpType>_<index before expansion>`), so IR names do not shift.
 *  Nodes of training algorithms are not expanded. */
UnexpandedNodes expand_functions(onnx::ModelProto &m);

/** `base`, or `base.1`, `base.2`, ... : the first not in `taken`, which it joins. */
std::string fresh_name(std::set<std::string> &taken, const std::string &base);

/** The IR op names the importer gives the nodes of `g` (onnx_import.cpp's op_names): the node's name when set and
 *  unique, else `<OpType>_<index>`. A pass that replaces a node by several names every node so first, so the
 *  generated names of the nodes after it do not shift. */
std::vector<std::string> importer_names(const onnx::GraphProto &g);

}  // namespace cleave
