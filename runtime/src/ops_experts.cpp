//===- ops_experts.cpp - the expert GEMMs of Mixture-of-Experts layers -----===//
//
// See merak_rt/kernels.def; semantics of lib/Evaluator/EvalNN.cpp.
//
// expertMatmul and expertMatmulGradWeight group the rows by expert with a
// stable counting sort (so the rows of one expert keep their order and the
// result does not depend on the thread count), pack each expert's rows
// contiguously, and run one GEMM per expert that has rows (F32 through
// kernels.h's gemm, F64 through dgemmBlocked): a grouped GEMM. The weight
// gradient of an expert no row chose is zero. An expert index outside
// [0, E) stops the program naming the op and the row; with a `first`
// expert (expert parallelism) such a row belongs to another rank and is
// skipped (a zero result row).
//
//===----------------------------------------------------------------------===//
#include "merak_rt/expert_rows.h"
#include "merak_rt/kernels.h"
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace merak::rt::cpu {
using namespace detail;
using detail::ExpertGroups;

ExpertGroups detail::groupExpertRows(DT ti, const void *experts, const int64_t *first,
                                     int64_t S, int64_t E, const char *op,
                                     const int64_t *shadowFirst, int64_t M) {
  ExpertGroups g;
  const int64_t shift = first ? *first : 0;
  const int64_t copies = shadowFirst ? *shadowFirst : 0;
  const int64_t own = E;
  auto idAt = [&, ti](int64_t s) {
    return ti == DT::I32 ? static_cast<int64_t>(static_cast<const int32_t *>(experts)[s])
                         : static_cast<const int64_t *>(experts)[s];
  };
  auto expertOf = [&](int64_t s) {
    const int64_t id = idAt(s);
    if (M > 0 && id >= copies && id < copies + M)
      return own + id - copies;
    const int64_t e = id - shift;
    return M > 0 && e >= own ? int64_t(-1) : e; // another rank's, not a copy's group
  };
  E += M;
  g.offset.assign(static_cast<size_t>(E) + 1, 0);
  if (ti != DT::I32 && ti != DT::I64)
    fatal((std::string(op) + ": experts must be I64 or I32").c_str());
  for (int64_t s = 0; s < S; ++s) {
    if (idAt(s) == -1)
      continue; // dropped (merak.expert_capacity): a zero row
    int64_t e = expertOf(s);
    if (first && (e < 0 || e >= E))
      continue; // another rank's expert
    if (e < 0 || e >= E) {
      std::string what = std::string(op) + ": expert index " + std::to_string(e) +
                         " of row " + std::to_string(s) + " out of range [0, " +
                         std::to_string(E) + ")";
      fatal(what.c_str());
    }
    ++g.offset[static_cast<size_t>(e) + 1];
  }
  for (int64_t e = 0; e < E; ++e)
    g.offset[e + 1] += g.offset[e];
  g.order.resize(static_cast<size_t>(g.offset[E]));
  std::vector<int64_t> next(g.offset.begin(), g.offset.end() - 1);
  for (int64_t s = 0; s < S; ++s)
    if (int64_t e = expertOf(s); idAt(s) != -1 && e >= 0 && e < E)
      g.order[next[e]++] = s;
  return g;
}

namespace {

/// C = op(A) op(B) (+ C when accumulate).
inline void gemmT(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                  float *C, bool accumulate = false) {
  gemm(ta, tb, M, N, K, 1.0f, A, B, accumulate ? 1.0f : 0.0f, C);
}
inline void gemmT(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double *A,
                  const double *B, double *C, bool accumulate = false) {
  dgemmBlocked(ta, tb, M, N, K, 1.0, A, B, accumulate ? 1.0 : 0.0, C);
}

/// dst[i] = src[order[i]] (rows of n elements), or the reverse (scatter).
template <class T>
void permuteRows(const T *src, T *dst, const std::vector<int64_t> &order, int64_t n,
                 bool scatter) {
  const int64_t rows = static_cast<int64_t>(order.size());
  parallelFor(rows, n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t s = order[i];
      if (scatter)
        std::memcpy(dst + s * n, src + i * n, sizeof(T) * n);
      else
        std::memcpy(dst + i * n, src + s * n, sizeof(T) * n);
    }
  });
}

