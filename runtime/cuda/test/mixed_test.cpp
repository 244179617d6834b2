//===- mixed_test.cpp - fp32 <-> bf16 segment casts vs host rounding -------===//
#include "merak_rt/cuda/mixed.h"
#include "train_test.h"

#include <cmath>
#include <limits>
#include <string>

namespace merak::rt::cuda::test {

void testMixed() {
  // 70 segments (two launches of at most 64), sizes from 0 to past one
  // block's chunk, some starting off the 16-byte grid (scalar path).
  const int kSegs = 70;
  std::vector<int64_t> sizes, offs;
  int64_t total = 0;
  for (int i = 0; i < kSegs; ++i) {
    const int64_t n = i == 5 ? 0 : (i * 977 + 13) % 20000 + (i % 3 == 0 ? 8 : 1);
    const int64_t off = i % 4 == 1 ? 1 : 0; // element offset: misaligned
    sizes.push_back(n);
    offs.push_back(total + off);
    total += n + off + 16; // keep the next segment 16-element aligned
    total = (total + 15) / 16 * 16;
  }
  std::vector<float> master = randn(size_t(total), 3.f);
  master[offs[1]] = std::numeric_limits<float>::quiet_NaN();
  master[offs[2]] = std::numeric_limits<float>::infinity();
  master[offs[3]] = 1.f + 1.f / 256.f; // a tie: rounds to even (1.0)
  Buf src(total * 4), dst(total * 2), acc(total * 4);
  putTyped(src.p, master, DType::F32);
  must(memsetDevice(dst.p, 0, total * 2), "memset");
  std::vector<CastSegment> segs;
  for (int i = 0; i < kSegs; ++i)
    segs.push_back({static_cast<float *>(src.p) + offs[i],
                    static_cast<uint16_t *>(dst.p) + offs[i], sizes[i]});
  must(castSegments(DType::F32, DType::BF16, segs.data(), kSegs, false,
                    nullptr),
       "castSegments");
  std::vector<uint16_t> got(total);
  must(copyToHost(got.data(), dst.p, total * 2), "copyToHost");
  int64_t bad = 0, checked = 0;
  std::vector<char> covered(total, 0);
  for (int i = 0; i < kSegs; ++i)
    for (int64_t j = 0; j < sizes[i]; ++j) {
      const int64_t e = offs[i] + j;
      covered[e] = 1;
      const uint16_t want = floatToBf16(master[e]);
      const bool nan = std::isnan(master[e]);
      bad += nan ? !std::isnan(bf16ToFloat(got[e])) : got[e] != want;
      ++checked;
    }
  for (int64_t e = 0; e < total; ++e)
    bad += !covered[e] && got[e] != 0; // nothing outside the segments
  expect(bad == 0, "cast fp32->bf16, " + std::to_string(kSegs) +
                       " segments, " + std::to_string(checked) +
                       " elements bitwise as host rounding (" +
                       std::to_string(bad) + " mismatches)");

  // bf16 gradients accumulated into fp32: acc = acc0 + g, then overwrite.
  std::vector<float> g = roundTo(randn(size_t(total), 1.f), DType::BF16);
  std::vector<float> acc0 = randn(size_t(total), 1.f);
  Buf gb(total * 2);
  putTyped(gb.p, g, DType::BF16);
  putTyped(acc.p, acc0, DType::F32);
  std::vector<CastSegment> gsegs;
  for (int i = 0; i < kSegs; ++i)
    gsegs.push_back({static_cast<uint16_t *>(gb.p) + offs[i],
                     static_cast<float *>(acc.p) + offs[i], sizes[i]});
  must(castSegments(DType::BF16, DType::F32, gsegs.data(), kSegs, true,
                    nullptr),
       "castSegments accumulate");
  std::vector<float> a1 = getTyped(acc.p, total, DType::F32);
  bad = 0;
  for (int64_t e = 0; e < total; ++e) {
    const float want = covered[e] ? acc0[e] + g[e] : acc0[e];
    bad += a1[e] != want;
  }
  expect(bad == 0, "accumulate bf16->fp32 over segments, exact (" +
                       std::to_string(bad) + " mismatches)");

  // Flat forms.
  const int64_t n = 100003;
  must(accumulateBf16ToF32(gb.p, acc.f32(), n, true, nullptr), "overwrite");
  std::vector<float> a2 = getTyped(acc.p, n, DType::F32);
  bad = 0;
  for (int64_t e = 0; e < n; ++e)
    bad += a2[e] != g[e];
  expect(bad == 0, "accumulateBf16ToF32 overwrite, exact");
  must(castF32ToBf16(static_cast<const float *>(src.p), dst.p, n, nullptr),
       "castF32ToBf16");
  must(copyToHost(got.data(), dst.p, n * 2), "copyToHost");
  bad = 0;
  for (int64_t e = 0; e < n; ++e)
    bad += std::isnan(master[e]) ? !std::isnan(bf16ToFloat(got[e]))
                                 : got[e] != floatToBf16(master[e]);
  expect(bad == 0, "castF32ToBf16 flat, bitwise");
  const Status s =
      castSegments(DType::F32, DType::BF16, segs.data(), 1, true, nullptr);
  expect(!s.ok(), "accumulating into bf16 is rejected: " + s.message());
}

} // namespace merak::rt::cuda::test
