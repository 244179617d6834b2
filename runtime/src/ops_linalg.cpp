//===- ops_linalg.cpp - matmul, conv2d (+ backward), 2-d pooling ------------===//
//
// See merak_rt/ops.h; semantics of lib/Evaluator/EvalNN.cpp.
//
// matmul: F32 through kernels.cpp's gemm (oneDNN's or OpenBLAS's sgemm by
// shape; OpenMP blocks of single-threaded calls). A 2-D (or batch-1) rhs folds the lhs batch
// into M (one GEMM); a batch-1 lhs or equal batches are one batchedGemm with
// stride 0 / full strides; other broadcasts loop over the batch with
// broadcast strides. Other types: loops accumulating in double (F64) or
// wrapping int64, in the evaluator's order.
//
// conv2d: im2col + GEMM per image and group (kernels.cpp's blocked
// sgemm/dgemm); a 1x1, stride-1, unpadded kernel uses the input directly. Backward data: GEMM into
// a column buffer, then col2im (parallel over channels, so deterministic). Backward filter: GEMMs
// accumulated over the images (beta = 1).
//
// Pools: parallel over (n, c) planes; gradients accumulate per plane in
// double in the evaluator's window order.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/kernels.h"
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <cmath>

namespace merak::rt::cpu {
using namespace detail;

namespace {

inline void gemmT(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, const float *B, float beta, float *C) {
  gemm(ta, tb, M, N, K, alpha, A, B, beta, C);
}

inline void gemmT(bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                  double alpha, const double *A, const double *B, double beta,
                  double *C) {
  dgemmBlocked(ta, tb, M, N, K, alpha, A, B, beta, C);
}

/// One [M,K] x [K,N] product by loops, accumulating per (i, j) over p in
/// increasing order (the evaluator's), in double or wrapping int64.
template <class T>
void matmulLoops(const T *a, const T *b, T *y, int64_t M, int64_t N,
                 int64_t K) {
  using A = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
  parallelFor(M, N * K, [&](int64_t i0, int64_t i1) {
    A *acc = scratch<A, 20>(static_cast<size_t>(N));
    for (int64_t i = i0; i < i1; ++i) {
      std::fill(acc, acc + N, A(0));
      for (int64_t p = 0; p < K; ++p) {
        const A av = static_cast<A>(a[i * K + p]);
        const T *br = b + p * N;
        for (int64_t j = 0; j < N; ++j)
          acc[j] += av * static_cast<A>(br[j]);
      }
      for (int64_t j = 0; j < N; ++j) {
        if constexpr (std::is_floating_point_v<T>)
          y[i * N + j] = static_cast<T>(acc[j]);
        else
          y[i * N + j] = static_cast<T>(
              static_cast<std::make_unsigned_t<T>>(acc[j]));
      }
    }
  });
}

} // namespace

void matmul(DT t, const void *a, const Dims &da, const void *b, const Dims &db,
            void *y, const Dims &dy, bool ta, bool tb) {
  matmul(t, a, da, b, db, y, dy, ta, tb, t);
}

void matmul(DT t, const void *a, const Dims &da, const void *b, const Dims &db, void *y,
            const Dims &dy, bool ta, bool tb, DT yt, bool accumulate) {
  if (yt != t && !(t == DT::BF16 && yt == DT::F32))
    fatal("matmul: the result type must be the operands' (or f32 for bf16 operands)");
  if (accumulate && yt != DT::F32)
    fatal("matmul: an accumulated product must be f32");
  if (t == DT::BF16) {
    // Mixed precision: bf16 operands widened (exactly) to float32, the
    // float32 GEMM (float accumulation), the result rounded once to bf16 --
    // a bf16 tensor-core GEMM's numbers up to the accumulation order -- or
    // (yt F32) written as it is.
    const int64_t na = da.numel(), nb = db.numel(), ny = dy.numel();
    float *fa = scratch<float, 21>(static_cast<size_t>(na));
    float *fb = scratch<float, 22>(static_cast<size_t>(nb));
    cast(DT::BF16, a, DT::F32, fa, na);
    cast(DT::BF16, b, DT::F32, fb, nb);
    if (yt == DT::F32)
      return matmul(DT::F32, fa, da, fb, db, y, dy, ta, tb, DT::F32, accumulate);
    float *fy = scratch<float, 23>(static_cast<size_t>(ny));
    matmul(DT::F32, fa, da, fb, db, fy, dy, ta, tb);
    cast(DT::F32, fy, DT::BF16, y, ny);
    return;
  }
  if ((ta || tb) && (t != DT::F32 || da.rank < 2 || db.rank < 2))
    fatal("matmul: transposed operands need F32 matrices");
  Dims l = da, r = db;
  // The logical operands: stored transposed, read transposed.
  if (ta)
    std::swap(l.d[l.rank - 2], l.d[l.rank - 1]);
  if (tb)
    std::swap(r.d[r.rank - 2], r.d[r.rank - 1]);
  if (l.rank == 1) {
    l.rank = 2;
    l.d[1] = l.d[0];
    l.d[0] = 1;
  }
  if (r.rank == 1) {
    r.rank = 2;
    r.d[1] = 1;
  }
  const int64_t M = l.d[l.rank - 2], K = l.d[l.rank - 1], N = r.d[r.rank - 1];
  Dims lb, rb, batch;
  lb.rank = l.rank - 2;
  rb.rank = r.rank - 2;
  for (int32_t i = 0; i < lb.rank; ++i)
    lb.d[i] = l.d[i];
  for (int32_t i = 0; i < rb.rank; ++i)
    rb.d[i] = r.d[i];
  batch.rank = std::max(lb.rank, rb.rank);
  for (int32_t i = 0; i < batch.rank; ++i) {
    const int32_t il = i - (batch.rank - lb.rank), ir = i - (batch.rank - rb.rank);
    const int64_t vl = il >= 0 ? lb.d[il] : 1, vr = ir >= 0 ? rb.d[ir] : 1;
    batch.d[i] = vl == 1 ? vr : vl;
  }
  const int64_t nb = batch.numel(), nlb = lb.numel(), nrb = rb.numel();
  if (nb == 0 || M == 0 || N == 0)
    return;
  int64_t sa[kMaxRank], sb[kMaxRank];
  broadcastStrides(lb, batch, sa);
  broadcastStrides(rb, batch, sb);
  // y += the product: BLAS's beta = 1 (accumulate is F32 only, above).
  const float beta = accumulate ? 1.0f : 0.0f;
  dispatchNumeric(t, "matmul: numeric tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pa = static_cast<const T *>(a);
    const T *pb = static_cast<const T *>(b);
    T *py = static_cast<T *>(y);
    if constexpr (std::is_same_v<T, float>) {
      if (nrb == 1 && !ta) { // fold the lhs batch into M
        gemm(false, tb, nb * M, N, K, 1.0f, pa, pb, beta, py);
        return;
      }
      if (nlb == 1 || nrb == 1 || (nlb == nb && nrb == nb)) {
        batchedGemm(ta, tb, nb, M, N, K, 1.0f, pa, nlb == 1 ? 0 : M * K, pb, nrb == 1 ? 0 : K * N,
                    beta, py, M * N);
        return;
      }
    }
    // General broadcast: walk the batch with broadcast strides (in matrices).
    int64_t idx[kMaxRank] = {};
    int64_t oa = 0, ob = 0;
    for (int64_t bi = 0; bi < nb; ++bi) {
      const T *ma = pa + oa * M * K;
      const T *mb = pb + ob * K * N;
      T *my = py + bi * M * N;
      if constexpr (std::is_same_v<T, float>)
        gemm(ta, tb, M, N, K, 1.0f, ma, mb, beta, my);
      else
        matmulLoops<T>(ma, mb, my, M, N, K);
      for (int32_t d = batch.rank - 1; d >= 0; --d) {
        oa += sa[d];
        ob += sb[d];
        if (++idx[d] < batch.d[d])
          break;
        oa -= sa[d] * batch.d[d];
        ob -= sb[d] * batch.d[d];
        idx[d] = 0;
      }
    }
  });
}

