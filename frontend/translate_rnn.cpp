// Recurrent nodes (ONNX LSTM, GRU, RNN), unrolled into existing IR ops, one set per timestep: the IR has static shapes
// and no loops, so the sequence length fixes the unrolling, and autodiff, planning and codegen then need nothing new.
//
// Per direction d and step k (t = k forward, T-1-k reverse):
//   LSTM (gate order i, o, f, c):
//     gates = h_prev R^T + (x_t W^T + Wb + Rb)      two Gemms, the second taking the first as its C operand
//     i, o, f, c = Split(gates)                     (+ P_i * c_prev, P_f * c_prev with peepholes)
//     C = f(f) * c_prev + f(i) * g(c);  H = f(o + P_o * C) * h(C)
//   GRU (gate order z, r, h):
//     xz, xr, xh = Split(x_t W^T + Wb);  hz, hr = Split(h_prev R_zr^T + Rb_zr);  z = f(xz + hz), r = f(xr + hr)
//     h~ = g(xh + r * (h_prev R_h^T + Rb_h))   linear_before_reset (torch's), else g(xh + (r * h_prev) R_h^T + Rb_h)
//     H = h~ + z * (h_prev - h~)               (= (1 - z) h~ + z h_prev)
//   RNN: H = f(h_prev R^T + (x_t W^T + Wb + Rb))
// A sequence_lens shorter than T masks the step: the state keeps its previous value and Y_t is 0 (a {0,1} mask per
// batch row, gathered from a constant table by the lengths). Absent initial states are zeros, which drop the terms
// they multiply at the first step.
//
// Per-timestep ops are named `<node>/t<k>/<role>` and tagged (Op::unroll_scope = node, unroll_step = k) so a
// coarsening pass can merge step k of every op of the node; ops outside the recurrence (weight slicing, the split of
// X, the concatenation of Y) are named `<node>/<role>` and carry no tag.
#include <onnx/onnx_pb.h>

#include <algorithm>

#include "frontend/importer.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

[[noreturn]] void unsupported(const NodeCtx &n, const std::string &what) {
  throw UserError(n.label + ": " + what + " is not supported", 2);
}

/** Emits the ops of one recurrent node. Tensor names are ONNX-style strings (the importer's namespace). */
class RnnBuilder {
 public:
  RnnBuilder(Importer &im, const NodeCtx &n) : im_(im), n_(n) {}

  /** One op with a fresh output named after `role` (or `out`); returns the output's name. `step` >= 0 tags it. */
  std::string op(OpKind kind, std::vector<std::string> ins, AttrMap attrs, const std::string &role, int64_t step = -1,
                 const std::string &out = "") {
    std::string name = out.empty() ? fresh(role, step) : out;
    return ops(kind, std::move(ins), std::move(attrs), role, {name}, step)[0];
  }

  /** The tensor name `<node>[/t<step>]/<role>`, made unique. */
  std::string fresh(const std::string &role, int64_t step) { return im_.fresh_tensor_name(base(step) + role); }

  /** One op named after `op_role` writing `outs`. */
  std::vector<std::string> ops(OpKind kind, std::vector<std::string> ins, AttrMap attrs, const std::string &op_role,
                               std::vector<std::string> outs, int64_t step) {
    OpSpec s;
    s.kind = kind;
    s.phase = n_.phase;
    s.inputs = std::move(ins);
    s.outputs = outs;
    s.attrs = std::move(attrs);
    std::string name = im_.fresh_op_name(base(step) + op_role);
    im_.emit(s, name, n_);
    if (auto id = im_.g.find_op(name); id && step >= 0) {  // absent when folded into constants
      im_.g.op(*id).unroll_scope = n_.name;
      im_.g.op(*id).unroll_step = step;
    }
    return outs;
  }

  std::string base(int64_t step) const {
    return n_.name + (step >= 0 ? "/t" + std::to_string(step) : std::string()) + "/";
  }

