//===- EvalNN.cpp - contraction, convolution, pooling, dropout kernels ----===//
#include "Kernels.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;

LogicalResult kernels::evalMatmul(MatmulOp op, Operands in, Results out) {
  const HostTensor &a = *in[0], &b = *in[1];
  SmallVector<int64_t> l(a.getShape()), r(b.getShape());
  if (l.size() == 1)
    l.insert(l.begin(), 1);
  if (r.size() == 1)
    r.push_back(1);
  int64_t m = l[l.size() - 2], k = l.back(), n = r.back();
  ArrayRef<int64_t> lb = ArrayRef<int64_t>(l).drop_back(2),
                    rb = ArrayRef<int64_t>(r).drop_back(2);
  SmallVector<int64_t> batch = *broadcastShapes(lb, rb);
  // Strides (in matrices) of each operand's batch dims, broadcast to `batch`.
  auto sa = broadcastStrides(lb, batch), sb = broadcastStrides(rb, batch);
  HostTensor res(op.getType());
  bool isF = a.isFloat();
  forEachIndex(batch, [&](int64_t bi, ArrayRef<int64_t> idx) {
    int64_t ao = dot(idx, sa) * m * k, bo = dot(idx, sb) * k * n,
            ro = bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        if (isF) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += a.f()[ao + i * k + p] * b.f()[bo + p * n + j];
          res.setFromDouble(ro + i * n + j, acc);
        } else {
          uint64_t acc = 0; // wraps like the element type, no UB
          for (int64_t p = 0; p < k; ++p)
            acc += (uint64_t)a.i()[ao + i * k + p] * (uint64_t)b.i()[bo + p * n + j];
          res.setFromInt(ro + i * n + j, (int64_t)acc);
        }
      }
  });
  out.push_back(std::move(res));
  return success();
}

LogicalResult kernels::evalConv2D(Conv2DOp op, Operands in, Results out) {
  const HostTensor &x = *in[0], &w = *in[1];
  const HostTensor *bias = op.getBias() ? in[2] : nullptr;
  HostTensor r(op.getType());
  ArrayRef<int64_t> xs = x.getShape(), ws = w.getShape(), rs = r.getShape();
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  int64_t O = ws[0], CG = ws[1], KH = ws[2], KW = ws[3];
  int64_t OH = rs[2], OW = rs[3], G = op.getGroups(), OG = O / G;
  auto s = op.getStrides(), p = op.getPadding(), d = op.getDilations();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      int64_t g = o / OG;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bias ? bias->f()[o] : 0.0;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t kh = 0; kh < KH; ++kh) {
              int64_t ih = oh * s[0] - p[0] + kh * d[0];
              if (ih < 0 || ih >= H)
                continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t iw = ow * s[1] - p[1] + kw * d[1];
                if (iw < 0 || iw >= W)
                  continue;
                acc += x.f()[((n * C + g * CG + c) * H + ih) * W + iw] *
                       w.f()[((o * CG + c) * KH + kh) * KW + kw];
              }
            }
          r.setFromDouble(((n * O + o) * OH + oh) * OW + ow, acc);
        }
    }
  out.push_back(std::move(r));
  return success();
}

template <typename Fn>
static void forEachWindow(const HostTensor &x, HostTensor &r, ArrayRef<int64_t> k,
                          ArrayRef<int64_t> s, ArrayRef<int64_t> p,
                          ArrayRef<int64_t> d, Fn fn) {
  ArrayRef<int64_t> xs = x.getShape(), rs = r.getShape();
  int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], OH = rs[2], OW = rs[3];
  for (int64_t nc = 0; nc < NC; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        SmallVector<double, 16> vals;
        int64_t padded = 0; // window positions inside the padded extent
        for (int64_t kh = 0; kh < k[0]; ++kh) {
          int64_t ih = oh * s[0] - p[0] + kh * d[0];
          for (int64_t kw = 0; kw < k[1]; ++kw) {
            int64_t iw = ow * s[1] - p[1] + kw * d[1];
            if (ih < H + p[2] && iw < W + p[3])
              ++padded;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
              vals.push_back(x.f()[(nc * H + ih) * W + iw]);
          }
        }
        r.setFromDouble((nc * OH + oh) * OW + ow, fn(vals, padded));
      }
}

LogicalResult kernels::evalMaxPool(MaxPool2DOp op, Operands in, Results out) {
  HostTensor r(op.getType());
  forEachWindow(*in[0], r, op.getKernel(), op.getStrides(), op.getPadding(),
                op.getDilations(), [](ArrayRef<double> v, int64_t) {
                  double m = -INFINITY;
                  for (double x : v)
                    m = std::isnan(x) ? x : std::max(m, x);
                  return m;
                });
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::evalAvgPool(AvgPool2DOp op, Operands in, Results out) {
  HostTensor r(op.getType());
  int64_t ones[2] = {1, 1};
  bool includePad = op.getCountIncludePad();
  forEachWindow(*in[0], r, op.getKernel(), op.getStrides(), op.getPadding(),
                ones, [&](ArrayRef<double> v, int64_t padded) {
                  double sum = 0;
                  for (double x : v)
                    sum += x;
                  int64_t n = includePad ? padded : (int64_t)v.size();
                  return n ? sum / n : 0.0;
                });
  out.push_back(std::move(r));
  return success();
}

/// Counter-based uniform in [0, 1): splitmix64 of (seed, index).
static double uniformAt(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-53;
}

LogicalResult kernels::evalDropout(DropoutOp op, Operands in, Results out) {
  const HostTensor &x = *in[0];
  HostTensor y(op.getOutput().getType()), mask(op.getMask().getType());
  double ratio = op.getRatio().convertToDouble(), scale = 1.0 / (1.0 - ratio);
  uint64_t seed = (uint64_t)op.getSeed();
  for (int64_t k = 0; k < x.size(); ++k) {
    bool keep = ratio == 0.0 || uniformAt(seed, k) >= ratio;
    mask.i()[k] = keep;
    y.setFromDouble(k, keep ? x.f()[k] * scale : 0.0);
  }
  out.push_back(std::move(y));
  out.push_back(std::move(mask));
  return success();
}