template <class T>
void expertMatmulT(const T *x, const T *w, const T *ws, const ExpertGroups &g, int64_t S, int64_t K,
                   int64_t O, int64_t E, bool transW, T *y) {
  if (g.rows() < S) // rows of other ranks' experts stay zero
    std::fill(y, y + S * O, T(0));
  S = g.rows();
  T *xp = scratch<T, 60>(static_cast<size_t>(S * K));
  T *yp = scratch<T, 61>(static_cast<size_t>(S * O));
  permuteRows(x, xp, g.order, K, /*scatter=*/false);
  const int64_t groups = static_cast<int64_t>(g.offset.size()) - 1; // E, + M copies
  for (int64_t e = 0; e < groups; ++e) {
    const int64_t b = g.offset[e], n = g.offset[e + 1] - b;
    if (n == 0)
      continue;
    // y_e [n, O] = x_e [n, K] W_e^T (W_e [O, K]) or x_e W_e (W_e [K, O]).
    const T *we = e < E ? w + e * O * K : ws + (e - E) * O * K;
    gemmT(false, !transW, n, O, K, xp + b * K, we, yp + b * O);
  }
  permuteRows(yp, y, g.order, O, /*scatter=*/true);
}

template <class T>
void expertGradWeightT(const T *x, const T *gr, const ExpertGroups &g, int64_t K, int64_t O,
                       int64_t E, bool transW, T *dw, bool accumulate) {
  const int64_t S = g.rows();
  T *xp = scratch<T, 60>(static_cast<size_t>(S * K));
  T *gp = scratch<T, 61>(static_cast<size_t>(S * O));
  permuteRows(x, xp, g.order, K, /*scatter=*/false);
  permuteRows(gr, gp, g.order, O, /*scatter=*/false);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = g.offset[e], n = g.offset[e + 1] - b;
    T *out = dw + e * O * K;
    if (n == 0) { // an accumulator keeps its values
      if (!accumulate)
        std::fill(out, out + O * K, T(0));
      continue;
    }
    if (transW) // dW_e [K, O] = x_e^T g_e
      gemmT(true, false, K, O, n, xp + b * K, gp + b * O, out, accumulate);
    else // dW_e [O, K] = g_e^T x_e
      gemmT(true, false, O, K, n, gp + b * O, xp + b * K, out, accumulate);
  }
}

} // namespace

void expertMatmul(DT t, const void *x, const void *w, DT ti, const void *experts,
                  const void *first, int64_t S, int64_t K, int64_t O, int64_t E, bool transW,
                  void *y, const void *ws, const void *shadowFirst, int64_t M) {
  if (!ws)
    M = 0;
  ExpertGroups g = groupExpertRows(ti, experts, static_cast<const int64_t *>(first), S, E,
                                   "expert_matmul", static_cast<const int64_t *>(shadowFirst), M);
  if (t == DT::F32)
    expertMatmulT(static_cast<const float *>(x), static_cast<const float *>(w),
                  static_cast<const float *>(ws), g, S, K, O, E, transW, static_cast<float *>(y));
  else if (t == DT::F64)
    expertMatmulT(static_cast<const double *>(x), static_cast<const double *>(w),
                  static_cast<const double *>(ws), g, S, K, O, E, transW,
                  static_cast<double *>(y));
  else
    fatal("expert_matmul: F32 or F64 only");
}

void expertMatmulGradWeight(DT t, const void *x, const void *grad, DT ti, const void *experts,
                            const void *first, int64_t S, int64_t K, int64_t O, int64_t E,
                            bool transW, void *dw, bool accumulate) {
  ExpertGroups g = groupExpertRows(ti, experts, static_cast<const int64_t *>(first), S, E,
                                   "expert_matmul_grad_weight");
  if (t == DT::F32)
    expertGradWeightT(static_cast<const float *>(x), static_cast<const float *>(grad), g, K, O, E,
                      transW, static_cast<float *>(dw), accumulate);
  else if (t == DT::F64)
    expertGradWeightT(static_cast<const double *>(x), static_cast<const double *>(grad), g, K, O, E,
                      transW, static_cast<double *>(dw), accumulate);
  else
    fatal("expert_matmul_grad_weight: F32 or F64 only");
}

namespace {
ExpertShadowCounts gShadowCounts; // the step's plans run on one thread
ExpertDropCounts gDropCounts;
std::vector<int64_t> gRowHistogram;
std::vector<std::vector<int64_t>> gPlaceRows; // [table][logical expert]
bool gPlaced = false; // a merak.expert_place has counted the histogram
bool gCounting = true; // setExpertCounting
} // namespace