  std::string reshape(const std::string &x, const Shape &shape, const std::string &role, int64_t step = -1,
                      const std::string &out = "") {
    return op(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>(shape)}}, role, step, out);
  }

  std::string slice(const std::string &x, int64_t axis, int64_t begin, int64_t end, const std::string &role) {
    return op(OpKind::Slice, {x},
              {{"starts", std::vector<int64_t>{begin}},
               {"ends", std::vector<int64_t>{end}},
               {"axes", std::vector<int64_t>{axis}},
               {"steps", std::vector<int64_t>{1}}},
              role);
  }

  /** Direction d of a [D, ...] tensor as `shape` (layout 1 initial states: [B, D, H], so `axis` 1). */
  std::string direction(const std::string &x, int64_t dirs, int64_t d, int64_t axis, const Shape &shape,
                        const std::string &role) {
    std::string part = dirs == 1 ? x : slice(x, axis, d, d + 1, role + ".slice");
    return reshape(part, shape, role);
  }

  /** Concat of `parts` along `axis` into `out` ("" = fresh), or a copy when there is one part. */
  std::string concat(const std::vector<std::string> &parts, int64_t axis, const Shape &shape, const std::string &role,
                     const std::string &out = "") {
    if (parts.size() == 1) return reshape(parts[0], shape, role, -1, out);
    return op(OpKind::Concat, parts, {{"axis", axis}}, role, -1, out);
  }

 private:
  Importer &im_;
  const NodeCtx &n_;
};

/** What distinguishes the three cells. */
struct CellKind {
  const char *op;
  int64_t gates;      // blocks of W's and R's rows
  int64_t functions;  // activations per direction
  bool lstm, gru;
};
constexpr CellKind kLstm{"LSTM", 4, 3, true, false}, kGru{"GRU", 3, 2, false, true}, kRnn{"RNN", 1, 1, false, false};

OpKind activation_kind(const NodeCtx &n, const std::string &name) {
  if (name == "Sigmoid") return OpKind::Sigmoid;
  if (name == "Tanh") return OpKind::Tanh;
  if (name == "Relu") return OpKind::Relu;
  unsupported(n, "activation \"" + name + "\" (only Sigmoid, Tanh and Relu)");
}

/** A zero constant of `shape` (a GRU's absent initial state, which its update reads). */
std::string zeros(Importer &im, RnnBuilder &b, const Shape &shape, const std::string &role) {
  Tensor t;
  t.name = b.fresh(role, -1);
  t.dtype = DType::f32;
  t.shape = shape;
  t.data = encode_doubles(DType::f32, std::vector<double>(static_cast<size_t>(num_elements(shape)), 0.0));
  std::string name = t.name;
  im.define_const(std::move(t));
  return name;
}

}  // namespace