// --- conv2d -------------------------------------------------------------------

namespace {

struct ConvGeom {
  int64_t N, C, H, W, O, CG, KH, KW, OH, OW, G, OG, CKK, OHW;
  bool direct; // 1x1, stride 1, no padding: the input is its own im2col
  ConvGeom(const Dims &dx, const Dims &dw, const Dims &dy,
           const Conv2DAttrs &a) {
    N = dx.d[0], C = dx.d[1], H = dx.d[2], W = dx.d[3];
    O = dw.d[0], CG = dw.d[1], KH = dw.d[2], KW = dw.d[3];
    OH = dy.d[2], OW = dy.d[3];
    G = a.groups > 0 ? a.groups : 1;
    OG = O / G;
    CKK = CG * KH * KW;
    OHW = OH * OW;
    direct = KH == 1 && KW == 1 && a.sh == 1 && a.sw == 1 && a.pt == 0 &&
             a.pl == 0 && OH == H && OW == W;
  }
};

/// col[(c*KH + kh)*KW + kw, oh*OW + ow] = x[c0 + c, ih, iw] (0 outside).
template <class T>
void im2col(const T *x, const ConvGeom &g, const Conv2DAttrs &a, T *col) {
  parallelFor(g.CKK, g.OHW, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t kw = row % g.KW, kh = (row / g.KW) % g.KH,
                    c = row / (g.KW * g.KH);
      const T *xc = x + c * g.H * g.W;
      T *dst = col + row * g.OHW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t ih = oh * a.sh - a.pt + kh * a.dh;
        T *d = dst + oh * g.OW;
        if (ih < 0 || ih >= g.H) {
          std::fill(d, d + g.OW, T(0));
          continue;
        }
        const T *xr = xc + ih * g.W;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t iw = ow * a.sw - a.pl + kw * a.dw;
          d[ow] = (iw >= 0 && iw < g.W) ? xr[iw] : T(0);
        }
      }
    }
  });
}

