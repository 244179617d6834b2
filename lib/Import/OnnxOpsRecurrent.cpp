//===- OnnxOpsRecurrent.cpp - RNN, GRU, LSTM, ReverseSequence -------------===//
//
// ONNX's recurrent ops (what torch's nn.RNN, nn.GRU and nn.LSTM export to),
// unrolled over the static sequence at import. Per direction the input
// projections of all steps are one matmul; then, step after step, with
// the gates in W, R and B ordered RNN [h], GRU [z r h], LSTM [i o f c]:
//
//   RNN:  H = f(x Wh^T + H Rh^T + Wbh + Rbh)
//   GRU:  z = f(x Wz^T + H Rz^T + Wbz + Rbz), r likewise,
//         h = g(x Wh^T + (r * H) Rh^T + Rbh + Wbh)    linear_before_reset 0
//         h = g(x Wh^T + r * (H Rh^T + Rbh) + Wbh)    otherwise
//         H = (1 - z) * h + z * H
//   LSTM: i = f(x Wi^T + H Ri^T + Pi * C + Wbi + Rbi), f likewise with Pf,
//         c = g(x Wc^T + H Rc^T + Wbc + Rbc),  C = f * C + i * c,
//         o = f(x Wo^T + H Ro^T + Po * C + Wbo + Rbo),  H = o * h(C)
//
// The outputs are every step's H (Y), the last H (Y_h) and the last C
// (Y_c). With sequence_lens a batch row's steps past its length keep its
// state and give zeros, and the reverse direction starts each row at its
// own last step. The activations (defaults: RNN Tanh, GRU Sigmoid Tanh,
// LSTM Sigmoid Tanh Tanh) are any of Relu, Tanh, Sigmoid, Affine,
// LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign and
// Softplus, those with parameters taking activation_alpha/beta in order;
// `clip` bounds the gates' inputs. merak trains through the unrolled ops'
// own derivative rules. LSTM's input_forget is refused by name.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

enum class Cell { RNN, GRU, LSTM };

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

/// The activations of every direction, with their alpha and beta.
FailureOr<SmallVector<Activation>> activations(NodeContext &n, Cell cell, int64_t dirs) {
  SmallVector<std::string> names;
  if (const onnx::AttributeProto *a = n.attr("activations"))
    for (const std::string &s : a->strings())
      names.push_back(s);
  else
    for (int64_t d = 0; d < dirs; ++d)
      for (const char *f : cell == Cell::RNN   ? std::vector<const char *>{"Tanh"}
                           : cell == Cell::GRU ? std::vector<const char *>{"Sigmoid", "Tanh"}
                                               : std::vector<const char *>{"Sigmoid", "Tanh",
                                                                           "Tanh"})
        names.push_back(f);
  int64_t perDir = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 2 : 3;
  if ((int64_t)names.size() != perDir * dirs)
    return n.error("has " + Twine(names.size()) + " activations; " + Twine(perDir * dirs) +
                   " expected (" + Twine(perDir) + " per direction)");
  SmallVector<float> alphas, betas;
  if (const onnx::AttributeProto *a = n.attr("activation_alpha"))
    alphas.assign(a->floats().begin(), a->floats().end());
  if (const onnx::AttributeProto *a = n.attr("activation_beta"))
    betas.assign(a->floats().begin(), a->floats().end());
  size_t nextAlpha = 0, nextBeta = 0;
  SmallVector<Activation> out;
  for (const std::string &name : names) {
    struct Known {
      const char *name;
      bool alpha, beta;
      double alpha0, beta0;
    };
    static const Known known[] = {
        {"Relu", false, false, 0, 0},         {"Tanh", false, false, 0, 0},
        {"Sigmoid", false, false, 0, 0},      {"Affine", true, true, 1, 0},
        {"LeakyRelu", true, false, 0.01, 0},  {"ThresholdedRelu", true, false, 1, 0},
        {"ScaledTanh", true, true, 1, 1},     {"HardSigmoid", true, true, 0.2, 0.5},
        {"Elu", true, false, 1, 0},           {"Softsign", false, false, 0, 0},
        {"Softplus", false, false, 0, 0}};
    const Known *k = llvm::find_if(
        known, [&](const Known &x) { return StringRef(name).equals_insensitive(x.name); });
    if (k == std::end(known))
      return n.unsupported("activation '" + name + "'");
    Activation a{k->name, k->alpha0, k->beta0};
    if (k->alpha && nextAlpha < alphas.size())
      a.alpha = alphas[nextAlpha++];
    if (k->beta && nextBeta < betas.size())
      a.beta = betas[nextBeta++];
    out.push_back(a);
  }
  return out;
}

