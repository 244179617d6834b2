//===- ops_experts.cu - GPU ABI: the expert GEMMs and routing kernels ------===//
//
// Semantics of runtime/src/ops_experts.cpp (kernels.def documents them).
//
// expertMatmul / expertMatmulGradWeight: the expert ids are copied to the
// host (a stream synchronisation: the grouping needs the counts, as
// Megatron's grouped GEMM needs tokens_per_expert on the host), grouped
// there by merak_rt/expert_rows.h's groupExpertRows (the CPU's stable
// counting sort), the order uploaded, and each expert's rows gathered
// contiguously on the device. F32 runs one cuBLASLt GEMM per expert with
// rows at MERAK_MATMUL_PRECISION (as matmul; bf16 rounds each expert's
// operands into scratch first); F64 one thread per output element,
// accumulating in double. The result rows are scattered back; rows of no
// group (dropped, or another rank's expert) are zero, and so is the weight
// gradient of an expert without rows (unless it accumulates: beta = 1, and
// an expert without rows keeps the accumulator's values).
//
// The routing kernels (expertShadowPlan, expertPlace, expertCapacity,
// expertCompact) are O(S) index work on a few thousand ids: they copy their
// inputs to the host, run the CPU kernel (whose counts feed the trainer's
// metrics: moe_dropped, moe_shadowed, the placement histogram) and copy the
// result back.
//
// moveRows (collectives_util.h) is the all-to-all's pack and unpack.
//
//===----------------------------------------------------------------------===//
#include "collectives_util.h"
#include "merak_rt/cuda/mixed.h"
#include "merak_rt/expert_rows.h"
#include "ops_common.cuh"

#include <string>
#include <vector>

namespace merak::rt::gpu {
using namespace detail;
using cpu::detail::ExpertGroups;

namespace {

/// The scratch slots of this file (matmul owns 0 and 1).
enum : int { kOrderSlot = 4, kRowsSlot = 5, kOutSlot = 6, kBf16Slot = 7 };

void must(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    fatal((std::string(what) + ": " + cudaGetErrorString(e)).c_str());
}

/// n bytes from the device, after the compute stream's work so far.
void toHost(void *dst, const void *src, int64_t bytes, const char *what) {
  if (bytes <= 0)
    return;
  must(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, cs()),
       what);
  must(cudaStreamSynchronize(cs()), what);
}
/// n bytes to the device, in stream order (a pageable source is read before
/// cudaMemcpyAsync returns).
void toDevice(void *dst, const void *src, int64_t bytes, const char *what) {
  if (bytes > 0)
    must(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, cs()),
         what);
}
std::vector<int64_t> i64ToHost(const void *src, int64_t n, const char *what) {
  std::vector<int64_t> h(static_cast<size_t>(n));
  toHost(h.data(), src, n * 8, what);
  return h;
}

template <class T>
__global__ void __launch_bounds__(256)
    moveRowsKernel(const T *src, T *dst, const int64_t *index, int64_t rows, int64_t n,
                   bool scatter) {
  MERAK_GRID_STRIDE(i, rows * n) {
    const int64_t r = i / n, j = i % n, at = index[r] * n + j;
    if (scatter)
      dst[at] = src[i];
    else
      dst[i] = src[at];
  }
}

/// y_p[i, o] = sum_k x_p[i, k] W_{g(i)}[o, k] (W [K, O] with transW) over the
/// packed rows, g(i) the group of packed row i (its matrix at w or ws).
__global__ void __launch_bounds__(256)
    expertRowsF64(const double *xp, const double *w, const double *ws, const int64_t *group,
                  int64_t rows, int64_t K, int64_t O, int64_t E, bool transW, double *yp) {
  MERAK_GRID_STRIDE(i, rows * O) {
    const int64_t r = i / O, o = i % O, g = group[r];
    const double *we = g < E ? w + g * O * K : ws + (g - E) * O * K;
    double acc = 0;
    for (int64_t k = 0; k < K; ++k)
      acc += xp[r * K + k] * (transW ? we[k * O + o] : we[o * K + k]);
    yp[i] = acc;
  }
}