void setExpertCounting(bool on) { gCounting = on; }

const std::vector<int64_t> &expertRowHistogram() { return gRowHistogram; }

std::vector<std::vector<int64_t>> takeExpertPlaceRows() {
  std::vector<std::vector<int64_t>> rows;
  rows.swap(gPlaceRows);
  return rows;
}

void expertPlace(const void *idsData, int64_t S, const void *placementData, int64_t E,
                 int64_t table, void *placedData) {
  const int64_t *ids = static_cast<const int64_t *>(idsData);
  const int64_t *placement = static_cast<const int64_t *>(placementData);
  int64_t *placed = static_cast<int64_t *>(placedData);
  if (table < 0)
    fatal("expert_place: negative table");
  if (static_cast<int64_t>(gPlaceRows.size()) <= table)
    gPlaceRows.resize(static_cast<size_t>(table) + 1);
  std::vector<int64_t> &rows = gPlaceRows[table];
  rows.resize(static_cast<size_t>(E), 0);
  for (int64_t s = 0; s < S; ++s) {
    const int64_t e = ids[s];
    if (e == -1) { // dropped by merak.expert_capacity
      placed[s] = -1;
      continue;
    }
    if (e < 0 || e >= E)
      fatal(("expert_place: expert id " + std::to_string(e) + " of row " + std::to_string(s) +
             " out of range [0, " + std::to_string(E) + ")")
                .c_str());
    placed[s] = placement[e];
    rows[e] += gCounting;
  }
  if (gCounting)
    recordExpertRows(ids, S, E, /*placed=*/true);
}

void recordExpertRows(const int64_t *ids, int64_t rows, int64_t experts, bool placed) {
  if (placed)
    gPlaced = true;
  else if (gPlaced)
    return; // merak.expert_place counted the logical ids
  if (static_cast<int64_t>(gRowHistogram.size()) < experts)
    gRowHistogram.resize(static_cast<size_t>(experts), 0);
  for (int64_t r = 0; r < rows; ++r)
    if (ids[r] >= 0 && ids[r] < experts)
      ++gRowHistogram[ids[r]];
}

ExpertShadowCounts takeExpertShadowCounts() {
  ExpertShadowCounts c = gShadowCounts;
  gShadowCounts = {};
  return c;
}

void expertShadowPlan(const void *idsData, int64_t parts, int64_t S, int64_t perRank, int64_t M,
                      int64_t minRows, void *routedData, void *slotsData) {
  const int64_t *ids = static_cast<const int64_t *>(idsData);
  int64_t *routed = static_cast<int64_t *>(routedData), *slots = static_cast<int64_t *>(slotsData);
  const int64_t E = parts * perRank;
  // rows[i * E + e]: rank i's rows of expert e; total[e] over the group.
  std::vector<int64_t> rows(static_cast<size_t>(parts * E), 0), total(static_cast<size_t>(E), 0);
  for (int64_t i = 0; i < parts; ++i)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t e = ids[i * S + s];
      if (e == -1)
        continue; // dropped by merak.expert_capacity
      if (e < 0 || e >= E)
        fatal(("expert_shadow_plan: expert id " + std::to_string(e) + " of row " +
               std::to_string(s) + " of group rank " + std::to_string(i) + " out of range [0, " +
               std::to_string(E) + ")")
                  .c_str());
      ++rows[i * E + e];
      ++total[e];
    }
  // Each rank's rows to compute: its experts' rows from every rank.
  std::vector<int64_t> load(static_cast<size_t>(parts), 0);
  for (int64_t e = 0; e < E; ++e)
    load[e / perRank] += total[e];
  std::vector<char> shadowed(static_cast<size_t>(E), 0);
  std::vector<int64_t> hot;
  // Greedy: the busiest rank's busiest expert, while it lowers the busiest
  // rank's rows and its remote rows outweigh its weights.
  while (static_cast<int64_t>(hot.size()) < M) {
    const int64_t busy = std::max_element(load.begin(), load.end()) - load.begin();
    int64_t pick = -1;
    for (int64_t e = busy * perRank; e < (busy + 1) * perRank; ++e)
      if (!shadowed[e] && (pick < 0 || total[e] > total[pick]))
        pick = e;
    if (pick < 0 || total[pick] - rows[busy * E + pick] < minRows)
      break;
    std::vector<int64_t> after(load);
    after[busy] -= total[pick] - rows[busy * E + pick];
    for (int64_t i = 0; i < parts; ++i)
      if (i != busy)
        after[i] += rows[i * E + pick];
    if (*std::max_element(after.begin(), after.end()) >= load[busy])
      break;
    load.swap(after);
    shadowed[pick] = 1;
    hot.push_back(pick);
  }
  std::sort(hot.begin(), hot.end());
  std::vector<int64_t> slotOf(static_cast<size_t>(E), -1);
  for (int64_t j = 0; j < M; ++j) {
    slots[j] = j < static_cast<int64_t>(hot.size()) ? hot[j] : -1;
    if (slots[j] >= 0)
      slotOf[slots[j]] = j;
  }
  for (int64_t i = 0; i < parts; ++i)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t e = ids[i * S + s];
      routed[i * S + s] = e < 0 || slotOf[e] < 0 ? e : E + i * M + slotOf[e];
    }
  if (!gCounting)
    return;
  ++gShadowCounts.plans;
  gShadowCounts.shadowed += static_cast<int64_t>(hot.size());
  recordExpertRows(ids, parts * S, E);
}