Value activate(NodeContext &n, const Activation &a, Value x) {
  return x ? namedActivation(n, a.name, a.alpha, a.beta, x) : x;
}

/// `v` with the first lens[b] steps of every row b reversed along
/// `timeAxis` (the rest in place): a gather of step L_b - 1 - t within the
/// row, t past it. `lens` is [B] int64, B at `batchAxis` (the axes 0 and 1).
Value reverseRows(NodeContext &n, Value v, Value lens, int64_t timeAxis, int64_t batchAxis) {
  if (!v || !lens)
    return {};
  auto shape = cast<RankedTensorType>(v.getType()).getShape();
  int64_t T = shape[timeAxis], B = shape[batchAxis];
  HostTensor steps(RankedTensorType::get({T, 1}, IntegerType::get(n.getContext(), 64)));
  for (int64_t t = 0; t < T; ++t)
    steps.i()[t] = t;
  Value t = n.constant(steps), row = n.reshape(lens, {1, B});
  Value back = n.create<SubOp>(n.create<SubOp>(row, n.scalarLike(row, 1)), t);
  Value idx = n.create<WhereOp>(n.create<LtOp>(t, row), back, n.broadcastTo(t, {T, B}));
  if (timeAxis == 1)
    idx = n.create<TransposeOp>(idx, ArrayRef<int64_t>{1, 0});
  SmallVector<int64_t> idxShape(shape.take_front(2));
  idxShape.append(shape.size() - 2, 1);
  return n.create<GatherElementsOp>(v, n.broadcastTo(n.reshape(idx, idxShape), shape),
                                    timeAxis);
}

/// ReverseSequence: every batch row's first sequence_lens[b] steps
/// reversed (time and batch axes 0 and 1, either way round).
LogicalResult reverseSequence(NodeContext &n) {
  auto type = n.inputType(0);
  int64_t timeAxis = n.getInt("time_axis", 0), batchAxis = n.getInt("batch_axis", 1);
  if (type.getRank() < 2 || !((timeAxis == 0 && batchAxis == 1) ||
                              (timeAxis == 1 && batchAxis == 0)))
    return n.error("time_axis and batch_axis must be 0 and 1 (either way round) of an input "
                   "of rank >= 2");
  if (n.inputType(1).getShape() != ArrayRef<int64_t>{type.getDimSize(batchAxis)})
    return n.error("sequence_lens must have one length per batch row");
  auto i64 = RankedTensorType::get({type.getDimSize(batchAxis)},
                                   IntegerType::get(n.getContext(), 64));
  // A length beyond the time axis gathers past it: the gather's index
  // check stops the program, as onnxruntime refuses it.
  Value lens = n.create<CastOp>(i64, n.input(1));
  n.setOutputs(reverseRows(n, n.input(0), lens, timeAxis, batchAxis));
  return success();
}

/// One recurrent node being unrolled.
struct Unroller {
  Unroller(NodeContext &n, Cell cell) : n(n), cell(cell) {}
  NodeContext &n;
  Cell cell;
  int64_t T = 0, B = 0, I = 0, H = 0, gates = 0;
  bool linearBeforeReset = false;
  std::optional<double> clip;
  Value x;        // [T, B, I]
  Value h0, c0;   // [D, B, H] initial states, or null
  Value lens; // [B] int64, or null
  Value mask; // [T, B] i1: the steps within each row's length, or null