/// dx[c0 + c, ih, iw] += col[...] (the adjoint of im2col); parallel over c.
template <class T>
void col2im(const T *col, const ConvGeom &g, const Conv2DAttrs &a, T *dx) {
  parallelFor(g.CG, g.KH * g.KW * g.OHW, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      T *xc = dx + c * g.H * g.W;
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const T *src = col + ((c * g.KH + kh) * g.KW + kw) * g.OHW;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * a.sh - a.pt + kh * a.dh;
            if (ih < 0 || ih >= g.H)
              continue;
            T *xr = xc + ih * g.W;
            const T *s = src + oh * g.OW;
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t iw = ow * a.sw - a.pl + kw * a.dw;
              if (iw >= 0 && iw < g.W)
                xr[iw] += s[ow];
            }
          }
        }
    }
  });
}

/// A depthwise convolution (one input and one output channel per group,
/// Mamba's causal conv1d, MobileNet's and ConvNeXt's 3x3 and 7x7): direct
/// loops over each (n, c) plane instead of a tiny im2col and GEMM per
/// group. For kernel column kw, the outputs [lo, hi) of a row read inside
/// the input row: iw = ow * sw + offset in [0, W), offset = kw * dw - pl.
struct DepthwiseRow {
  int64_t lo, hi, offset;
};

bool isDepthwise(const ConvGeom &g) { return g.CG == 1 && g.OG == 1 && g.G == g.C; }

/// The taps of a depthwise convolution: fn(oh, ih, k, row) for every
/// output row oh and kernel tap k = kh * KW + kw whose input row ih is
/// inside the plane, `row` the tap's output range (one per column, made
/// once per call).
struct DepthwiseTaps {
  const ConvGeom &g;
  const Conv2DAttrs &a;
  std::vector<DepthwiseRow> rows;

