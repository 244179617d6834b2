//===- ops_optimizer.cpp - fused optimizer updates (merak.*_update) -------===//
//
// One pass over each parameter per step: the loop reads the parameter, the
// gradient and the state once and writes the new values once (in place when
// the generated code passes the same buffers). Per-element arithmetic is in
// the element type, in the order of the op's definition, so the result is
// bit-identical to the reference evaluator's; the per-step scalars are
// computed once per call. The loops have no calls and no data-dependent
// branches, so the compiler vectorises them. Iteration i reads and writes
// only element i of every array, so an output that is its input (in place)
// or a separate buffer are both free of loop-carried dependences; the loops
// say so (MERAK_ELEMENTWISE_LOOP), because otherwise the compiler's run-time
// overlap check sees the in-place buffers overlap and runs the scalar loop
// (measured: 2.5-3x slower per element).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/ops.h"
#include "ops_util.h"

#include <cmath>

namespace merak::rt::cpu {
using namespace detail;

#if defined(__clang__)
#define MERAK_ELEMENTWISE_LOOP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define MERAK_ELEMENTWISE_LOOP _Pragma("GCC ivdep")
#else
#define MERAK_ELEMENTWISE_LOOP
#endif

namespace {
template <class T> T scalarOr(const void *p, T dflt) {
  return p ? *static_cast<const T *>(p) : dflt;
}
} // namespace

void adamwUpdate(DT t, const void *p, const void *g, const void *m, const void *v,
                 const void *lr, const void *step, const void *clip, void *pOut,
                 void *mOut, void *vOut, int64_t n, double beta1, double beta2,
                 double eps, double weightDecay) {
  dispatchFloat(t, "adamw_update: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T lrT = *static_cast<const T *>(lr);
    const T coef = scalarOr<T>(clip, T(1)); // x * 1 == x exactly
    const double tt = static_cast<double>(*static_cast<const int64_t *>(step)) + 1.0;
    const double bc1 = 1.0 - std::pow(beta1, tt), bc2 = 1.0 - std::pow(beta2, tt);
    const T stepSize = static_cast<T>(static_cast<double>(lrT) / bc1);
    const T bc2Sqrt = static_cast<T>(std::sqrt(bc2));
    const T decay = T(1) - lrT * static_cast<T>(weightDecay);
    const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
    const T omb1 = static_cast<T>(1.0 - beta1), omb2 = static_cast<T>(1.0 - beta2);
    const T e = static_cast<T>(eps);
    const T *pp = static_cast<const T *>(p), *pg = static_cast<const T *>(g);
    const T *pm = static_cast<const T *>(m), *pv = static_cast<const T *>(v);
    T *op = static_cast<T *>(pOut), *om = static_cast<T *>(mOut), *ov = static_cast<T *>(vOut);
    parallelFor(n, 16, [&](int64_t b, int64_t end) {
      MERAK_ELEMENTWISE_LOOP
      for (int64_t i = b; i < end; ++i) {
        const T gi = pg[i] * coef;
        const T mi = b1 * pm[i] + omb1 * gi;
        const T vi = b2 * pv[i] + omb2 * (gi * gi);
        const T denom = std::sqrt(vi) / bc2Sqrt + e;
        const T pi = pp[i] * decay - stepSize * (mi / denom);
        om[i] = mi;
        ov[i] = vi;
        op[i] = pi;
      }
    });
  });
}