  /// Slice [lo, hi) of the last dimension.
  Value cols(Value v, int64_t lo, int64_t hi) {
    return v ? n.sliceDim(v, cast<RankedTensorType>(v.getType()).getRank() - 1, lo, hi) : v;
  }
  /// Index `i` of the first dimension, which goes.
  Value at(Value v, int64_t i) {
    if (!v)
      return {};
    return n.reshape(n.sliceDim(v, 0, i, i + 1),
                     cast<RankedTensorType>(v.getType()).getShape().drop_front());
  }
  /// `v` [B, k H] as k [B, H] gates.
  SmallVector<Value> split(Value v, int64_t k) {
    if (!v)
      return {};
    return n.createSplit(v, 1, SmallVector<int64_t>(k, H));
  }
  Value transpose2(Value v) { return n.create<TransposeOp>(v, ArrayRef<int64_t>{1, 0}); }
  Value gate(const Activation &a, Value v) {
    if (!v)
      return {};
    if (clip)
      v = n.create<ClampOp>(v, n.builder().getF64FloatAttr(-*clip),
                            n.builder().getF64FloatAttr(*clip));
    return activate(n, a, v);
  }
  /// Each row's steps in the reverse direction's order: the row's last step
  /// first (a gather along time by sequence_lens), [T, B, ...] either way.
  Value reversed(Value v) {
    if (!lens)
      return v ? n.sliceDim(v, 0, T - 1, -1, -1) : v;
    return reverseRows(n, v, lens, /*timeAxis=*/0, /*batchAxis=*/1);
  }

  struct Result {
    Value y, h, c; // [T, B, H], [B, H], [B, H]
  };
  FailureOr<Result> direction(int64_t d, bool reverse, ArrayRef<Activation> acts);
};

FailureOr<Unroller::Result> Unroller::direction(int64_t d, bool reverse,
                                                ArrayRef<Activation> acts) {
  int64_t gh = gates * H;
  Value xd = reverse ? reversed(x) : x;
  Value wT = transpose2(at(n.input(1), d)), rT = transpose2(at(n.input(2), d));
  Value xw = n.create<MatmulOp>(n.reshape(xd, {T * B, I}), wT);
  Value rbh; // GRU with linear_before_reset: R's bias of h, inside r * (.)
  if (n.hasInput(3)) {
    Value bias = at(n.input(3), d), wb = cols(bias, 0, gh), rb = cols(bias, gh, 2 * gh);
    Value sum = n.create<AddOp>(wb, rb);
    if (cell == Cell::GRU && linearBeforeReset) {
      rbh = cols(rb, 2 * H, 3 * H);
      sum = n.create<ConcatOp>(ValueRange{cols(sum, 0, 2 * H), cols(wb, 2 * H, 3 * H)}, 0);
    }
    xw = n.create<AddOp>(xw, sum);
  }
  xw = n.reshape(xw, {T, B, gh});
  if (n.hasFailed())
    return failure();
  // One split into the steps (and below, into the gates): its derivative
  // is one concat, where a slice per step would pad each step's gradient
  // to the whole sequence (T^2).
  SmallVector<Value> steps = n.createSplit(xw, 0, SmallVector<int64_t>(T, 1));
  if (n.hasFailed())
    return failure();
  Value zeros = n.broadcastTo(n.scalarLike(x, 0), {B, H});
  Value h = h0 ? at(h0, d) : zeros;
  Value c = cell == Cell::LSTM ? (c0 ? at(c0, d) : zeros) : Value();
  Value peep = cell == Cell::LSTM && n.hasInput(7) ? at(n.input(7), d) : Value();
  // GRU without linear_before_reset multiplies (r * H) by Rh: apart.
  Value rhT = cell == Cell::GRU && !linearBeforeReset ? cols(rT, 2 * H, 3 * H) : Value();
  Value rT0 = rhT ? cols(rT, 0, 2 * H) : rT;
  SmallVector<Value> ys;
  for (int64_t t = 0; t < T; ++t) {
    Value xt = n.reshape(steps[t], {B, gh}), hr = n.create<MatmulOp>(h, rT0);
    Value hNew, cNew;
    if (cell == Cell::RNN) {
      hNew = gate(acts[0], n.create<AddOp>(xt, hr));
    } else if (cell == Cell::GRU) {
      SmallVector<Value> xg = split(xt, 3), hg = split(hr, rhT ? 2 : 3);
      if (n.hasFailed())
        return failure();
      Value z = gate(acts[0], n.create<AddOp>(xg[0], hg[0]));
      Value r = gate(acts[0], n.create<AddOp>(xg[1], hg[1]));
      Value recurrentH;
      if (rhT) {
        recurrentH = n.create<MatmulOp>(n.create<MulOp>(r, h), rhT);
      } else {
        recurrentH = rbh ? n.create<AddOp>(hg[2], rbh) : hg[2];
        recurrentH = n.create<MulOp>(r, recurrentH);
      }
      Value hh = gate(acts[1], n.create<AddOp>(xg[2], recurrentH));
      hNew = n.create<AddOp>(n.create<MulOp>(n.create<SubOp>(n.scalarLike(z, 1), z), hh),
                             n.create<MulOp>(z, h));
    } else {
      SmallVector<Value> gs = split(n.create<AddOp>(xt, hr), 4);
      if (n.hasFailed())
        return failure();
      Value i = gs[0], o = gs[1], f = gs[2], cc = gs[3];
      if (peep) {
        i = n.create<AddOp>(i, n.create<MulOp>(cols(peep, 0, H), c));
        f = n.create<AddOp>(f, n.create<MulOp>(cols(peep, 2 * H, 3 * H), c));
      }
      cNew = n.create<AddOp>(n.create<MulOp>(gate(acts[0], f), c),
                             n.create<MulOp>(gate(acts[0], i), gate(acts[1], cc)));
      if (peep)
        o = n.create<AddOp>(o, n.create<MulOp>(cols(peep, H, 2 * H), cNew));
      hNew = n.create<MulOp>(gate(acts[0], o), activate(n, acts[2], cNew));
    }
    if (n.hasFailed())
      return failure();
    if (mask) {
      Value m = n.broadcastTo(n.reshape(at(mask, t), {B, 1}), {B, H});
      h = n.create<WhereOp>(m, hNew, h);
      if (cNew)
        c = n.create<WhereOp>(m, cNew, c);
      ys.push_back(n.reshape(n.create<WhereOp>(m, hNew, zeros), {1, B, H}));
    } else {
      h = hNew;
      c = cNew;
      ys.push_back(n.reshape(hNew, {1, B, H}));
    }
  }
  Value y = n.create<ConcatOp>(ValueRange(ys), 0);
  return Result{reverse ? reversed(y) : y, h, c};
}

