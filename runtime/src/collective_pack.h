//===- collective_pack.h - Element types of the CPU collectives -*- C++ -*-===//
//
// Internal to the CPU runtime (collectives.cpp, collectives_async.cpp): which
// tensor element types a collective moves (f32, f64, and bf16 for gradients
// reduced in bfloat16), their MPI communication type, and the unpacking of a
// reduced buffer with a mean's division by the group size.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_COLLECTIVE_PACK_H
#define MERAK_RT_COLLECTIVE_PACK_H

#include "merak_rt/comm.h"
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <cstring>
#include <string>
#include <vector>

namespace merak::rt::cpu::detail {

/// merak.all_to_all's flat exchange as this rank (`me` of `size`) sees it:
/// the rows it sends to and receives from each group rank, which of its
/// input rows it packs (in message order: peers in rank order, rows in
/// increasing s) and where each received row goes in its output. ids
/// [size * S] route every group rank's rows (see kernels.def
/// expertAllToAll; a bad id is fatal). With `compact` rows (> 0) this
/// rank's side (a dispatch's output, a combine's input) holds its rows in
/// order instead of at i * S + s; more than `compact` of them is fatal.
struct RowExchange {
  std::vector<int64_t> sendCounts, recvCounts; ///< rows, per group rank
  std::vector<int64_t> sendRows, recvRows;     ///< input / output row indices
};
RowExchange planRowExchange(const int64_t *ids, int size, int me, int64_t S, int64_t perRank,
                            int64_t shadowSlots, bool combine, int64_t compact = 0);
/// The place of group rank i's row s on its expert's rank: i * S + s, or
/// with compact rows its index among that rank's rows (`counted` counts
/// them, in the group's order; fatal beyond `compact`).
int64_t expertRowPlace(int64_t i, int64_t S, int64_t s, int64_t compact, int64_t &counted);
/// The group rank holding group rank i's row s (its expert's, or i itself
/// for a shadow copy).
int64_t rowOwner(const int64_t *ids, int64_t S, int64_t perRank, int size, int64_t shadowSlots,
                 int64_t i, int64_t s);
/// send = the input rows x.sendRows, in order.
inline void packRows(const RowExchange &x, const void *in, char *send, int64_t rowBytes) {
  const char *src = static_cast<const char *>(in);
  for (size_t i = 0; i < x.sendRows.size(); ++i)
    std::memcpy(send + i * rowBytes, src + x.sendRows[i] * rowBytes, rowBytes);
}
/// out (outRows rows; zero where nothing arrives) = the received rows at
/// x.recvRows.
inline void unpackRows(const RowExchange &x, const char *recv, void *out, int64_t rowBytes,
                       int64_t outRows) {
  char *dst = static_cast<char *>(out);
  if (static_cast<int64_t>(x.recvRows.size()) < outRows)
    std::memset(dst, 0, static_cast<size_t>(outRows * rowBytes));
  for (size_t i = 0; i < x.recvRows.size(); ++i)
    std::memcpy(dst + x.recvRows[i] * rowBytes, recv + i * rowBytes, rowBytes);
}

/// Fatal unless `t` is an element type collectives move (`what` names the
/// collective for the message).
inline void checkCollectiveType(DT t, const char *what) {
  if (t != DT::F32 && t != DT::F64 && t != DT::BF16)
    fatal((std::string(what) + " supports f32, f64 and bf16 only").c_str());
}

inline CommType commTypeOf(DT t) {
  return t == DT::F32    ? CommType::F32
         : t == DT::BF16 ? CommType::BF16
         : t == DT::I64  ? CommType::I64
                         : CommType::F64;
}

/// dst = src (n elements of t), divided by `size` when `mean`. A bf16 mean
/// is computed in float and rounded once (exact for power-of-two groups).
inline void unpackReduced(DT t, const void *src, void *dst, int64_t n, bool mean, int size) {
  if (!mean || size == 1) {
    if (src != dst)
      std::memmove(dst, src, n * elemSize(t));
    return;
  }
  if (t == DT::F32) {
    const float s = 1.0f / size, *x = static_cast<const float *>(src);
    float *y = static_cast<float *>(dst);
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] * s;
  } else if (t == DT::BF16) {
    const float s = 1.0f / size;
    const uint16_t *x = static_cast<const uint16_t *>(src);
    uint16_t *y = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      y[i] = floatToBf16(bf16ToFloat(x[i]) * s);
  } else {
    const double s = 1.0 / size, *x = static_cast<const double *>(src);
    double *y = static_cast<double *>(dst);
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] * s;
  }
}

} // namespace merak::rt::cpu::detail

#endif // MERAK_RT_COLLECTIVE_PACK_H