/** One LSTM, GRU or RNN node. */
void translate_recurrent(Importer &im, const NodeCtx &n, const CellKind &cell) {
  // Features outside the unrolled form, listed at once.
  std::vector<std::string> missing;
  if (n.attrs.has("clip")) missing.push_back("attribute \"clip\"");
  if (cell.lstm && n.attrs.get_int("input_forget", 0) != 0) missing.push_back("input_forget=1");
  if (n.attrs.has("activation_alpha") || n.attrs.has("activation_beta"))
    missing.push_back("attributes activation_alpha/activation_beta");
  if (!missing.empty()) {
    std::string list;
    for (const std::string &m : missing) list += (list.empty() ? "" : ", ") + m;
    unsupported(n, list);
  }
  std::string dir_name = n.attrs.get_string("direction", "forward");
  if (dir_name != "forward" && dir_name != "reverse" && dir_name != "bidirectional")
    n.fail("attribute \"direction\" must be forward, reverse or bidirectional, got \"" + dir_name + "\"");
  int64_t dirs = dir_name == "bidirectional" ? 2 : 1;
  int64_t layout = n.attrs.get_int("layout", 0);
  if (layout != 0 && layout != 1) n.fail("attribute \"layout\" must be 0 or 1, got " + std::to_string(layout));

  Shape x = im.type_of(n.in(0), n).shape, w = im.type_of(n.in(1), n).shape, r = im.type_of(n.in(2), n).shape;
  if (x.size() != 3) n.fail("input X has shape " + shape_str(x) + "; expected rank 3");
  int64_t seq = layout == 0 ? x[0] : x[1], batch = layout == 0 ? x[1] : x[0], in_size = x[2];
  const int64_t gates = cell.gates;
  if (r.size() != 3 || r[0] != dirs || r[1] != gates * r[2])
    n.fail("input R has shape " + shape_str(r) + "; expected [" + std::to_string(dirs) + ", " +
           (gates > 1 ? std::to_string(gates) + "*" : "") + "hidden, hidden]");
  int64_t hidden = r[2];
  if (n.attrs.get_int("hidden_size", hidden) != hidden)
    n.fail("attribute \"hidden_size\" " + std::to_string(n.attrs.get_int("hidden_size", hidden)) +
           " does not match R's shape " + shape_str(r));
  if (w != Shape{dirs, gates * hidden, in_size})
    n.fail("input W has shape " + shape_str(w) + "; expected " + shape_str({dirs, gates * hidden, in_size}));
  if (seq < 1) n.fail("X has no timesteps");
  auto check_shape = [&](size_t i, const Shape &want, const std::string &what) {
    if (n.in(i).empty()) return;
    Shape s = im.type_of(n.in(i), n).shape;
    if (s != want) n.fail("input " + what + " has shape " + shape_str(s) + "; expected " + shape_str(want));
  };
  Shape state = layout == 0 ? Shape{dirs, batch, hidden} : Shape{batch, dirs, hidden};
  check_shape(3, {dirs, 2 * gates * hidden}, "B");
  check_shape(4, {batch}, "sequence_lens");
  check_shape(5, state, "initial_h");
  if (cell.lstm) {
    check_shape(6, state, "initial_c");
    check_shape(7, {dirs, 3 * hidden}, "P");
  }
  bool linear_before_reset = cell.gru && n.attrs.get_int("linear_before_reset", 0) != 0;

  std::vector<OpKind> acts;
  if (auto a = n.attrs.opt_strings("activations")) {
    if (static_cast<int64_t>(a->size()) != cell.functions * dirs)
      n.fail("attribute \"activations\" has " + std::to_string(a->size()) + " entries; expected " +
             std::to_string(cell.functions * dirs));
    for (const std::string &s : *a) acts.push_back(activation_kind(n, s));
  } else {
    for (int64_t d = 0; d < dirs; ++d) {
      if (cell.lstm) acts.insert(acts.end(), {OpKind::Sigmoid, OpKind::Tanh, OpKind::Tanh});
      else if (cell.gru) acts.insert(acts.end(), {OpKind::Sigmoid, OpKind::Tanh});
      else acts.push_back(OpKind::Tanh);
    }
  }

  RnnBuilder b(im, n);
  int64_t time_axis = layout == 0 ? 0 : 1, state_dir_axis = layout == 0 ? 0 : 1;

  // sequence_lens: one {0,1} mask [B, 1] per timestep (none when every length is T, e.g. a constant from torch).
  std::vector<std::string> masks;
  if (!n.in(4).empty()) {
    const Tensor *lens = im.known_value(n.in(4));
    std::vector<int64_t> v = lens ? data_as_ints(*lens) : std::vector<int64_t>{};
    bool all_full = lens && std::all_of(v.begin(), v.end(), [&](int64_t l) { return l == seq; });
    for (int64_t l : v)
      if (l < 0 || l > seq) n.fail("sequence_lens holds " + std::to_string(l) + ", outside [0, " + std::to_string(seq) + "]");
    if (!all_full) {
      for (int64_t t = 0; t < seq; ++t) {
        // table[len] = 1 if timestep t is inside a sequence of that length.
        Tensor table;
        table.name = im.fresh_tensor_name(n.name + "/mask_table_t" + std::to_string(t));
        table.dtype = DType::f32;
        table.shape = {seq + 1, 1};
        std::vector<double> vals;
        for (int64_t len = 0; len <= seq; ++len) vals.push_back(t < len ? 1.0 : 0.0);
        table.data = encode_doubles(DType::f32, vals);
        std::string name = table.name;
        im.define_const(std::move(table));
        masks.push_back(b.op(OpKind::Gather, {name, n.in(4)}, {{"axis", int64_t{0}}}, "mask_t" + std::to_string(t)));
      }
    }
  }

  // X_t as [B, I], one per timestep.
  std::vector<std::string> xs;
  {
    std::vector<std::string> pieces{n.in(0)};
    if (seq > 1) {
      std::vector<std::string> outs;
      for (int64_t t = 0; t < seq; ++t) outs.push_back(b.fresh("X_t" + std::to_string(t), -1));
      pieces = b.ops(OpKind::Split, {n.in(0)}, {{"axis", time_axis}, {"split", std::vector<int64_t>(seq, 1)}},
                     "split_X", outs, -1);
    }
    for (int64_t t = 0; t < seq; ++t) {
      int64_t step = dir_name == "reverse" ? seq - 1 - t : t;
      xs.push_back(b.reshape(pieces[t], {batch, in_size}, "x", step));
    }
  }

  // ys[t][d]: the per-step outputs; last_h/last_c[d]: the final states.
  std::vector<std::vector<std::string>> ys(seq, std::vector<std::string>(dirs));
  std::vector<std::string> last_h(dirs), last_c(dirs);
  for (int64_t d = 0; d < dirs; ++d) {
    std::string p = dirs == 2 && d == 1 ? "bw/" : "";
    std::string wd = b.direction(n.in(1), dirs, d, 0, {gates * hidden, in_size}, p + "W");
    std::string rd = b.direction(n.in(2), dirs, d, 0, {gates * hidden, hidden}, p + "R");
    std::string bias, wb, rb;  // bias = Wb + Rb (LSTM, RNN); GRU keeps them apart
    if (!n.in(3).empty()) {
      std::string bd = b.direction(n.in(3), dirs, d, 0, {2 * gates * hidden}, p + "B");
      wb = b.slice(bd, 0, 0, gates * hidden, p + "Wb");
      rb = b.slice(bd, 0, gates * hidden, 2 * gates * hidden, p + "Rb");
      if (!cell.gru) bias = b.op(OpKind::Add, {wb, rb}, {}, p + "bias");
    }
    // GRU: R's (and Rb's) z, r rows and h rows.
    std::string r_zr, r_h, rb_zr, rb_h;
    if (cell.gru) {
      r_zr = b.slice(rd, 0, 0, 2 * hidden, p + "R_zr");
      r_h = b.slice(rd, 0, 2 * hidden, 3 * hidden, p + "R_h");
      if (!rb.empty()) {
        rb_zr = b.slice(rb, 0, 0, 2 * hidden, p + "Rb_zr");
        rb_h = b.slice(rb, 0, 2 * hidden, 3 * hidden, p + "Rb_h");
      }
    }
    std::string pi, po, pf;
    if (cell.lstm && !n.in(7).empty()) {
      std::string pd = b.direction(n.in(7), dirs, d, 0, {3 * hidden}, p + "P");
      pi = b.slice(pd, 0, 0, hidden, p + "Pi");
      po = b.slice(pd, 0, hidden, 2 * hidden, p + "Po");
      pf = b.slice(pd, 0, 2 * hidden, 3 * hidden, p + "Pf");
    }
    std::string h, c;  // "" = zeros
    if (!n.in(5).empty()) h = b.direction(n.in(5), dirs, d, state_dir_axis, {batch, hidden}, p + "initial_h");
    if (cell.lstm && !n.in(6).empty())
      c = b.direction(n.in(6), dirs, d, state_dir_axis, {batch, hidden}, p + "initial_c");
    if (cell.gru && h.empty()) h = zeros(im, b, {batch, hidden}, p + "initial_h");  // the recurrence reads it
    const OpKind *fs = &acts[static_cast<size_t>(cell.functions * d)];
    OpKind f = fs[0], g = cell.functions > 1 ? fs[1] : f, hk = cell.functions > 2 ? fs[2] : f;
    bool reverse = dir_name == "reverse" || d == 1;
    for (int64_t k = 0; k < seq; ++k) {
      int64_t t = reverse ? seq - 1 - k : k;
      auto at = [&](OpKind kind, std::vector<std::string> ins, const std::string &role, AttrMap attrs = {}) {
        return b.op(kind, std::move(ins), std::move(attrs), p + role, k);
      };
      AttrMap gemm{{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t{0}}, {"transB", int64_t{1}}};
      if (cell.gru) {
        std::vector<std::string> xin{xs[t], wd}, hin{h, r_zr};
        if (!wb.empty()) xin.push_back(wb);
        if (!rb_zr.empty()) hin.push_back(rb_zr);
        std::vector<std::string> xo, ho;
        for (const char *gate : {"xz", "xr", "xh"}) xo.push_back(b.fresh(p + gate, k));
        for (const char *gate : {"hz", "hr"}) ho.push_back(b.fresh(p + gate, k));
        std::vector<std::string> xg = b.ops(OpKind::Split, {at(OpKind::Gemm, xin, "xw", gemm)},
                                            {{"axis", int64_t{1}}, {"split", std::vector<int64_t>(3, hidden)}},
                                            p + "split_xw", xo, k);
        std::vector<std::string> hg = b.ops(OpKind::Split, {at(OpKind::Gemm, hin, "hw_zr", gemm)},
                                            {{"axis", int64_t{1}}, {"split", std::vector<int64_t>(2, hidden)}},
                                            p + "split_hw", ho, k);
        std::string z = at(f, {at(OpKind::Add, {xg[0], hg[0]}, "z_in")}, "z");
        std::string rg = at(f, {at(OpKind::Add, {xg[1], hg[1]}, "r_in")}, "r");
        std::vector<std::string> hh_in{linear_before_reset ? h : at(OpKind::Mul, {rg, h}, "r_h"), r_h};
        if (!rb_h.empty()) hh_in.push_back(rb_h);
        std::string hh = at(OpKind::Gemm, hh_in, "hw_h", gemm);
        if (linear_before_reset) hh = at(OpKind::Mul, {rg, hh}, "r_hw_h");
        std::string cand = at(g, {at(OpKind::Add, {xg[2], hh}, "h_in")}, "h_cand");
        std::string hn = at(OpKind::Add, {cand, at(OpKind::Mul, {z, at(OpKind::Sub, {h, cand}, "h_delta")}, "z_delta")},
                            "H");
        if (!masks.empty()) {
          const std::string &m = masks[t];
          ys[t][d] = at(OpKind::Mul, {m, hn}, "Y");
          hn = at(OpKind::Add, {h, at(OpKind::Mul, {m, at(OpKind::Sub, {hn, h}, "H_held_delta")}, "H_held_step")},
                  "H_held");
        } else {
          ys[t][d] = hn;
        }
        h = hn;
        continue;
      }
      std::vector<std::string> xin{xs[t], wd};
      if (!bias.empty()) xin.push_back(bias);
      std::string gates = at(OpKind::Gemm, xin, h.empty() ? "gates" : "xw", gemm);
      if (!h.empty()) gates = at(OpKind::Gemm, {h, rd, gates}, "gates", gemm);
      if (!cell.lstm) {  // RNN
        std::string hn = at(f, {gates}, "H");
        if (!masks.empty()) {
          const std::string &m = masks[t];
          ys[t][d] = at(OpKind::Mul, {m, hn}, "Y");
          hn = h.empty() ? ys[t][d]
                         : at(OpKind::Add, {h, at(OpKind::Mul, {m, at(OpKind::Sub, {hn, h}, "H_held_delta")},
                                                  "H_held_step")},
                              "H_held");
        } else {
          ys[t][d] = hn;
        }
        h = hn;
        continue;
      }
      std::vector<std::string> outs;
      for (const char *gate : {"i", "o", "f", "c"}) outs.push_back(b.fresh(p + gate, k));
      std::vector<std::string> parts = b.ops(
          OpKind::Split, {gates}, {{"axis", int64_t{1}}, {"split", std::vector<int64_t>(4, hidden)}}, p + "split_gates",
          outs, k);
      std::string gi = parts[0], go = parts[1], gf = parts[2], gc = parts[3];
      if (!pi.empty() && !c.empty()) {
        gi = at(OpKind::Add, {gi, at(OpKind::Mul, {pi, c}, "pi_c")}, "i_peep");
        gf = at(OpKind::Add, {gf, at(OpKind::Mul, {pf, c}, "pf_c")}, "f_peep");
      }
      std::string ai = at(f, {gi}, "i_act"), ac = at(g, {gc}, "c_act");
      std::string cn = at(OpKind::Mul, {ai, ac}, c.empty() ? "C" : "i_c");
      if (!c.empty()) cn = at(OpKind::Add, {at(OpKind::Mul, {at(f, {gf}, "f_act"), c}, "f_C"), cn}, "C");
      if (!po.empty()) go = at(OpKind::Add, {go, at(OpKind::Mul, {po, cn}, "po_C")}, "o_peep");
      std::string hn = at(OpKind::Mul, {at(f, {go}, "o_act"), at(hk, {cn}, "C_act")}, "H");
      if (!masks.empty()) {
        // Past a row's length the state holds and Y_t is 0: s' = s + m (s_new - s) (m s_new from zeros).
        const std::string &m = masks[t];
        auto hold = [&](const std::string &prev, const std::string &next, const std::string &role) {
          if (prev.empty()) return at(OpKind::Mul, {m, next}, role);
          return at(OpKind::Add, {prev, at(OpKind::Mul, {m, at(OpKind::Sub, {next, prev}, role + "_delta")},
                                           role + "_step")},
                    role);
        };
        ys[t][d] = at(OpKind::Mul, {m, hn}, "Y");
        cn = hold(c, cn, "C_held");
        hn = hold(h, hn, "H_held");
      } else {
        ys[t][d] = hn;
      }
      h = hn;
      c = cn;
    }
    last_h[d] = h;
    last_c[d] = c;
  }

  // Y [T, D, B, H] (layout 1: [B, T, D, H]); Y_h, Y_c [D, B, H] (layout 1: [B, D, H]).
  if (!n.out(0).empty()) {
    Shape y_shape = layout == 0 ? Shape{seq, dirs, batch, hidden} : Shape{batch, seq, dirs, hidden};
    if (seq == 1 && dirs == 1) {
      b.reshape(ys[0][0], y_shape, "Y", -1, n.out(0));
    } else {
      Shape piece = layout == 0 ? Shape{1, 1, batch, hidden} : Shape{batch, 1, 1, hidden};
      Shape step_shape = layout == 0 ? Shape{1, dirs, batch, hidden} : Shape{batch, 1, dirs, hidden};
      std::vector<std::string> steps;
      for (int64_t t = 0; t < seq; ++t) {
        std::vector<std::string> per_dir;
        for (int64_t d = 0; d < dirs; ++d) per_dir.push_back(b.reshape(ys[t][d], piece, "Y_piece"));
        steps.push_back(dirs == 1 ? per_dir[0] : b.concat(per_dir, layout == 0 ? 1 : 2, step_shape, "Y_step"));
      }
      b.concat(steps, time_axis, y_shape, "Y", n.out(0));
    }
  }
  for (size_t o = 1; o <= (cell.lstm ? 2u : 1u); ++o) {
    if (n.out(o).empty()) continue;
    const std::vector<std::string> &last = o == 1 ? last_h : last_c;
    std::string role = o == 1 ? "Y_h" : "Y_c";
    if (dirs == 1) {
      b.reshape(last[0], state, role, -1, n.out(o));
      continue;
    }
    std::vector<std::string> parts;
    Shape piece = layout == 0 ? Shape{1, batch, hidden} : Shape{batch, 1, hidden};
    for (int64_t d = 0; d < dirs; ++d) parts.push_back(b.reshape(last[d], piece, role + "_piece"));
    b.concat(parts, state_dir_axis, state, role, n.out(o));
  }
}

void translate_lstm(Importer &im, const NodeCtx &n) { translate_recurrent(im, n, kLstm); }
void translate_gru(Importer &im, const NodeCtx &n) { translate_recurrent(im, n, kGru); }
void translate_rnn(Importer &im, const NodeCtx &n) { translate_recurrent(im, n, kRnn); }

}  // namespace cleave
