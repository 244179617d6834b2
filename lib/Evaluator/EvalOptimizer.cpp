//===- EvalOptimizer.cpp - reference kernels of the fused optimizer updates ===//
//
// adamw_update, adan_update and sgd_update exactly as their descriptions
// (MerakOptimizerOps.td): every operation is done in double and rounded to
// the element type, as the decomposed elementwise ops are, so the fused op
// and the ops it replaces agree to the bit; the per-step scalars of AdamW
// (bias corrections, step size) are computed in double, as torch.optim.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;

namespace {
/// Arithmetic rounded to one float type after every operation.
struct Rounded {
  FloatType type;
  double operator()(double v) const { return roundToFloatType(v, type); }
  double add(double a, double b) const { return (*this)(a + b); }
  double sub(double a, double b) const { return (*this)(a - b); }
  double mul(double a, double b) const { return (*this)(a * b); }
  double div(double a, double b) const { return (*this)(a / b); }
  double sqrt(double a) const { return (*this)(std::sqrt(a)); }
};

Rounded roundingOf(Value v) {
  return Rounded{cast<FloatType>(cast<RankedTensorType>(v.getType()).getElementType())};
}

/// The operand of `op` that is `v` (a present optional operand), or null.
const HostTensor *operandFor(Operation *op, kernels::Operands in, Value v) {
  if (!v)
    return nullptr;
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (operand == v)
      return in[i];
  return nullptr;
}

/// grad * clip (or grad) at k.
double clipped(const Rounded &r, const HostTensor &g, const HostTensor *clip, int64_t k) {
  return clip ? r.mul(g.f()[k], clip->f()[0]) : g.f()[k];
}
} // namespace

LogicalResult kernels::eval(AdamWUpdateOp op, Operands in, Results out) {
  Rounded r = roundingOf(op.getParam());
  const HostTensor &p = *in[0], &g = *in[1], &m = *in[2], &v = *in[3];
  const double lr = in[4]->f()[0];
  const int64_t step = in[5]->i()[0];
  const HostTensor *clip = operandFor(op, in, op.getClip());
  const double b1 = op.getBeta1().convertToDouble(), b2 = op.getBeta2().convertToDouble();
  const double eps = r(op.getEps().convertToDouble());
  const double t = static_cast<double>(step) + 1.0;
  const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
  const double stepSize = r(lr / bc1), bc2Sqrt = r(std::sqrt(bc2));
  const double decay = r.sub(1.0, r.mul(lr, r(op.getWeightDecay().convertToDouble())));
  const double cb1 = r(b1), cb2 = r(b2), omb1 = r(1.0 - b1), omb2 = r(1.0 - b2);
  HostTensor np(p.getType()), nm(p.getType()), nv(p.getType());
  for (int64_t k = 0; k < p.size(); ++k) {
    double gk = clipped(r, g, clip, k);
    double mk = r.add(r.mul(cb1, m.f()[k]), r.mul(omb1, gk));
    double vk = r.add(r.mul(cb2, v.f()[k]), r.mul(omb2, r.mul(gk, gk)));
    double denom = r.add(r.div(r.sqrt(vk), bc2Sqrt), eps);
    np.f()[k] = r.sub(r.mul(p.f()[k], decay), r.mul(stepSize, r.div(mk, denom)));
    nm.f()[k] = mk;
    nv.f()[k] = vk;
  }
  out.push_back(std::move(np));
  out.push_back(std::move(nm));
  out.push_back(std::move(nv));
  return success();
}

LogicalResult kernels::eval(AdanUpdateOp op, Operands in, Results out) {
  Rounded r = roundingOf(op.getParam());
  const HostTensor &p = *in[0], &g = *in[1], &m = *in[2], &d = *in[3], &n = *in[4],
                   &prev = *in[5];
  const double lr = in[6]->f()[0];
  const bool first = in[7]->i()[0] == 0;
  const HostTensor *clip = operandFor(op, in, op.getClip());
  const double b1 = op.getBeta1().convertToDouble(), b2 = op.getBeta2().convertToDouble(),
               b3 = op.getBeta3().convertToDouble();
  const double cb1 = r(b1), cb2 = r(b2), cb3 = r(b3), omb1 = r(1.0 - b1), omb2 = r(1.0 - b2),
               omb3 = r(1.0 - b3), eps = r(op.getEps().convertToDouble());
  const double shrink = r.add(1.0, r.mul(r(op.getWeightDecay().convertToDouble()), lr));
  HostTensor np(p.getType()), nm(p.getType()), nd(p.getType()), nn(p.getType()),
      ng(p.getType());
  for (int64_t k = 0; k < p.size(); ++k) {
    double gk = clipped(r, g, clip, k);
    double diff = r.sub(gk, prev.f()[k]);
    double mk = first ? gk : r.add(r.mul(omb1, m.f()[k]), r.mul(cb1, gk));
    double dk = first ? r.mul(gk, 0.0) : r.add(r.mul(omb2, d.f()[k]), r.mul(cb2, diff));
    double u = r.add(gk, r.mul(omb2, diff));
    double nk = first ? r.mul(gk, gk) : r.add(r.mul(omb3, n.f()[k]), r.mul(cb3, r.mul(u, u)));
    double eta = r.div(lr, r.add(r.sqrt(nk), eps));
    double dir = r.mul(eta, r.add(mk, r.mul(omb2, dk)));
    np.f()[k] = r.div(r.sub(p.f()[k], dir), shrink);
    nm.f()[k] = mk;
    nd.f()[k] = dk;
    nn.f()[k] = nk;
    ng.f()[k] = gk;
  }
  out.push_back(std::move(np));
  out.push_back(std::move(nm));
  out.push_back(std::move(nd));
  out.push_back(std::move(nn));
  out.push_back(std::move(ng));
  return success();
}

LogicalResult kernels::eval(SgdUpdateOp op, Operands in, Results out) {
  Rounded r = roundingOf(op.getParam());
  const HostTensor &p = *in[0], &g = *in[1];
  const HostTensor *buf = operandFor(op, in, op.getMomentumBuffer());
  const HostTensor *clip = operandFor(op, in, op.getClip());
  const double lr = operandFor(op, in, op.getLr())->f()[0];
  const double wd = op.getWeightDecay().convertToDouble();
  const double cwd = r(wd), mom = r(op.getMomentum().convertToDouble());
  const bool nesterov = op.getNesterov();
  HostTensor np(p.getType()), nb(p.getType());
  for (int64_t k = 0; k < p.size(); ++k) {
    double dk = clipped(r, g, clip, k);
    if (wd != 0)
      dk = r.add(dk, r.mul(cwd, p.f()[k]));
    double dir = dk;
    if (buf) {
      double bk = r.add(r.mul(mom, buf->f()[k]), dk);
      nb.f()[k] = bk;
      dir = nesterov ? r.add(dk, r.mul(mom, bk)) : bk;
    }
    np.f()[k] = r.sub(p.f()[k], r.mul(lr, dir));
  }
  out.push_back(std::move(np));
  if (buf)
    out.push_back(std::move(nb));
  return success();
}