/// dW_e[o, k] (dW_e[k, o] with transW) = sum over e's packed rows of
/// g_p[i, o] x_p[i, k]; zero without rows (accumulate: added to dw, which
/// an expert without rows keeps).
__global__ void __launch_bounds__(256)
    expertGradF64(const double *xp, const double *gp, const int64_t *offset, int64_t E, int64_t K,
                  int64_t O, bool transW, double *dw, bool accumulate) {
  MERAK_GRID_STRIDE(i, E * O * K) {
    const int64_t e = i / (O * K), a = (i / (transW ? O : K)) % (transW ? K : O),
                  b = i % (transW ? O : K);
    const int64_t o = transW ? b : a, k = transW ? a : b;
    double acc = accumulate ? dw[i] : 0;
    for (int64_t r = offset[e]; r < offset[e + 1]; ++r)
      acc += gp[r * O + o] * xp[r * K + k];
    dw[i] = acc;
  }
}

/// The ids of an expert GEMM, grouped on the host; the order (and, for F64,
/// each packed row's group, or the offsets) uploaded into scratch.
struct DeviceGroups {
  ExpertGroups g;
  const int64_t *order = nullptr, *extra = nullptr; // device
};
DeviceGroups groupOnHost(DT ti, const void *experts, const void *first, int64_t S, int64_t E,
                         const char *op, const void *shadowFirst, int64_t M, bool rowGroups,
                         bool offsets) {
  if (ti != DT::I64 && ti != DT::I32)
    fatal((std::string(op) + ": experts must be I64 or I32").c_str());
  // The ids and the scalars in one round trip (a single synchronisation).
  std::vector<char> ids(static_cast<size_t>(S * elemSize(ti)));
  int64_t hFirst = 0, hShadow = 0;
  auto copy = [&](void *dst, const void *src, int64_t bytes) {
    if (bytes > 0)
      must(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, cs()),
           op);
  };
  copy(ids.data(), experts, static_cast<int64_t>(ids.size()));
  if (first)
    copy(&hFirst, first, 8);
  if (shadowFirst && M > 0)
    copy(&hShadow, shadowFirst, 8);
  must(cudaStreamSynchronize(cs()), op);
  DeviceGroups d;
  d.g = cpu::detail::groupExpertRows(ti, ids.data(), first ? &hFirst : nullptr, S, E, op,
                                     shadowFirst && M > 0 ? &hShadow : nullptr, M);
  std::vector<int64_t> up(d.g.order);
  if (rowGroups) // the group of each packed row
    for (size_t e = 0; e + 1 < d.g.offset.size(); ++e)
      for (int64_t r = d.g.offset[e]; r < d.g.offset[e + 1]; ++r)
        up.push_back(static_cast<int64_t>(e));
  if (offsets)
    up.insert(up.end(), d.g.offset.begin(), d.g.offset.end());
  auto *dev = static_cast<int64_t *>(scratch(kOrderSlot, up.size() * 8));
  toDevice(dev, up.data(), static_cast<int64_t>(up.size()) * 8, op);
  d.order = dev;
  d.extra = dev + d.g.order.size();
  return d;
}

/// C = op(A) op(B) for F32 operands at MERAK_MATMUL_PRECISION (bf16 rounds
/// A and B into scratch first; the result stays F32).
void gemmF32(cuda::GemmShape s, const float *A, int64_t aCount, const float *B, int64_t bCount,
             float *C, const char *op, float beta = 0.f) {
  const cuda::GemmPrecision prec = matmulPrecision();
  const void *a = A, *b = B;
  if (prec == cuda::GemmPrecision::BF16) {
    char *a16 = static_cast<char *>(
        scratch(kBf16Slot, static_cast<uint64_t>(alignUp(aCount * 2) + bCount * 2)));
    char *b16 = a16 + alignUp(aCount * 2);
    Status st = cuda::castF32ToBf16(A, a16, aCount, stream());
    if (st.ok())
      st = cuda::castF32ToBf16(B, b16, bCount, stream());
    if (!st.ok())
      fatal((std::string(op) + ": " + st.message()).c_str());
    a = a16;
    b = b16;
  }
  if (Status st = blas().gemm(prec, s, 1.f, a, b, beta, C, stream(), /*cIsF32=*/true); !st.ok())
    fatal((std::string(op) + ": " + st.message()).c_str());
}

} // namespace

