// The runtime kernels behind the image-layer kinds against the interpreter: instance_norm_forward / backward
// (InstanceNormalization, InstanceNormalizationGrad), conv_transpose_forward (ConvTranspose) and resize_forward /
// backward (Resize, ResizeGrad).
#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

using Ints = std::vector<int64_t>;

KernelCase instance_norm_case(Shape x) {
  return {"INSTANCE_NORM(x=" + dims_str(x) + ")", 1e-5, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x)));
            int64_t n = x[0], c = x[1], s = count(x) / (n * c);
            Shape stat{n, c}, ps{c};
            auto xd = random_data(rng, count(x), -2, 2), sd = random_data(rng, c, 0.5, 1.5);
            auto bd = random_data(rng, c), dyd = random_data(rng, count(x));
            OneOp f;
            f.in(x, xd);
            f.in(ps, sd);
            f.in(ps, bd);
            f.out(x);
            f.out(stat);
            f.out(stat);
            auto ref = f.run(OpKind::InstanceNormalization, {{"epsilon", 1e-5}});
            auto fx = to_f32(xd), fs = to_f32(sd), fb = to_f32(bd), fdy = to_f32(dyd);
            std::vector<float> y(fx.size()), mean(static_cast<size_t>(n * c)), invstd(mean.size());
            instance_norm_forward(n, c, s, fx.data(), fs.data(), fb.data(), 1e-5f, y.data(), mean.data(),
                                  invstd.data());
            double err = std::max({max_error(y, ref[0]), max_error(mean, ref[1]), max_error(invstd, ref[2])});
            // The gradient from the same (float) statistics on both sides.
            OneOp b;
            b.in(x, dyd);
            b.in(x, xd);
            b.in(ps, sd);
            b.in(stat, std::vector<double>(mean.begin(), mean.end()));
            b.in(stat, std::vector<double>(invstd.begin(), invstd.end()));
            b.out(x);
            b.out(ps);
            b.out(ps);
            auto rb = b.run(OpKind::InstanceNormalizationGrad);
            std::vector<float> dx(fx.size()), ds(static_cast<size_t>(c)), db(ds.size());
            instance_norm_backward(n, c, s, fdy.data(), fx.data(), fs.data(), mean.data(), invstd.data(), dx.data(),
                                   ds.data(), db.data());
            return std::max({err, max_error(dx, rb[0]), max_error(ds, rb[1]), max_error(db, rb[2])});
          }};
}

TEST(RuntimeKernels, InstanceNorm) {
  run_cases({instance_norm_case({2, 3, 4, 5}), instance_norm_case({1, 2, 7}), instance_norm_case({2, 2, 3, 2, 4}),
             instance_norm_case({3, 4, 1, 1})});
}

struct ConvTCase {
  Shape x, w;  // X [n, c_in, ...], W [c_in, c_out/group, k...]
  Ints strides, pads, dilations, out_pad;
  int64_t group;
  bool bias;
};

KernelCase conv_transpose_case(const ConvTCase &c) {
  std::string name = "CONV_TRANSPOSE(x=" + dims_str(c.x) + ",w=" + dims_str(c.w) + ",s=" + dims_str(c.strides) +
                     ",p=" + dims_str(c.pads) + ",d=" + dims_str(c.dilations) + ",op=" + dims_str(c.out_pad) +
                     ",g=" + std::to_string(c.group) + (c.bias ? ",bias" : "") + ")";
  return {name, 1e-5, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(c.x) + count(c.w)));
            size_t sp = c.x.size() - 2;
            Shape y{c.x[0], c.w[1] * c.group};
            Dims ys, xs, ks;
            for (size_t d = 0; d < sp; ++d) {
              int64_t o = c.strides[d] * (c.x[d + 2] - 1) + c.out_pad[d] + c.dilations[d] * (c.w[d + 2] - 1) + 1 -
                          c.pads[d] - c.pads[d + sp];
              y.push_back(o);
              ys.push_back(o);
              xs.push_back(c.x[d + 2]);
              ks.push_back(c.w[d + 2]);
            }
            auto xd = random_data(rng, count(c.x)), wd = random_data(rng, count(c.w)), bd = random_data(rng, y[1]);
            OneOp f;
            f.in(c.x, xd);
            f.in(c.w, wd);
            if (c.bias) f.in({y[1]}, bd);
            f.out(y);
            auto ref = f.run(OpKind::ConvTranspose, {{"strides", c.strides},
                                                     {"pads", c.pads},
                                                     {"dilations", c.dilations},
                                                     {"group", c.group},
                                                     {"output_padding", c.out_pad}});
            // The Conv whose input is Y and whose output is X.
            ConvShape s{c.x[0], y[1], c.x[1], c.group, ys, ks, xs, c.strides, c.pads, c.dilations};
            auto fx = to_f32(xd), fw = to_f32(wd), fb = to_f32(bd);
            std::vector<float> fy(static_cast<size_t>(count(y)));
            conv_transpose_forward(s, fx.data(), fw.data(), c.bias ? fb.data() : nullptr, fy.data());
            return max_error(fy, ref[0]);
          }};
}