  DepthwiseTaps(const ConvGeom &g, const Conv2DAttrs &a) : g(g), a(a) {
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      DepthwiseRow r;
      r.offset = kw * a.dw - a.pl;
      r.hi = g.W - 1 - r.offset < 0 ? 0 : std::min(g.OW, (g.W - 1 - r.offset) / a.sw + 1);
      r.lo = std::min(r.offset >= 0 ? 0 : (-r.offset + a.sw - 1) / a.sw, r.hi);
      rows.push_back(r);
    }
  }
  template <class Fn> void forEach(Fn &&fn) const {
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t ih = oh * a.sh - a.pt + kh * a.dh;
        if (ih < 0 || ih >= g.H)
          continue;
        for (int64_t kw = 0; kw < g.KW; ++kw)
          fn(oh, ih, kh * g.KW + kw, rows[kw]);
      }
  }
};

/// y[n, c] = bias[c] + sum over the taps of w[c, tap] * x[n, c] shifted.
template <class T>
void depthwiseForward(const T *x, const T *w, const T *bias, const ConvGeom &g,
                      const Conv2DAttrs &a, T *y) {
  const DepthwiseTaps taps(g, a);
  parallelFor(g.N * g.C, g.OHW * g.KH * g.KW, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % g.C;
      const T *xc = x + p * g.H * g.W, *wc = w + c * g.KH * g.KW;
      T *yc = y + p * g.OHW;
      std::fill(yc, yc + g.OHW, bias ? bias[c] : T(0));
      taps.forEach([&](int64_t oh, int64_t ih, int64_t k, const DepthwiseRow &r) {
        const T *xr = xc + ih * g.W;
        T *yr = yc + oh * g.OW;
        for (int64_t ow = r.lo; ow < r.hi; ++ow)
          yr[ow] += wc[k] * xr[ow * a.sw + r.offset];
      });
    }
  });
}

/// dx[n, c] = the adjoint: each gradient row scattered back through w.
template <class T>
void depthwiseBackwardData(const T *gr, const T *w, const ConvGeom &g, const Conv2DAttrs &a,
                           T *dx) {
  const DepthwiseTaps taps(g, a);
  parallelFor(g.N * g.C, g.OHW * g.KH * g.KW, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % g.C;
      const T *gc = gr + p * g.OHW, *wc = w + c * g.KH * g.KW;
      T *xc = dx + p * g.H * g.W;
      std::fill(xc, xc + g.H * g.W, T(0));
      taps.forEach([&](int64_t oh, int64_t ih, int64_t k, const DepthwiseRow &r) {
        T *xr = xc + ih * g.W;
        const T *gr0 = gc + oh * g.OW;
        for (int64_t ow = r.lo; ow < r.hi; ++ow)
          xr[ow * a.sw + r.offset] += wc[k] * gr0[ow];
      });
    }
  });
}

/// dw[c, tap] = sum over n and the outputs of gr * x shifted; parallel over
/// c, each tap's sum in (n, oh) order.
template <class T>
void depthwiseBackwardFilter(const T *x, const T *gr, const ConvGeom &g, const Conv2DAttrs &a,
                             T *dw) {
  const DepthwiseTaps taps(g, a);
  parallelFor(g.C, g.N * g.OHW * g.KH * g.KW, [&](int64_t c0, int64_t c1) {
    std::vector<double> acc(g.KH * g.KW);
    for (int64_t c = c0; c < c1; ++c) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < g.N; ++n) {
        const T *xc = x + (n * g.C + c) * g.H * g.W, *gc = gr + (n * g.C + c) * g.OHW;
        taps.forEach([&](int64_t oh, int64_t ih, int64_t k, const DepthwiseRow &r) {
          const T *xr = xc + ih * g.W, *gr0 = gc + oh * g.OW;
          T row = T(0);
          for (int64_t ow = r.lo; ow < r.hi; ++ow)
            row += gr0[ow] * xr[ow * a.sw + r.offset];
          acc[k] += row;
        });
      }
      for (int64_t k = 0; k < g.KH * g.KW; ++k)
        dw[c * g.KH * g.KW + k] = T(acc[k]);
    }
  });
}

} // namespace

