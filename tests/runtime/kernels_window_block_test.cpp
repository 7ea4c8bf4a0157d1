// Convolution and pooling kernels on spatial blocks (codegen's halo splits) against the reference interpreter's
// whole-op result cut to the block: local (asymmetric, negative) pads for the convolutions, PoolShape's block fields
// for the pools, and partial sums over blocks (ConvGradFilter, GlobalAveragePool) against the whole op. The blocks'
// halos are found here by enumerating every window tap, independently of the planner's region analysis.
#include <climits>

#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

using Range = std::pair<int64_t, int64_t>;  // [first, second)
using Block = std::vector<Range>;           // one range per spatial dim

Dims extents(const Block &b) {
  Dims e;
  for (const Range &r : b) e.push_back(r.second - r.first);
  return e;
}
Dims begins(const Block &b) {
  Dims e;
  for (const Range &r : b) e.push_back(r.first);
  return e;
}
Block whole(const Dims &spatial) {
  Block b;
  for (int64_t v : spatial) b.push_back({0, v});
  return b;
}

/** The elements in spatial block `b` of a [lead0, lead1, spatial...] array, in row-major order. */
std::vector<double> cut(const std::vector<double> &full, const Shape &shape, const Block &b) {
  size_t sp = shape.size() - 2;
  Dims e = extents(b);
  int64_t plane = count(Shape(shape.begin() + 2, shape.end())), n = count(e);
  std::vector<double> out;
  std::vector<int64_t> idx(sp, 0);
  for (int64_t p = 0; p < shape[0] * shape[1]; ++p)
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, off = 0, stride = 1;
      for (size_t d = sp; d-- > 0;) {
        off += (b[d].first + rem % e[d]) * stride;
        rem /= e[d];
        stride *= shape[d + 2];
      }
      out.push_back(full[static_cast<size_t>(p * plane + off)]);
    }
  return out;
}

/** Hulls over o in `o` and k in `k` of the taps x = o*s + k*dil - pad landing in `x`: of x, o and k. */
struct Reach {
  Range x{INT64_MAX, INT64_MIN}, o{INT64_MAX, INT64_MIN}, k{INT64_MAX, INT64_MIN};
  bool empty() const { return x.first > x.second; }
};
Reach reach(Range o, Range k, Range x, int64_t s, int64_t dil, int64_t pad) {
  Reach r;
  auto grow = [](Range &h, int64_t v) { h = {std::min(h.first, v), std::max(h.second, v + 1)}; };
  for (int64_t oi = o.first; oi < o.second; ++oi)
    for (int64_t ki = k.first; ki < k.second; ++ki) {
      int64_t xi = oi * s + ki * dil - pad;
      if (xi < x.first || xi >= x.second) continue;
      grow(r.x, xi), grow(r.o, oi), grow(r.k, ki);
    }
  return r;
}

/** Every block of the grid cut at `cuts[d]` (interior cut points per spatial dim) over `spatial`. */
std::vector<Block> grid(const Dims &spatial, const std::vector<Dims> &cuts) {
  std::vector<Block> out{{}};
  for (size_t d = 0; d < spatial.size(); ++d) {
    Dims at{0};
    at.insert(at.end(), cuts[d].begin(), cuts[d].end());
    at.push_back(spatial[d]);
    std::vector<Block> next;
    for (const Block &b : out)
      for (size_t i = 0; i + 1 < at.size(); ++i) {
        Block c = b;
        c.push_back({at[i], at[i + 1]});
        next.push_back(c);
      }
    out = next;
  }
  return out;
}

struct ConvCase {
  int64_t n, c, m, group;
  Dims xs, ks, strides, pads, dilations;
  std::vector<Dims> y_cuts, x_cuts;  // blocks of Y (forward, filter) and of dX (data)

  Dims ys() const {
    Dims y;
    size_t sp = xs.size();
    for (size_t d = 0; d < sp; ++d)
      y.push_back((xs[d] + pads[d] + pads[d + sp] - dilations[d] * (ks[d] - 1) - 1) / strides[d] + 1);
    return y;
  }
  Shape with(int64_t a, int64_t b, const Dims &sp) const {
    Shape s{a, b};
    s.insert(s.end(), sp.begin(), sp.end());
    return s;
  }
  std::string name() const {
    return "CONV_BLOCKS(x=" + dims_str(with(n, c, xs)) + ",w=" + dims_str(with(m, c / group, ks)) +
           ",s=" + dims_str(strides) + ",p=" + dims_str(pads) + ",d=" + dims_str(dilations) +
           ",g=" + std::to_string(group) + ")";
  }
  /** The local ConvShape of X, W, Y blocks (codegen's rule: local begin pad pad + x0 - o0*s - k0*dil, end pad from
   *  the output-size formula). */
  ConvShape local(const Block &x, const Block &k, const Block &o) const {
    size_t sp = xs.size();
    ConvShape s{n, c, m, group, extents(x), extents(k), extents(o), strides, Dims(2 * sp), dilations};
    for (size_t d = 0; d < sp; ++d) {
      int64_t pb = pads[d] + x[d].first - o[d].first * strides[d] - k[d].first * dilations[d];
      s.pads[d] = pb;
      s.pads[d + sp] = (s.y[d] - 1) * strides[d] + dilations[d] * (s.w[d] - 1) + 1 - s.x[d] - pb;
    }
    return s;
  }
};