TEST(RuntimeKernels, ConvTranspose) {
  std::vector<KernelCase> cases;
  for (const ConvTCase &c : std::vector<ConvTCase>{
           {{2, 3, 4, 4}, {3, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, true},
           {{1, 4, 3, 5}, {4, 3, 3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 2}, {1, 0}, 1, false},
           {{2, 4, 3, 3}, {4, 1, 2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 2, true},
           {{2, 2, 5}, {2, 3, 4}, {3}, {1, 2}, {1}, {2}, 1, true},
           {{1, 2, 2, 3, 2}, {2, 2, 2, 2, 2}, {2, 1, 2}, {0, 0, 1, 0, 1, 0}, {1, 1, 1}, {0, 0, 1}, 1, true}})
    cases.push_back(conv_transpose_case(c));
  run_cases(cases);
}

struct ResizeCase {
  Shape x;
  Ints sizes;
  std::string mode, coord, nearest;
  double cubic_a = -0.75;
  int64_t exclude_outside = 0;
};

KernelCase resize_case(const ResizeCase &c) {
  return {"RESIZE(x=" + dims_str(c.x) + ",sizes=" + dims_str(c.sizes) + "," + c.mode + "," + c.coord + "," +
              c.nearest + (c.mode == "cubic" ? ",a=" + std::to_string(c.cubic_a) + ",exclude_outside=" +
                                                   std::to_string(c.exclude_outside)
                                             : "") +
              ")",
          1e-5, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(c.x) + count(c.sizes)));
            std::vector<double> scales;
            for (size_t d = 0; d < c.x.size(); ++d)
              scales.push_back(static_cast<double>(c.sizes[d]) / static_cast<double>(c.x[d]));
            AttrMap attrs = {{"mode", c.mode},
                             {"coordinate_transformation_mode", c.coord},
                             {"nearest_mode", c.nearest},
                             {"scales", scales},
                             {"sizes", c.sizes}};
            if (c.mode == "cubic") {
              attrs["cubic_coeff_a"] = c.cubic_a;
              attrs["exclude_outside"] = c.exclude_outside;
            }
            auto xd = random_data(rng, count(c.x)), dyd = random_data(rng, count(c.sizes));
            OneOp f;
            f.in(c.x, xd);
            f.out(c.sizes);
            auto ref = f.run(OpKind::Resize, attrs);
            OneOp b;
            b.in(c.sizes, dyd);
            b.out(c.x);
            auto rb = b.run(OpKind::ResizeGrad, attrs);
            ResizeShape s;
            s.planes = c.x[0] * c.x[1];
            s.x.assign(c.x.begin() + 2, c.x.end());
            s.y.assign(c.sizes.begin() + 2, c.sizes.end());
            s.scales.assign(scales.begin() + 2, scales.end());
            s.mode = c.mode == "linear" ? ResizeMode::linear : c.mode == "cubic" ? ResizeMode::cubic : ResizeMode::nearest;
            s.cubic_a = c.cubic_a;
            s.exclude_outside = c.exclude_outside != 0;
            s.coord = c.coord == "asymmetric"      ? ResizeCoord::asymmetric
                      : c.coord == "align_corners" ? ResizeCoord::align_corners
                      : c.coord == "pytorch_half_pixel" ? ResizeCoord::pytorch_half_pixel
                                                        : ResizeCoord::half_pixel;
            s.nearest = c.nearest == "floor" ? ResizeNearest::floor : ResizeNearest::round_prefer_floor;
            auto fx = to_f32(xd), fdy = to_f32(dyd);
            std::vector<float> y(static_cast<size_t>(count(c.sizes))), dx(fx.size());
            resize_forward(s, fx.data(), y.data());
            resize_backward(s, fdy.data(), dx.data());
            return std::max(max_error(y, ref[0]), max_error(dx, rb[0]));
          }};
}

TEST(RuntimeKernels, Resize) {
  std::vector<KernelCase> cases;
  for (const ResizeCase &c : std::vector<ResizeCase>{
           {{2, 3, 4, 5}, {2, 3, 8, 10}, "nearest", "asymmetric", "floor"},
           {{1, 2, 3, 3}, {1, 2, 9, 6}, "nearest", "asymmetric", "floor"},
           {{2, 2, 4, 5}, {2, 2, 8, 10}, "linear", "half_pixel", "floor"},
           {{2, 2, 4, 5}, {2, 2, 8, 10}, "linear", "align_corners", "floor"},
           {{1, 3, 6, 4}, {1, 3, 3, 7}, "linear", "pytorch_half_pixel", "floor"},
           {{2, 2, 5}, {2, 2, 11}, "linear", "half_pixel", "floor"},
           {{1, 2, 3, 4, 2}, {1, 2, 6, 8, 4}, "linear", "align_corners", "floor"},
           {{1, 2, 5, 5}, {1, 2, 3, 2}, "nearest", "half_pixel", "round_prefer_floor"},
           {{2, 2, 4, 5}, {2, 2, 8, 10}, "cubic", "pytorch_half_pixel", "floor"},
           {{2, 2, 4, 5}, {2, 2, 7, 3}, "cubic", "align_corners", "floor"},
           {{1, 2, 6, 4}, {1, 2, 4, 9}, "cubic", "half_pixel", "floor", -0.5, 1},
           {{1, 2, 3, 4, 2}, {1, 2, 5, 8, 3}, "cubic", "asymmetric", "floor"}})
    cases.push_back(resize_case(c));
  run_cases(cases);
}

}  // namespace
}  // namespace cleave::rt::testing