void detail::moveRows(const void *src, void *dst, const int64_t *index, int64_t rows,
                      int64_t rowBytes, bool scatter) {
  if (rows <= 0 || rowBytes <= 0)
    return;
  // The widest word that divides the row and both base addresses.
  const uint64_t bits = static_cast<uint64_t>(rowBytes) | reinterpret_cast<uintptr_t>(src) |
                        reinterpret_cast<uintptr_t>(dst);
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = rowBytes / static_cast<int64_t>(sizeof(T));
    moveRowsKernel<T><<<gridFor(rows * n), 256, 0, cs()>>>(
        static_cast<const T *>(src), static_cast<T *>(dst), index, rows, n, scatter);
  };
  if (bits % 16 == 0)
    launch(uint4{});
  else if (bits % 8 == 0)
    launch(uint64_t{});
  else if (bits % 4 == 0)
    launch(uint32_t{});
  else if (bits % 2 == 0)
    launch(uint16_t{});
  else
    launch(uint8_t{});
  checkLaunch("moveRows");
}

void expertMatmul(DT t, const void *x, const void *w, DT ti, const void *experts,
                  const void *first, int64_t S, int64_t K, int64_t O, int64_t E, bool transW,
                  void *y, const void *ws, const void *shadowFirst, int64_t M) {
  static const char *op = "expert_matmul";
  if (t != DT::F32 && t != DT::F64)
    fatal("expert_matmul: F32 or F64 only");
  if (!ws)
    M = 0;
  if (S == 0 || O == 0)
    return; // y holds no element
  const bool f64 = t == DT::F64;
  DeviceGroups d = groupOnHost(ti, experts, first, S, E, op, shadowFirst, M, f64, false);
  const int64_t rows = d.g.rows(), es = elemSize(t);
  if (rows < S || K == 0) // rows of no group (and an empty product) are zero
    must(cudaMemsetAsync(y, 0, static_cast<size_t>(S * O * es), cs()), op);
  if (rows == 0 || K == 0)
    return;
  char *xp = static_cast<char *>(scratch(kRowsSlot, static_cast<uint64_t>(rows * K * es)));
  char *yp = static_cast<char *>(scratch(kOutSlot, static_cast<uint64_t>(rows * O * es)));
  moveRows(x, xp, d.order, rows, K * es, /*scatter=*/false);
  if (f64) {
    expertRowsF64<<<gridFor(rows * O), 256, 0, cs()>>>(
        reinterpret_cast<const double *>(xp), static_cast<const double *>(w),
        static_cast<const double *>(ws), d.extra, rows, K, O, E, transW,
        reinterpret_cast<double *>(yp));
    checkLaunch(op);
  } else {
    const int64_t groups = static_cast<int64_t>(d.g.offset.size()) - 1; // E, + M copies
    for (int64_t e = 0; e < groups; ++e) {
      const int64_t b = d.g.offset[e], n = d.g.offset[e + 1] - b;
      if (n == 0)
        continue;
      // y_e [n, O] = x_e [n, K] W_e^T (W_e [O, K]) or x_e W_e (W_e [K, O]).
      const float *we = static_cast<const float *>(e < E ? w : ws) + (e < E ? e : e - E) * O * K;
      cuda::GemmShape s;
      s.M = n, s.N = O, s.K = K, s.transB = !transW;
      gemmF32(s, reinterpret_cast<const float *>(xp) + b * K, n * K, we, O * K,
              reinterpret_cast<float *>(yp) + b * O, op);
    }
  }
  moveRows(yp, y, d.order, rows, O * es, /*scatter=*/true);
}

