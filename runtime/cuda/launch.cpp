//===- launch.cpp - Host-side launch planning (no CUDA calls) ----------------===//
#include "merak_rt/cuda/launch.h"

#include <algorithm>
#include <string>

namespace merak::rt::cuda {

int64_t dtypeSize(DType t) { return t == DType::F32 ? 4 : 2; }
int vectorWidth(DType t) { return t == DType::F32 ? 4 : 8; }

bool canVectorize(DType t, int64_t n, const void *p0, const void *p1,
                  const void *p2, const void *p3) {
  if (n % vectorWidth(t) != 0)
    return false;
  for (const void *p : {p0, p1, p2, p3})
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

static std::string dimsStr(const Dims &d) {
  std::string s = "[";
  for (int i = 0; i < d.rank; ++i)
    s += (i ? "," : "") + std::to_string(d.d[i]);
  return s + "]";
}

Result<BroadcastPlan> planBroadcast(const Dims &da, const Dims &db,
                                    const Dims &dout) {
  const int R = dout.rank;
  auto bad = [&] {
    return Result<BroadcastPlan>::error("cuda binary: shapes " + dimsStr(da) +
                                        " and " + dimsStr(db) +
                                        " do not broadcast to " +
                                        dimsStr(dout));
  };
  if (R < 0 || R > kMaxRank || da.rank < 0 || da.rank > R || db.rank < 0 ||
      db.rank > R)
    return bad();
  // Aligned dims and contiguous strides, 0 on broadcast dims.
  int64_t sa[kMaxRank], sb[kMaxRank], dims[kMaxRank];
  int64_t accA = 1, accB = 1;
  for (int i = R - 1; i >= 0; --i) {
    const int64_t o = dout.d[i];
    const int ia = i - (R - da.rank), ib = i - (R - db.rank);
    const int64_t a = ia >= 0 ? da.d[ia] : 1, b = ib >= 0 ? db.d[ib] : 1;
    if ((a != o && a != 1) || (b != o && b != 1) || o < 0)
      return bad();
    dims[i] = o;
    sa[i] = (a == 1 && o != 1) ? 0 : accA;
    sb[i] = (b == 1 && o != 1) ? 0 : accB;
    accA *= a;
    accB *= b;
  }
  BroadcastPlan p;
  p.numel = dout.numel();
  // Drop size-1 dims, then merge neighbours that walk the same way.
  int r = 0;
  for (int i = 0; i < R; ++i) {
    if (dims[i] == 1)
      continue;
    if (r > 0 && p.strideA[r - 1] == sa[i] * dims[i] &&
        p.strideB[r - 1] == sb[i] * dims[i]) {
      p.dims[r - 1] *= dims[i];
      p.strideA[r - 1] = sa[i];
      p.strideB[r - 1] = sb[i];
      continue;
    }
    p.dims[r] = dims[i];
    p.strideA[r] = sa[i];
    p.strideB[r] = sb[i];
    ++r;
  }
  p.rank = r;
  const int64_t na = da.numel(), nb = db.numel();
  if (p.numel == 0 || r == 0 ||
      (r == 1 && p.strideA[0] == 1 && p.strideB[0] == 1)) {
    p.kind = BroadcastKind::Same;
  } else if (na == 1 && nb == p.numel) {
    p.kind = BroadcastKind::ScalarA; // b dense over out
  } else if (nb == 1 && na == p.numel) {
    p.kind = BroadcastKind::ScalarB;
  } else if (r == 2 && p.strideA[0] == p.dims[1] && p.strideA[1] == 1 &&
             p.strideB[0] == 0 && p.strideB[1] == 1) {
    p.kind = BroadcastKind::RowB;
    p.inner = p.dims[1];
  } else if (r == 2 && p.strideB[0] == p.dims[1] && p.strideB[1] == 1 &&
             p.strideA[0] == 0 && p.strideA[1] == 1) {
    p.kind = BroadcastKind::RowA;
    p.inner = p.dims[1];
  } else {
    p.kind = BroadcastKind::General;
  }
  return p;
}

Launch elementwiseLaunch(int64_t items, int smCount) {
  Launch l;
  l.block = 256;
  if (items <= 0)
    return l;
  const int64_t sms = smCount > 0 ? smCount : 132;
  const int64_t blocks = (items + l.block - 1) / l.block;
  l.grid = static_cast<uint32_t>(std::min<int64_t>(blocks, sms * 8));
  return l;
}

RowLaunch rowLaunch(int64_t rows, int64_t cols) {
  RowLaunch l;
  if (rows <= 0)
    return l;
  if (cols <= kWarpRowMax) {
    l.warpPerRow = true;
    l.block = 256;
    l.rowsPerBlock = 8;
    l.grid = static_cast<uint32_t>((rows + 7) / 8);
    return l;
  }
  l.warpPerRow = false;
  l.rowsPerBlock = 1;
  int64_t want = (cols + 7) / 8; // ~8 elements (one bf16 vector) per thread
  uint32_t threads = 128;
  while (threads < 1024 && threads < want)
    threads *= 2;
  l.block = threads;
  l.grid = static_cast<uint32_t>(rows);
  return l;
}

Status validate(const GemmShape &s) {
  if (s.M < 0 || s.N < 0 || s.K < 0 || s.batch < 1)
    return Status::error("cuda gemm: bad shape M=" + std::to_string(s.M) +
                         " N=" + std::to_string(s.N) +
                         " K=" + std::to_string(s.K) +
                         " batch=" + std::to_string(s.batch));
  if (s.batch > 1 && s.strideC == 0)
    return Status::error("cuda gemm: strideC is 0 with batch > 1");
  if (s.strideA < 0 || s.strideB < 0 || s.strideC < 0)
    return Status::error("cuda gemm: negative stride");
  return Status::success();
}

ColMajorGemm toColMajor(const GemmShape &s) {
  ColMajorGemm g;
  g.m = s.N;
  g.n = s.M;
  g.k = s.K;
  g.trans1 = s.transB;
  g.trans2 = s.transA;
  if (!s.transB) {
    g.rows1 = s.N, g.cols1 = s.K, g.ld1 = s.N;
  } else {
    g.rows1 = s.K, g.cols1 = s.N, g.ld1 = s.K;
  }
  if (!s.transA) {
    g.rows2 = s.K, g.cols2 = s.M, g.ld2 = s.K;
  } else {
    g.rows2 = s.M, g.cols2 = s.K, g.ld2 = s.M;
  }
  g.ldc = s.N;
  g.ld1 = std::max<int64_t>(g.ld1, 1);
  g.ld2 = std::max<int64_t>(g.ld2, 1);
  g.ldc = std::max<int64_t>(g.ldc, 1);
  return g;
}

} // namespace merak::rt::cuda