void conv2d(DT t, const void *x, const Dims &dx, const void *w, const Dims &dw,
            const void *bias, const Conv2DAttrs &a, void *y, const Dims &dy) {
  ConvGeom g(dx, dw, dy, a);
  dispatchFloat(t, "conv2d: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    const T *pw = static_cast<const T *>(w);
    const T *pb = static_cast<const T *>(bias);
    T *py = static_cast<T *>(y);
    if (isDepthwise(g))
      return depthwiseForward(px, pw, pb, g, a, py);
    T *col = g.direct ? nullptr
                      : scratch<T, 21>(static_cast<size_t>(g.CKK * g.OHW));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const T *xg = px + (n * g.C + gi * g.CG) * g.H * g.W;
        T *yg = py + (n * g.O + gi * g.OG) * g.OHW;
        if (pb)
          for (int64_t o = 0; o < g.OG; ++o)
            std::fill(yg + o * g.OHW, yg + (o + 1) * g.OHW, pb[gi * g.OG + o]);
        const T *src = xg;
        if (!g.direct) {
          im2col(xg, g, a, col);
          src = col;
        }
        gemmT(false, false, g.OG, g.OHW, g.CKK, T(1), pw + gi * g.OG * g.CKK,
              src, pb ? T(1) : T(0), yg);
      }
  });
}

void conv2dBackwardData(DT t, const void *gr, const Dims &dg, const void *w,
                        const Dims &dw, const Conv2DAttrs &a, void *dxOut,
                        const Dims &dx) {
  ConvGeom g(dx, dw, dg, a);
  dispatchFloat(t, "conv2d_backward_data: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pg = static_cast<const T *>(gr);
    const T *pw = static_cast<const T *>(w);
    T *pdx = static_cast<T *>(dxOut);
    if (isDepthwise(g))
      return depthwiseBackwardData(pg, pw, g, a, pdx);
    const int64_t total = dx.numel();
    parallelFor(total, 1, [&](int64_t b, int64_t e) {
      std::fill(pdx + b, pdx + e, T(0));
    });
    T *col = g.direct ? nullptr
                      : scratch<T, 22>(static_cast<size_t>(g.CKK * g.OHW));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const T *gg = pg + (n * g.O + gi * g.OG) * g.OHW;
        T *xg = pdx + (n * g.C + gi * g.CG) * g.H * g.W;
        const T *wg = pw + gi * g.OG * g.CKK;
        if (g.direct) { // [CG, HW] = W^T [CG, OG] x g [OG, HW]
          gemmT(true, false, g.CKK, g.OHW, g.OG, T(1), wg, gg, T(0), xg);
          continue;
        }
        gemmT(true, false, g.CKK, g.OHW, g.OG, T(1), wg, gg, T(0), col);
        col2im(col, g, a, xg);
      }
  });
}

void conv2dBackwardFilter(DT t, const void *x, const Dims &dx, const void *gr,
                          const Dims &dg, const Conv2DAttrs &a, void *dwOut,
                          const Dims &dw) {
  ConvGeom g(dx, dw, dg, a);
  dispatchFloat(t, "conv2d_backward_filter: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    const T *pg = static_cast<const T *>(gr);
    T *pdw = static_cast<T *>(dwOut);
    if (g.N == 0) {
      std::fill(pdw, pdw + dw.numel(), T(0));
      return;
    }
    if (isDepthwise(g))
      return depthwiseBackwardFilter(px, pg, g, a, pdw);
    T *col = g.direct ? nullptr
                      : scratch<T, 23>(static_cast<size_t>(g.CKK * g.OHW));
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const T *xg = px + (n * g.C + gi * g.CG) * g.H * g.W;
        const T *gg = pg + (n * g.O + gi * g.OG) * g.OHW;
        const T *src = xg;
        if (!g.direct) {
          im2col(xg, g, a, col);
          src = col;
        }
        // dW_g [OG, CKK] (+)= g [OG, OHW] x col^T [OHW, CKK]
        gemmT(false, true, g.OG, g.CKK, g.OHW, T(1), gg, src,
              n == 0 ? T(0) : T(1), pdw + gi * g.OG * g.CKK);
      }
  });
}