void adanUpdate(DT t, const void *p, const void *g, const void *m, const void *d,
                const void *nsq, const void *prev, const void *lr, const void *step,
                const void *clip, void *pOut, void *mOut, void *dOut, void *nOut,
                void *prevOut, int64_t n, double beta1, double beta2, double beta3,
                double eps, double weightDecay) {
  dispatchFloat(t, "adan_update: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T lrT = *static_cast<const T *>(lr);
    const T coef = scalarOr<T>(clip, T(1));
    const bool first = *static_cast<const int64_t *>(step) == 0;
    const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2), b3 = static_cast<T>(beta3);
    const T omb1 = static_cast<T>(1.0 - beta1), omb2 = static_cast<T>(1.0 - beta2),
            omb3 = static_cast<T>(1.0 - beta3), e = static_cast<T>(eps);
    const T shrink = T(1) + static_cast<T>(weightDecay) * lrT;
    const T *pp = static_cast<const T *>(p), *pg = static_cast<const T *>(g);
    const T *pm = static_cast<const T *>(m), *pd = static_cast<const T *>(d);
    const T *pn = static_cast<const T *>(nsq), *pr = static_cast<const T *>(prev);
    T *op = static_cast<T *>(pOut), *om = static_cast<T *>(mOut), *od = static_cast<T *>(dOut),
      *on = static_cast<T *>(nOut), *orr = static_cast<T *>(prevOut);
    parallelFor(n, 24, [&](int64_t b, int64_t end) {
      if (first) {
        MERAK_ELEMENTWISE_LOOP
        for (int64_t i = b; i < end; ++i) {
          const T gi = pg[i] * coef;
          const T di = gi * T(0);
          const T ni = gi * gi;
          const T eta = lrT / (std::sqrt(ni) + e);
          const T pi = (pp[i] - eta * (gi + omb2 * di)) / shrink;
          om[i] = gi, od[i] = di, on[i] = ni, orr[i] = gi, op[i] = pi;
        }
        return;
      }
      MERAK_ELEMENTWISE_LOOP
      for (int64_t i = b; i < end; ++i) {
        const T gi = pg[i] * coef;
        const T diff = gi - pr[i];
        const T mi = omb1 * pm[i] + b1 * gi;
        const T di = omb2 * pd[i] + b2 * diff;
        const T u = gi + omb2 * diff;
        const T ni = omb3 * pn[i] + b3 * (u * u);
        const T eta = lrT / (std::sqrt(ni) + e);
        const T pi = (pp[i] - eta * (mi + omb2 * di)) / shrink;
        om[i] = mi, od[i] = di, on[i] = ni, orr[i] = gi, op[i] = pi;
      }
    });
  });
}

void sgdUpdate(DT t, const void *p, const void *g, const void *buf, const void *lr,
               const void *clip, void *pOut, void *bufOut, int64_t n, double momentum,
               double weightDecay, bool nesterov) {
  dispatchFloat(t, "sgd_update: float tensors only", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T lrT = *static_cast<const T *>(lr);
    const T coef = scalarOr<T>(clip, T(1));
    const T wd = static_cast<T>(weightDecay), mom = static_cast<T>(momentum);
    const bool decay = weightDecay != 0;
    const T *pp = static_cast<const T *>(p), *pg = static_cast<const T *>(g);
    const T *pb = static_cast<const T *>(buf);
    T *op = static_cast<T *>(pOut), *ob = static_cast<T *>(bufOut);
    parallelFor(n, 8, [&](int64_t b, int64_t end) {
      // The variants as separate loops, so each vectorises without branches.
      auto run = [&](auto hasDecay, auto hasBuf, auto isNesterov) {
        MERAK_ELEMENTWISE_LOOP
        for (int64_t i = b; i < end; ++i) {
          T di = pg[i] * coef;
          if constexpr (decltype(hasDecay)::value)
            di = di + wd * pp[i];
          T dir = di;
          if constexpr (decltype(hasBuf)::value) {
            const T bi = mom * pb[i] + di;
            ob[i] = bi;
            dir = decltype(isNesterov)::value ? di + mom * bi : bi;
          }
          op[i] = pp[i] - lrT * dir;
        }
      };
      using Y = std::true_type;
      using N = std::false_type;
      if (!pb)
        decay ? run(Y{}, N{}, N{}) : run(N{}, N{}, N{});
      else if (nesterov)
        decay ? run(Y{}, Y{}, Y{}) : run(N{}, Y{}, Y{});
      else
        decay ? run(Y{}, Y{}, N{}) : run(N{}, Y{}, N{});
    });
  });
}

} // namespace merak::rt::cpu