ExpertDropCounts takeExpertDropCounts() {
  return std::exchange(gDropCounts, ExpertDropCounts{});
}

void expertCapacity(const void *idsData, DT tp, const void *probs, int64_t S, int64_t E,
                    int64_t capacity, bool byProbs, void *keptData) {
  const int64_t *ids = static_cast<const int64_t *>(idsData);
  int64_t *kept = static_cast<int64_t *>(keptData);
  if (E < 1 || capacity < 1)
    fatal("expert_capacity: experts and capacity must be at least 1");
  // The rows of each expert in row order (a counting sort).
  std::vector<int64_t> offset(static_cast<size_t>(E) + 1, 0), order(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    if (ids[s] < 0 || ids[s] >= E)
      fatal(("expert_capacity: expert id " + std::to_string(ids[s]) + " of row " +
             std::to_string(s) + " out of range [0, " + std::to_string(E) + ")")
                .c_str());
    ++offset[ids[s] + 1];
  }
  for (int64_t e = 0; e < E; ++e)
    offset[e + 1] += offset[e];
  std::vector<int64_t> next(offset.begin(), offset.end() - 1);
  for (int64_t s = 0; s < S; ++s)
    order[next[ids[s]]++] = s;
  // The probabilities as doubles, once (the sort compares them often).
  std::vector<double> prob(byProbs ? static_cast<size_t>(S) : 0);
  for (int64_t s = 0; s < static_cast<int64_t>(prob.size()); ++s)
    switch (tp) {
    case DT::F32: prob[s] = static_cast<const float *>(probs)[s]; break;
    case DT::F64: prob[s] = static_cast<const double *>(probs)[s]; break;
    case DT::BF16: prob[s] = bf16ToFloat(static_cast<const uint16_t *>(probs)[s]); break;
    default: fatal("expert_capacity: probs must be F32, F64 or BF16");
    }
  std::fill(kept, kept + S, int64_t(-1));
  if (gCounting)
    gDropCounts.rows += S;
  for (int64_t e = 0; e < E; ++e) {
    auto b = order.begin() + offset[e], end = order.begin() + offset[e + 1];
    const int64_t n = end - b;
    if (n > capacity) {
      gDropCounts.dropped += gCounting ? n - capacity : 0;
      if (byProbs) // the highest probs first, then the lower row
        std::stable_sort(b, end, [&](int64_t x, int64_t y) { return prob[x] > prob[y]; });
      end = b + capacity;
    }
    for (auto it = b; it != end; ++it)
      kept[*it] = e;
  }
}

void expertCompact(const void *idsData, int64_t N, const void *firstData, int64_t perRank,
                   int64_t R, void *outData) {
  const int64_t *ids = static_cast<const int64_t *>(idsData);
  const int64_t first = *static_cast<const int64_t *>(firstData);
  int64_t *out = static_cast<int64_t *>(outData);
  std::fill(out, out + R, int64_t(-1));
  int64_t c = 0;
  for (int64_t s = 0; s < N; ++s)
    if (ids[s] >= first && ids[s] < first + perRank) {
      if (c == R)
        fatal(("expert_compact: more than the " + std::to_string(R) +
               " compact rows of an expert capacity are this rank's")
                  .c_str());
      out[c++] = ids[s];
    }
}

} // namespace merak::rt::cpu