// --- pooling ------------------------------------------------------------------

namespace {

struct PoolGeom {
  int64_t NC, H, W, OH, OW;
  PoolGeom(const Dims &dx, const Dims &dy)
      : NC(dx.d[0] * dx.d[1]), H(dx.d[2]), W(dx.d[3]), OH(dy.d[2]),
        OW(dy.d[3]) {}
};

/// Calls fn(oh, ow, ih0, iw0) per window of one plane; the window's taps
/// are ih0 + kh*dh, iw0 + kw*dw.
template <class Fn>
inline void forWindows(const PoolGeom &g, const Pool2DAttrs &a, Fn &&fn) {
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow)
      fn(oh, ow, oh * a.sh - a.pt, ow * a.sw - a.pl);
}

/// Window positions inside the padded extent (count_include_pad's divisor).
inline int64_t paddedCount(const PoolGeom &g, const Pool2DAttrs &a,
                           int64_t ih0, int64_t iw0) {
  int64_t rows = 0, cols = 0;
  for (int64_t kh = 0; kh < a.kh; ++kh)
    rows += ih0 + kh < g.H + a.pb;
  for (int64_t kw = 0; kw < a.kw; ++kw)
    cols += iw0 + kw < g.W + a.pr;
  return rows * cols;
}

} // namespace

void maxPool2d(DT t, const void *x, const Dims &dx, const Pool2DAttrs &a,
               void *y, const Dims &dy) {
  PoolGeom g(dx, dy);
  dispatchFloat(t, "max_pool2d: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    T *py = static_cast<T *>(y);
    parallelFor(g.NC, g.OH * g.OW * a.kh * a.kw, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const T *xp = px + p * g.H * g.W;
        T *yp = py + p * g.OH * g.OW;
        forWindows(g, a, [&](int64_t oh, int64_t ow, int64_t ih0, int64_t iw0) {
          T m = -INFINITY;
          for (int64_t kh = 0; kh < a.kh; ++kh) {
            const int64_t ih = ih0 + kh * a.dh;
            if (ih < 0 || ih >= g.H)
              continue;
            for (int64_t kw = 0; kw < a.kw; ++kw) {
              const int64_t iw = iw0 + kw * a.dw;
              if (iw < 0 || iw >= g.W)
                continue;
              const T v = xp[ih * g.W + iw];
              m = std::isnan(v) ? v : std::max(m, v);
            }
          }
          yp[oh * g.OW + ow] = m;
        });
      }
    });
  });
}

void avgPool2d(DT t, const void *x, const Dims &dx, const Pool2DAttrs &a,
               void *y, const Dims &dy) {
  PoolGeom g(dx, dy);
  dispatchFloat(t, "avg_pool2d: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    T *py = static_cast<T *>(y);
    parallelFor(g.NC, g.OH * g.OW * a.kh * a.kw, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const T *xp = px + p * g.H * g.W;
        T *yp = py + p * g.OH * g.OW;
        forWindows(g, a, [&](int64_t oh, int64_t ow, int64_t ih0, int64_t iw0) {
          double sum = 0.0;
          int64_t inside = 0;
          for (int64_t kh = 0; kh < a.kh; ++kh) {
            const int64_t ih = ih0 + kh;
            if (ih < 0 || ih >= g.H)
              continue;
            for (int64_t kw = 0; kw < a.kw; ++kw) {
              const int64_t iw = iw0 + kw;
              if (iw < 0 || iw >= g.W)
                continue;
              sum += static_cast<double>(xp[ih * g.W + iw]);
              ++inside;
            }
          }
          const int64_t cnt =
              a.countIncludePad ? paddedCount(g, a, ih0, iw0) : inside;
          yp[oh * g.OW + ow] = static_cast<T>(cnt ? sum / cnt : 0.0);
        });
      }
    });
  });
}