KernelCase conv_block_case(const ConvCase &p) {
  return {p.name(), 1e-5, [=] {
            size_t sp = p.xs.size();
            Dims ys = p.ys();
            Shape x = p.with(p.n, p.c, p.xs), w = p.with(p.m, p.c / p.group, p.ks), y = p.with(p.n, p.m, ys);
            AttrMap attrs{{"strides", p.strides}, {"pads", p.pads}, {"dilations", p.dilations}, {"group", p.group}};
            std::mt19937 rng(static_cast<unsigned>(count(x) * 7 + count(w)));
            auto xd = random_data(rng, count(x)), wd = random_data(rng, count(w)), dyd = random_data(rng, count(y));
            auto fwd = [&] {
              OneOp op;
              op.in(x, xd), op.in(w, wd), op.out(y);
              return op.run(OpKind::Conv, attrs)[0];
            }();
            auto bwd_data = [&] {
              OneOp op;
              op.in(y, dyd), op.in(w, wd), op.out(x);
              return op.run(OpKind::ConvGradData, attrs)[0];
            }();
            auto bwd_filter = [&] {
              OneOp op;
              op.in(y, dyd), op.in(x, xd), op.out(w);
              return op.run(OpKind::ConvGradFilter, attrs)[0];
            }();
            double err = 0;
            std::vector<float> dw_sum(static_cast<size_t>(count(w)), 0.0f);
            for (const Block &ob : grid(ys, p.y_cuts)) {
              Block xb, kb;  // the X block read and the taps that reach it
              bool none = false;
              for (size_t d = 0; d < sp; ++d) {
                Reach r = reach(ob[d], {0, p.ks[d]}, {0, p.xs[d]}, p.strides[d], p.dilations[d], p.pads[d]);
                none = none || r.empty();
                xb.push_back(r.x), kb.push_back(r.k);
              }
              if (none) {  // every window of the block lies in the padding: Y is zero there, dW gets nothing
                std::vector<double> want = cut(fwd, y, ob);
                err = std::max(err, max_error(std::vector<float>(want.size(), 0.0f), want));
                continue;
              }
              // Forward on the smallest W block; the filter gradient of the whole W, a partial sum per Y block.
              ConvShape s = p.local(xb, kb, ob);
              auto fx = to_f32(cut(xd, x, xb)), fw = to_f32(cut(wd, w, kb)), fdy = to_f32(cut(dyd, y, ob));
              std::vector<float> fy(static_cast<size_t>(p.n * p.m * count(s.y)), NAN);
              conv_forward(s, fx.data(), fw.data(), nullptr, fy.data());
              err = std::max(err, max_error(fy, cut(fwd, y, ob)));
              ConvShape sf = p.local(xb, whole(p.ks), ob);
              std::vector<float> fdw(dw_sum.size(), NAN);
              conv_backward_filter(sf, fdy.data(), fx.data(), fdw.data());
              for (size_t i = 0; i < fdw.size(); ++i) dw_sum[i] += fdw[i];
            }
            err = std::max(err, max_error(dw_sum, bwd_filter));
            for (const Block &xb : grid(p.xs, p.x_cuts)) {
              Block ob, kb;  // the dY block whose windows reach this dX block, and the taps that do
              bool none = false;
              for (size_t d = 0; d < sp; ++d) {
                Reach r = reach({0, ys[d]}, {0, p.ks[d]}, xb[d], p.strides[d], p.dilations[d], p.pads[d]);
                none = none || r.empty();
                ob.push_back(r.o), kb.push_back(r.k);
              }
              std::vector<double> want = cut(bwd_data, x, xb);
              if (none) {  // nothing reaches the block: its gradient is zero
                err = std::max(err, max_error(std::vector<float>(want.size(), 0.0f), want));
                continue;
              }
              ConvShape s = p.local(xb, kb, ob);
              auto fdy = to_f32(cut(dyd, y, ob)), fw = to_f32(cut(wd, w, kb));
              std::vector<float> fdx(want.size(), NAN);
              conv_backward_data(s, fdy.data(), fw.data(), fdx.data());
              err = std::max(err, max_error(fdx, want));
            }
            return err;
          }};
}

