#pragma once
// The plan (DESIGN §4): how every op and tensor of a graph is split over the devices.
//
// Every op gets a parallel config: an ordered device group, a mesh shape over it (product = group size; device i
// of the group sits at the row-major mesh coordinates of i), and per mesh axis the loop variable of the op's
// description that is split along it, or none (the op's computation is replicated along that axis). The vars are
// those of the description of output 0 (of the first present output if output 0 is absent); the other outputs
// follow by var name. A var split on several axes is divided by their product, the earlier axis the more
// significant.
// Every tensor gets a sharding over its device group: per mesh axis split(dim), replicate, or partial (the value
// is the sum over that axis). A produced tensor's sharding is the one its producer's config implies (split output
// var -> split(the dim it indexes), split reduction var -> partial, none or a var the output does not depend on ->
// replicate); sources (inputs, labels, params, optimizer state, constants) may be sharded freely.
//
// Canonical text, one line per tensor then per op, in IR id order, names printed as ir/printer.h prints them,
// integers only:
//
//   plan devices=2
//   tensor x devices=[0,1] mesh=[2] [split(0)]
//   tensor net.0.weight devices=[0,1] mesh=[2] [replicate]
//   tensor net.0.weight.grad devices=[0,1] mesh=[2] [partial]
//   op /net/net.0/Gemm devices=[0,1] mesh=[2] [m]
//   op net.0.weight.update devices=[0,1] mesh=[2] [-]
//
// The bracket after the mesh has one entry per mesh axis: for a tensor split(D) | replicate | partial, for an op a
// var name or `-` (none). Lines starting with `#` and blank lines are ignored by the parser; a name holding a line
// break cannot be written. validate.h checks a plan against its graph; make_plan.h makes one; region.h says which
// box of each tensor a device owns and reads.
//
// A hand-written plan may leave out the lines of produced tensors: `cleave compile --plan` fills each in with the
// sharding its producer's config implies (complete_plan in validate.h), so such a plan is its op lines plus the lines
// of its source tensors. The bundle's plan.txt is the completed plan.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cleave::plan {

struct AxisSharding {
  enum class Kind : uint8_t { replicate, split, partial };
  Kind kind = Kind::replicate;
  /** The tensor dim for split. */
  int dim = -1;
  bool operator==(const AxisSharding &) const = default;
};

struct Sharding {
  std::vector<int> devices;
  std::vector<int64_t> mesh;
  /** One per mesh axis. */
  std::vector<AxisSharding> axes;
  bool operator==(const Sharding &) const = default;
};

struct ParallelConfig {
  std::vector<int> devices;
  std::vector<int64_t> mesh;
  /** One per mesh axis: a var name of the op's description, or empty for none. */
  std::vector<std::string> vars;
  bool operator==(const ParallelConfig &) const = default;
};

struct TensorEntry {
  std::string name;
  Sharding sharding;
  bool operator==(const TensorEntry &) const = default;
};

struct OpEntry {
  std::string name;
  ParallelConfig config;
  bool operator==(const OpEntry &) const = default;
};

/** A plan as written: entries by name, in text order (make_plan emits IR id order). validate_plan ties it to a
 *  graph. */
struct Plan {
  int devices = 1;
  std::vector<TensorEntry> tensors;
  std::vector<OpEntry> ops;
  bool operator==(const Plan &) const = default;
};

/** "[split(0),replicate]". */
std::string sharding_axes_str(const Sharding &s);
std::string print_plan(const Plan &p);
/** Reads the text print_plan writes: parse_plan(print_plan(p)) == p. Throws UserError `<source>:<line>: <problem>`
 *  on malformed text. Names are not checked against any graph here (validate_plan does that). */
Plan parse_plan(const std::string &text, const std::string &source = "<plan>");

}  // namespace cleave::plan
