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
#include "merak_rt/expert_rows.h"
#include "merak_rt/ops.h"

#include "ops_util.h"

#include <cstring>
#include <string>
#include <vector>

namespace merak::rt::cpu::detail {

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