LogicalResult recurrent(NodeContext &n, Cell cell) {
  if (!n.hasInput(0) || !n.hasInput(1) || !n.hasInput(2))
    return n.error("needs X, W and R");
  if (cell == Cell::LSTM && n.getInt("input_forget", 0))
    return n.unsupported("LSTM with input_forget = 1 (coupled input and forget gates)");
  std::string dir = n.getString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return n.error("unknown direction '" + dir + "'");
  int64_t dirs = dir == "bidirectional" ? 2 : 1;
  bool batchFirst = n.getInt("layout", 0) == 1;
  Unroller u(n, cell);
  u.gates = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 3 : 4;
  u.linearBeforeReset = n.getInt("linear_before_reset", 0) != 0;
  if (n.attr("clip"))
    u.clip = n.getFloat("clip", 0);
  auto xt = n.inputType(0), wt = n.inputType(1), rt = n.inputType(2);
  if (xt.getRank() != 3 || wt.getRank() != 3 || rt.getRank() != 3)
    return n.error("X, W and R must have rank 3");
  u.x = batchFirst ? n.create<TransposeOp>(n.input(0), ArrayRef<int64_t>{1, 0, 2}) : n.input(0);
  auto x = cast<RankedTensorType>(u.x.getType());
  u.T = x.getDimSize(0), u.B = x.getDimSize(1), u.I = x.getDimSize(2);
  u.H = n.getInt("hidden_size", rt.getDimSize(2));
  int64_t gh = u.gates * u.H;
  if (wt.getShape() != ArrayRef<int64_t>{dirs, gh, u.I} ||
      rt.getShape() != ArrayRef<int64_t>{dirs, gh, u.H})
    return n.error("W must be [" + Twine(dirs) + ", " + Twine(gh) + ", " + Twine(u.I) +
                   "] and R [" + Twine(dirs) + ", " + Twine(gh) + ", " + Twine(u.H) + "]");
  auto expect = [&](unsigned i, ArrayRef<int64_t> shape, StringRef what) -> LogicalResult {
    if (n.hasInput(i) && n.inputType(i).getShape() != shape)
      return n.error(what + " has the wrong shape");
    return success();
  };
  SmallVector<int64_t> state = batchFirst ? SmallVector<int64_t>{u.B, dirs, u.H}
                                          : SmallVector<int64_t>{dirs, u.B, u.H};
  if (failed(expect(3, {dirs, 2 * gh}, "B")) || failed(expect(4, {u.B}, "sequence_lens")) ||
      failed(expect(5, state, "initial_h")) ||
      (cell == Cell::LSTM &&
       (failed(expect(6, state, "initial_c")) || failed(expect(7, {dirs, 3 * u.H}, "P")))))
    return failure();
  auto stateOf = [&](unsigned i) -> Value {
    if (!n.hasInput(i))
      return {};
    return batchFirst ? n.create<TransposeOp>(n.input(i), ArrayRef<int64_t>{1, 0, 2})
                      : n.input(i);
  };
  u.h0 = stateOf(5);
  if (cell == Cell::LSTM)
    u.c0 = stateOf(6);
  FailureOr<SmallVector<Activation>> acts = activations(n, cell, dirs);
  if (failed(acts))
    return failure();
  if (n.hasInput(4)) {
    MLIRContext *ctx = n.getContext();
    u.lens = n.create<CastOp>(RankedTensorType::get({u.B}, IntegerType::get(ctx, 64)),
                              n.input(4));
    HostTensor steps(RankedTensorType::get({u.T, 1}, IntegerType::get(ctx, 64)));
    for (int64_t t = 0; t < u.T; ++t)
      steps.i()[t] = t;
    u.mask = n.create<LtOp>(n.constant(steps), n.reshape(u.lens, {1, u.B}));
  }
  SmallVector<Value> ys, hs, cs;
  int64_t perDir = acts->size() / dirs;
  for (int64_t d = 0; d < dirs; ++d) {
    FailureOr<Unroller::Result> r = u.direction(
        d, dir == "reverse" || d == 1, ArrayRef<Activation>(*acts).slice(d * perDir, perDir));
    if (failed(r))
      return failure();
    ys.push_back(n.reshape(r->y, {u.T, 1, u.B, u.H}));
    hs.push_back(n.reshape(r->h, {1, u.B, u.H}));
    if (r->c)
      cs.push_back(n.reshape(r->c, {1, u.B, u.H}));
  }
  Value y = n.create<ConcatOp>(ValueRange(ys), 1), h = n.create<ConcatOp>(ValueRange(hs), 0);
  Value c = cs.empty() ? Value() : n.create<ConcatOp>(ValueRange(cs), 0);
  if (batchFirst) {
    y = n.create<TransposeOp>(y, ArrayRef<int64_t>{2, 0, 1, 3});
    h = n.create<TransposeOp>(h, ArrayRef<int64_t>{1, 0, 2});
    if (c)
      c = n.create<TransposeOp>(c, ArrayRef<int64_t>{1, 0, 2});
  }
  SmallVector<Value> outs{y, h};
  if (c)
    outs.push_back(c);
  outs.resize(std::min<size_t>(outs.size(), n.numOutputs()));
  n.setOutputs(outs);
  return success();
}

LogicalResult rnn(NodeContext &n) { return recurrent(n, Cell::RNN); }
LogicalResult gru(NodeContext &n) { return recurrent(n, Cell::GRU); }
LogicalResult lstm(NodeContext &n) { return recurrent(n, Cell::LSTM); }

} // namespace

void onnx_import::registerRecurrentOps(OpRegistry &r) {
  // 7: the attributes as today; 14 added `layout`, which the handler reads
  // (absent: 0); 22 only widened the types.
  struct Entry {
    const char *op;
    Handler fn;
  };
  for (Entry e : {Entry{"RNN", rnn}, Entry{"GRU", gru}, Entry{"LSTM", lstm}}) {
    r.add(e.op, 7, e.fn);
    r.add(e.op, 14, e.fn);
    r.sameAs(e.op, 22, 14);
  }
  r.add("ReverseSequence", 10, reverseSequence);
  r.sameAs("ReverseSequence", 28, 10); // bfloat16 added
}
