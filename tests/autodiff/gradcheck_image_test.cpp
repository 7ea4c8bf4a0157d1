// Finite-difference checks of the gradient rules of the image-layer kinds: InstanceNormalization, ConvTranspose
// (whose gradients are a Conv and a ConvGradFilter with X and dY swapped) and Resize.
#include <gtest/gtest.h>

#include "tests/autodiff/gradcheck.h"

namespace cleave::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(GradCheck, InstanceNormalization) {
  int seed = 3000;
  for (const Shape &shape : std::vector<Shape>{{2, 3, 4, 5}, {1, 2, 6}, {2, 2, 2, 3, 2}})
    for (bool stats : {false, true}) {
      GraphBuilder b(++seed);
      TensorId x = b.input(shape, -2, 2);
      TensorId scale = b.input({shape[1]}, 0.5, 1.5), bias = b.input({shape[1]});
      std::vector<TensorId> ys =
          b.op_multi(OpKind::InstanceNormalization, {x, scale, bias}, {{"epsilon", 1e-5}}, {true, stats, stats});
      check_gradients(b, {ys[0]}, {x, scale, bias},
                      "InstanceNormalization" + shape_str(shape) + (stats ? " +stats" : ""));
    }
}

TEST(GradCheck, ConvTranspose) {
  struct Case {
    Shape x, w;
    Ints strides, pads, dilations, out_pad;
    int64_t group;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 3, 3, 3}, {3, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, true},
      {{1, 4, 3, 2}, {4, 3, 3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 2}, {1, 0}, 1, false},
      {{2, 4, 2, 3}, {4, 1, 2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 2, true},
      {{2, 2, 4}, {2, 3, 3}, {3}, {1, 2}, {2}, {2}, 1, true},
  };
  int seed = 3100;
  for (const Case &c : cases) {
    GraphBuilder b(++seed);
    TensorId x = b.input(c.x), w = b.input(c.w);
    std::vector<TensorId> ins = {x, w};
    if (c.bias) ins.push_back(b.input({c.w[1] * c.group}));
    AttrMap attrs = {{"strides", c.strides},  {"pads", c.pads},   {"dilations", c.dilations},
                     {"group", c.group},      {"output_padding", c.out_pad}};
    check_gradients(b, {b.op(OpKind::ConvTranspose, ins, attrs)}, ins, "ConvTranspose case " + std::to_string(seed));
  }
}

TEST(GradCheck, Resize) {
  struct Case {
    Shape x;
    Ints sizes;
    std::string mode, coord, nearest;
  };
  const std::vector<Case> cases = {
      {{2, 2, 3, 4}, {2, 2, 6, 8}, "nearest", "asymmetric", "floor"},
      {{1, 2, 3, 3}, {1, 2, 6, 6}, "linear", "half_pixel", "floor"},
      {{1, 2, 3, 4}, {1, 2, 7, 5}, "linear", "align_corners", "floor"},
      {{2, 1, 5}, {2, 1, 3}, "linear", "pytorch_half_pixel", "floor"},
      {{1, 2, 3, 4}, {1, 2, 6, 7}, "cubic", "pytorch_half_pixel", "floor"},
      {{1, 1, 4, 3}, {1, 1, 3, 5}, "cubic", "align_corners", "floor"},
  };
  int seed = 3200;
  for (const Case &c : cases) {
    GraphBuilder b(++seed);
    TensorId x = b.input(c.x);
    std::vector<double> scales;
    for (size_t d = 0; d < c.x.size(); ++d)
      scales.push_back(static_cast<double>(c.sizes[d]) / static_cast<double>(c.x[d]));
    AttrMap attrs = {{"mode", c.mode},   {"coordinate_transformation_mode", c.coord}, {"nearest_mode", c.nearest},
                     {"scales", scales}, {"sizes", c.sizes}};
    if (c.mode == "cubic") {
      attrs["cubic_coeff_a"] = -0.75;
      attrs["exclude_outside"] = int64_t{0};
    }
    check_gradients(b, {b.op(OpKind::Resize, {x}, attrs)}, {x}, "Resize " + c.mode + " " + c.coord);
  }
}

}  // namespace
}  // namespace cleave::testing