TEST(RuntimeKernels, ConvBlocks) {
  std::vector<ConvCase> cases = {
      // 3x3 pad 1 split in halves and uneven parts; both spatial dims cut
      {2, 3, 4, 1, {8, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {{4}, {}}, {{4}, {}}},
      {1, 2, 3, 1, {9, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {{1, 3, 8}, {2, 5}}, {{1, 5, 8}, {3}}},
      // stride 2, asymmetric pads, dilation
      {1, 2, 2, 1, {11, 6}, {3, 2}, {2, 1}, {2, 0, 1, 1}, {2, 1}, {{1, 3}, {2}}, {{2, 5, 9}, {1}}},
      // 1x1 stride 2: dX blocks starting at an odd row have negative local pads; some blocks receive nothing
      {1, 2, 3, 1, {9, 4}, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, {{2}, {1}}, {{3, 4, 7}, {}}},
      // stride 3 kernel 2 pad 2 (taps that never reach a block's rows), groups, 1-d and 3-d
      {2, 4, 6, 2, {10}, {2}, {3}, {2, 1}, {1}, {{1, 2}}, {{1, 3, 4, 8}}},
      {1, 3, 3, 3, {6, 5}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {{3}, {}}, {{2}, {}}},
      {1, 2, 2, 1, {5, 4, 3}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 1}, {1, 1, 2}, {{2}, {1}, {}}, {{3}, {}, {1}}},
  };
  std::vector<KernelCase> out;
  for (const ConvCase &c : cases) out.push_back(conv_block_case(c));
  run_cases(out);
}

struct PoolCase {
  Dims x, kernel, strides, pads, dilations;
  bool ceil_mode, include_pad;
  std::vector<Dims> y_cuts, x_cuts;

  Dims ys() const {
    Dims y;
    size_t sp = kernel.size();
    for (size_t d = 0; d < sp; ++d) {
      int64_t span = x[d + 2] + pads[d] + pads[d + sp] - dilations[d] * (kernel[d] - 1) - 1;
      int64_t o = (ceil_mode ? (span + strides[d] - 1) / strides[d] : span / strides[d]) + 1;
      if (ceil_mode && (o - 1) * strides[d] >= x[d + 2] + pads[d]) --o;  // the last window must start inside
      y.push_back(o);
    }
    return y;
  }
  Dims xs() const { return Dims(x.begin() + 2, x.end()); }
  std::string name() const {
    return "POOL_BLOCKS(x=" + dims_str(x) + ",k=" + dims_str(kernel) + ",s=" + dims_str(strides) +
           ",p=" + dims_str(pads) + ",d=" + dims_str(dilations) + ",ceil=" + std::to_string(ceil_mode) +
           ",include_pad=" + std::to_string(include_pad) + ")";
  }
  PoolShape block(const Block &xb, const Block &yb) const {
    return {x[0] * x[1], extents(xb), extents(yb), kernel, strides, pads, dilations, include_pad, begins(xb),
            begins(yb), xs(), {}, {}};
  }
};

KernelCase pool_block_case(const PoolCase &p) {
  return {p.name(), 1e-6, [=] {
            size_t sp = p.kernel.size();
            Dims ys = p.ys();
            Shape y{p.x[0], p.x[1]};
            y.insert(y.end(), ys.begin(), ys.end());
            AttrMap attrs{{"kernel_shape", p.kernel}, {"strides", p.strides},           {"pads", p.pads},
                          {"dilations", p.dilations},  {"ceil_mode", int64_t{p.ceil_mode}}};
            AttrMap avg_attrs = attrs;
            avg_attrs["count_include_pad"] = int64_t{p.include_pad};
            std::mt19937 rng(static_cast<unsigned>(count(p.x) + 3));
            auto xd = random_data(rng, count(p.x)), dyd = random_data(rng, count(y));
            auto run = [&](OpKind kind, const AttrMap &a, bool grad) {
              OneOp op;
              op.in(grad ? y : p.x, grad ? dyd : xd);
              if (kind == OpKind::MaxPoolGrad) op.in(p.x, xd);
              op.out(grad ? p.x : y);
              return op.run(kind, a)[0];
            };
            auto max_y = run(OpKind::MaxPool, attrs, false), avg_y = run(OpKind::AveragePool, avg_attrs, false);
            OneOp with_indices;  // MaxPool's Indices: flat into the whole X, whatever block computes them
            with_indices.in(p.x, xd);
            with_indices.out(y);
            with_indices.out(y, DType::i64);
            auto max_i = with_indices.run(OpKind::MaxPool, attrs)[1];
            auto max_dx = run(OpKind::MaxPoolGrad, attrs, true), avg_dx = run(OpKind::AveragePoolGrad, avg_attrs, true);
            double err = 0;
            for (const Block &ob : grid(ys, p.y_cuts)) {
              Block xb;
              for (size_t d = 0; d < sp; ++d) {
                Range x_all{0, p.x[d + 2]};
                xb.push_back(reach(ob[d], {0, p.kernel[d]}, x_all, p.strides[d], p.dilations[d], p.pads[d]).x);
              }
              PoolShape s = p.block(xb, ob);
              auto fx = to_f32(cut(xd, p.x, xb));
              std::vector<float> fy(static_cast<size_t>(p.x[0] * p.x[1] * count(extents(ob))), NAN);
              std::vector<int64_t> fi(fy.size(), -1);
              max_pool_forward(s, fx.data(), fy.data(), fi.data());
              err = std::max(err, max_error(fy, cut(max_y, y, ob)));
              std::vector<double> want_i = cut(max_i, y, ob);
              for (size_t k = 0; k < fi.size(); ++k)
                if (static_cast<double>(fi[k]) != want_i[k]) err = std::max(err, 1.0);  // an index is exact or wrong
              avg_pool_forward(s, fx.data(), fy.data());
              err = std::max(err, max_error(fy, cut(avg_y, y, ob)));
            }
            auto fx = to_f32(xd), fdy_all = to_f32(dyd);
            for (const Block &xb : grid(p.xs(), p.x_cuts)) {
              // Max: whole X and dY (its windows' maxima need whole windows), the dX block written.
              PoolShape sm = p.block(whole(p.xs()), whole(ys));
              sm.dx_begin = begins(xb), sm.dx = extents(xb);
              std::vector<float> fdx(static_cast<size_t>(p.x[0] * p.x[1] * count(extents(xb))), NAN);
              max_pool_backward(sm, fdy_all.data(), fx.data(), fdx.data());
              err = std::max(err, max_error(fdx, cut(max_dx, p.x, xb)));
              // Average: the dY block of the windows reaching the dX block.
              Block ob;
              for (size_t d = 0; d < sp; ++d)
                ob.push_back(reach({0, ys[d]}, {0, p.kernel[d]}, xb[d], p.strides[d], p.dilations[d], p.pads[d]).o);
              auto fdy = to_f32(cut(dyd, y, ob));
              avg_pool_backward(p.block(xb, ob), fdy.data(), fdx.data());
              err = std::max(err, max_error(fdx, cut(avg_dx, p.x, xb)));
            }
            return err;
          }};
}

TEST(RuntimeKernels, PoolBlocks) {
  std::vector<PoolCase> cases = {
      {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false, {{2}, {}}, {{4}, {}}},
      {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false, {{1, 3}, {2}}, {{2, 3, 6}, {4}}},
      {{1, 2, 8, 6}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, true, {{1, 4}, {1}}, {{1, 5}, {3}}},
      {{1, 2, 9, 5}, {3, 3}, {1, 2}, {1, 1, 2, 0}, {2, 1}, true, false, {{4}, {2}}, {{3, 7}, {}}},
      {{2, 2, 10}, {3}, {2}, {0, 0}, {2}, true, true, {{1, 3}}, {{5}}},
  };
  std::vector<KernelCase> out;
  for (const PoolCase &c : cases) out.push_back(pool_block_case(c));
  // Global average pooling over spatial blocks: partial means with the whole divisor add up; dX blocks.
  Shape gx{3, 4, 6, 5};
  out.push_back({"GLOBAL_AVG_POOL_BLOCKS(x=" + dims_str(gx) + ")", 1e-6, [=] {
                   std::mt19937 rng(7);
                   auto xd = random_data(rng, count(gx)), dyd = random_data(rng, 12);
                   OneOp f;
                   f.in(gx, xd), f.out({3, 4, 1, 1});
                   auto ref = f.run(OpKind::GlobalAveragePool)[0];
                   OneOp b;
                   b.in({3, 4, 1, 1}, dyd), b.out(gx);
                   auto rb = b.run(OpKind::GlobalAveragePoolGrad)[0];
                   std::vector<float> sum(12, 0.0f), part(12), fdy = to_f32(dyd);
                   double err = 0;
                   for (const Block &xb : grid({6, 5}, {{1, 4}, {}})) {
                     auto fx = to_f32(cut(xd, gx, xb));
                     int64_t n = count(extents(xb));
                     global_avg_pool_forward(12, n, fx.data(), part.data(), 30);
                     for (size_t i = 0; i < 12; ++i) sum[i] += part[i];
                     std::vector<float> fdx(static_cast<size_t>(12 * n));
                     global_avg_pool_backward(12, n, fdy.data(), fdx.data(), 30);
                     err = std::max(err, max_error(fdx, cut(rb, gx, xb)));
                   }
                   return std::max(err, max_error(sum, ref));
                 }});
  run_cases(out);
}

}  // namespace
}  // namespace cleave::rt::testing