void maxPool2dGrad(DT t, const void *x, const Dims &dx, const void *gr,
                   const Dims &dg, const Pool2DAttrs &a, void *dxOut) {
  PoolGeom g(dx, dg);
  dispatchFloat(t, "max_pool2d_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = static_cast<const T *>(x);
    const T *pg = static_cast<const T *>(gr);
    T *pd = static_cast<T *>(dxOut);
    parallelFor(g.NC, g.OH * g.OW * a.kh * a.kw, [&](int64_t b, int64_t e) {
      double *acc = scratch<double, 24>(static_cast<size_t>(g.H * g.W));
      for (int64_t p = b; p < e; ++p) {
        const T *xp = px + p * g.H * g.W;
        const T *gp = pg + p * g.OH * g.OW;
        std::fill(acc, acc + g.H * g.W, 0.0);
        forWindows(g, a, [&](int64_t oh, int64_t ow, int64_t ih0, int64_t iw0) {
          int64_t best = -1;
          for (int64_t kh = 0; kh < a.kh; ++kh) {
            const int64_t ih = ih0 + kh * a.dh;
            if (ih < 0 || ih >= g.H)
              continue;
            for (int64_t kw = 0; kw < a.kw; ++kw) {
              const int64_t iw = iw0 + kw * a.dw;
              if (iw < 0 || iw >= g.W)
                continue;
              const int64_t i = ih * g.W + iw;
              if (best < 0 || xp[i] > xp[best] || std::isnan(xp[i]))
                best = i;
            }
          }
          if (best >= 0)
            acc[best] += static_cast<double>(gp[oh * g.OW + ow]);
        });
        T *dp = pd + p * g.H * g.W;
        for (int64_t i = 0; i < g.H * g.W; ++i)
          dp[i] = static_cast<T>(acc[i]);
      }
    });
  });
}

void avgPool2dGrad(DT t, const void *gr, const Dims &dg, const Pool2DAttrs &a,
                   void *dxOut, const Dims &dx) {
  PoolGeom g(dx, dg);
  dispatchFloat(t, "avg_pool2d_grad: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pg = static_cast<const T *>(gr);
    T *pd = static_cast<T *>(dxOut);
    parallelFor(g.NC, g.OH * g.OW * a.kh * a.kw, [&](int64_t b, int64_t e) {
      double *acc = scratch<double, 25>(static_cast<size_t>(g.H * g.W));
      for (int64_t p = b; p < e; ++p) {
        const T *gp = pg + p * g.OH * g.OW;
        std::fill(acc, acc + g.H * g.W, 0.0);
        forWindows(g, a, [&](int64_t oh, int64_t ow, int64_t ih0, int64_t iw0) {
          int64_t inside = 0;
          for (int64_t kh = 0; kh < a.kh; ++kh) {
            const int64_t ih = ih0 + kh;
            if (ih < 0 || ih >= g.H)
              continue;
            for (int64_t kw = 0; kw < a.kw; ++kw) {
              const int64_t iw = iw0 + kw;
              inside += iw >= 0 && iw < g.W;
            }
          }
          const int64_t cnt =
              a.countIncludePad ? paddedCount(g, a, ih0, iw0) : inside;
          if (inside == 0)
            return;
          const double share = static_cast<double>(gp[oh * g.OW + ow]) / cnt;
          for (int64_t kh = 0; kh < a.kh; ++kh) {
            const int64_t ih = ih0 + kh;
            if (ih < 0 || ih >= g.H)
              continue;
            for (int64_t kw = 0; kw < a.kw; ++kw) {
              const int64_t iw = iw0 + kw;
              if (iw >= 0 && iw < g.W)
                acc[ih * g.W + iw] += share;
            }
          }
        });
        T *dp = pd + p * g.H * g.W;
        for (int64_t i = 0; i < g.H * g.W; ++i)
          dp[i] = static_cast<T>(acc[i]);
      }
    });
  });
}

} // namespace merak::rt::cpu