void expertMatmulGradWeight(DT t, const void *x, const void *grad, DT ti, const void *experts,
                            const void *first, int64_t S, int64_t K, int64_t O, int64_t E,
                            bool transW, void *dw, bool accumulate) {
  static const char *op = "expert_matmul_grad_weight";
  if (t != DT::F32 && t != DT::F64)
    fatal("expert_matmul_grad_weight: F32 or F64 only");
  if (K == 0 || O == 0 || E == 0)
    return; // dw holds no element
  const bool f64 = t == DT::F64;
  DeviceGroups d = groupOnHost(ti, experts, first, S, E, op, nullptr, 0, false, f64);
  const int64_t rows = d.g.rows(), es = elemSize(t);
  char *xp = static_cast<char *>(scratch(kRowsSlot, static_cast<uint64_t>(rows * K * es)));
  char *gp = static_cast<char *>(scratch(kOutSlot, static_cast<uint64_t>(rows * O * es)));
  moveRows(x, xp, d.order, rows, K * es, /*scatter=*/false);
  moveRows(grad, gp, d.order, rows, O * es, /*scatter=*/false);
  if (f64) {
    expertGradF64<<<gridFor(E * O * K), 256, 0, cs()>>>(
        reinterpret_cast<const double *>(xp), reinterpret_cast<const double *>(gp), d.extra, E, K,
        O, transW, static_cast<double *>(dw), accumulate);
    checkLaunch(op);
    return;
  }
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = d.g.offset[e], n = d.g.offset[e + 1] - b;
    float *out = static_cast<float *>(dw) + e * O * K;
    if (n == 0) { // an accumulator keeps its values
      if (!accumulate)
        must(cudaMemsetAsync(out, 0, static_cast<size_t>(O * K * es), cs()), op);
      continue;
    }
    const float *xe = reinterpret_cast<const float *>(xp) + b * K;
    const float *ge = reinterpret_cast<const float *>(gp) + b * O;
    cuda::GemmShape s;
    s.transA = true;
    if (transW) { // dW_e [K, O] = x_e^T g_e
      s.M = K, s.N = O, s.K = n;
      gemmF32(s, xe, n * K, ge, n * O, out, op, accumulate ? 1.f : 0.f);
    } else { // dW_e [O, K] = g_e^T x_e
      s.M = O, s.N = K, s.K = n;
      gemmF32(s, ge, n * O, xe, n * K, out, op, accumulate ? 1.f : 0.f);
    }
  }
}

// --- routing: the CPU kernels on host copies -----------------------------------

void expertShadowPlan(const void *ids, int64_t parts, int64_t S, int64_t perRank, int64_t M,
                      int64_t minRows, void *routed, void *slots) {
  static const char *op = "expert_shadow_plan";
  std::vector<int64_t> h = i64ToHost(ids, parts * S, op), r(h.size()),
                       sl(static_cast<size_t>(M));
  cpu::expertShadowPlan(h.data(), parts, S, perRank, M, minRows, r.data(), sl.data());
  toDevice(routed, r.data(), parts * S * 8, op);
  toDevice(slots, sl.data(), M * 8, op);
}

void expertPlace(const void *ids, int64_t S, const void *placement, int64_t E, int64_t table,
                 void *placed) {
  static const char *op = "expert_place";
  std::vector<int64_t> h = i64ToHost(ids, S, op), p = i64ToHost(placement, E, op),
                       out(static_cast<size_t>(S));
  cpu::expertPlace(h.data(), S, p.data(), E, table, out.data());
  toDevice(placed, out.data(), S * 8, op);
}

void expertCapacity(const void *ids, DT tp, const void *probs, int64_t S, int64_t E,
                    int64_t capacity, bool byProbs, void *kept) {
  static const char *op = "expert_capacity";
  std::vector<int64_t> h = i64ToHost(ids, S, op), out(static_cast<size_t>(S));
  std::vector<char> p;
  if (byProbs) {
    p.resize(static_cast<size_t>(S * elemSize(tp)));
    toHost(p.data(), probs, static_cast<int64_t>(p.size()), op);
  }
  cpu::expertCapacity(h.data(), tp, byProbs ? p.data() : nullptr, S, E, capacity, byProbs,
                      out.data());
  toDevice(kept, out.data(), S * 8, op);
}

void expertCompact(const void *ids, int64_t N, const void *first, int64_t perRank, int64_t R,
                   void *out) {
  static const char *op = "expert_compact";
  std::vector<int64_t> h = i64ToHost(ids, N, op), f = i64ToHost(first, 1, op),
                       o(static_cast<size_t>(R));
  cpu::expertCompact(h.data(), N, f.data(), perRank, R, o.data());
  toDevice(out, o.data(), R * 8, op);
}

} // namespace merak::rt::gpu
