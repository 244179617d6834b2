//===- dropout_mask.h - merak.dropout's counter-based mask ------*- C++ -*-===//
//
// The keep decision of merak.dropout, shared by the CPU kernel
// (runtime/src/ops_reduce.cpp), the CUDA kernel (runtime/cuda/
// ops_elementwise.cu) and, bit for bit, the evaluator (lib/Evaluator/
// EvalNN.cpp): element i of the whole tensor is kept at training step s when
//
//     uniform(streamKey(seed, s), i) >= ratio
//
// with uniform the splitmix64 finaliser of (key, i) as a double in [0, 1).
// A split program computes each local element's index i in the whole tensor
// from the op's recorded splits (batch_split, tp_split) and this rank's parts
// (MaskLayout), so every parallel configuration draws the serial masks.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_DROPOUT_MASK_H
#define MERAK_RT_DROPOUT_MASK_H

#include <cstdint>

#if defined(__CUDACC__)
#define MERAK_RT_HOST_DEVICE __host__ __device__
#else
#define MERAK_RT_HOST_DEVICE
#endif

namespace merak::rt::dropout {

/// splitmix64's finaliser.
MERAK_RT_HOST_DEVICE inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The uniform in [0, 1) of element `index` under `key`.
MERAK_RT_HOST_DEVICE inline double uniform(uint64_t key, uint64_t index) {
  uint64_t z = mix(key * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull);
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

/// uniform(key, i) >= ratio as integers: the 53 bits of uniform() are at
/// least threshold(ratio) = ceil(ratio * 2^53) (exact: the bits times 2^-53
/// is the double uniform() returns). Loops of these vectorise.
MERAK_RT_HOST_DEVICE inline uint64_t threshold(double ratio) {
  const double t = ratio * 0x1.0p53;
  const uint64_t floor = static_cast<uint64_t>(t);
  return floor + (static_cast<double>(floor) < t ? 1 : 0);
}
/// Whether element `index` is kept under `key` (keyed by `base` =
/// bitsBase(key)) and `threshold`.
MERAK_RT_HOST_DEVICE inline uint64_t bitsBase(uint64_t key) {
  return key * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}
MERAK_RT_HOST_DEVICE inline bool kept(uint64_t base, uint64_t index, uint64_t threshold) {
  return (mix(base + index) >> 11) >= threshold;
}

/// The key of an op's stream (its seed) at training step `step`: each step
/// a statistically independent mask.
MERAK_RT_HOST_DEVICE inline uint64_t streamKey(int64_t seed, int64_t step) {
  return mix(static_cast<uint64_t>(seed) ^ mix(static_cast<uint64_t>(step) + 0xD1B54A32D192ED03ull));
}

/// Where a rank's local elements lie in the whole tensor: the local shape
/// with its split dimensions, runs of unsplit dimensions merged (at most
/// 2 splits, so 5 dimensions). A split local dimension of size L = blocks *
/// chunk holds, of each block, part `part` of `parts`; local coordinate c
/// lies at (c / chunk) * parts * chunk + part * chunk + c % chunk. Two
/// splits of one dimension apply in order (the tensor-parallel split of the
/// batch-local tensor first).
struct MaskLayout {
  static constexpr int kMaxDims = 5;
  int32_t rank = 0;
  int64_t size[kMaxDims] = {};   ///< local sizes, outermost first
  int64_t stride[kMaxDims] = {}; ///< strides in the whole tensor
  int32_t splits[kMaxDims] = {}; ///< splits of each dimension (0..2)
  int64_t chunk[kMaxDims][2] = {}, parts[kMaxDims][2] = {}, part[kMaxDims][2] = {};

  /// Whether local index k is its own index in the whole tensor.
  MERAK_RT_HOST_DEVICE bool identity() const { return rank <= 1 && splits[0] == 0; }

  /// Consecutive local elements, from a multiple of it, whose indices in
  /// the whole tensor are consecutive too (the innermost dimension has
  /// stride 1 in the whole tensor; a split one is contiguous per chunk).
  MERAK_RT_HOST_DEVICE int64_t runLength() const {
    if (rank == 0)
      return 1;
    const int32_t d = rank - 1;
    int64_t run = size[d];
    for (int32_t j = 0; j < splits[d]; ++j) {
      int64_t a = run, b = chunk[d][j];
      while (b) { // gcd: both splits' chunks start at multiples of it
        int64_t t = a % b;
        a = b, b = t;
      }
      run = a;
    }
    return run;
  }

  /// The index in the whole tensor of local (row-major) element k.
  MERAK_RT_HOST_DEVICE uint64_t globalIndex(int64_t k) const {
    uint64_t g = 0;
    for (int32_t d = rank - 1; d >= 0; --d) {
      int64_t c = k % size[d];
      k /= size[d];
      for (int32_t j = 0; j < splits[d]; ++j)
        c = (c / chunk[d][j]) * parts[d][j] * chunk[d][j] + part[d][j] * chunk[d][j] +
            c % chunk[d][j];
      g += static_cast<uint64_t>(c) * static_cast<uint64_t>(stride[d]);
    }
    return g;
  }
};

/// One recorded split of an op: dimension `dim` of the local shape holds
/// part `part` of `parts` of each of `blocks` blocks. dim < 0: none.
struct Split {
  int64_t dim = -1, blocks = 1, parts = 1, part = 0;
};

/// The layout of a local tensor of `rank` dimensions `dims` under `first`
/// then `second` (returns false when a split does not fit the shape).
inline bool makeLayout(int32_t rank, const int64_t *dims, Split first, Split second,
                       MaskLayout &out) {
  out = MaskLayout();
  const Split splits[2] = {first, second};
  // Whole sizes of every dimension, splitting dimension by dimension.
  int64_t whole[16] = {}, chunk[16][2] = {};
  int32_t count[16] = {};
  if (rank > 16)
    return false;
  for (int32_t d = 0; d < rank; ++d)
    whole[d] = dims[d];
  for (const Split &s : splits) {
    if (s.dim < 0)
      continue;
    if (s.dim >= rank || s.blocks < 1 || s.parts < 1 || s.part < 0 || s.part >= s.parts ||
        whole[s.dim] % s.blocks)
      return false;
    chunk[s.dim][count[s.dim]++] = whole[s.dim] / s.blocks;
    whole[s.dim] *= s.parts;
  }
  // Merge runs of unsplit dimensions: [run, split, run, split, run].
  int64_t stride = 1;
  int32_t r = 0;
  int64_t runSize = 1, runStride = 1;
  int64_t size[16], strideOf[16];
  int32_t dimOf[16];
  for (int32_t d = rank - 1; d >= 0; --d) {
    if (count[d] == 0) {
      if (runSize == 1)
        runStride = stride;
      runSize *= dims[d];
    } else {
      if (runSize > 1)
        size[r] = runSize, strideOf[r] = runStride, dimOf[r++] = -1;
      runSize = 1;
      size[r] = dims[d], strideOf[r] = stride, dimOf[r++] = d;
    }
    stride *= whole[d];
  }
  if (runSize > 1 || r == 0)
    size[r] = runSize, strideOf[r] = runStride, dimOf[r++] = -1;
  if (r > MaskLayout::kMaxDims)
    return false;
  out.rank = r;
  for (int32_t i = 0; i < r; ++i) { // innermost first above: reverse
    int32_t o = r - 1 - i, d = dimOf[i];
    out.size[o] = size[i];
    out.stride[o] = strideOf[i];
    if (d < 0)
      continue;
    int32_t j = 0;
    for (const Split &s : splits)
      if (s.dim == d) {
        out.chunk[o][j] = chunk[d][j];
        out.parts[o][j] = s.parts;
        out.part[o][j] = s.part;
        ++j;
      }
    out.splits[o] = j;
  }
  return true;
}

} // namespace merak::rt::dropout

#endif // MERAK_RT_DROPOUT_MASK_H
