//===- OnnxOpsSignal.cpp - DFT, STFT, window functions, mel filters -------===//
//
// ONNX's signal ops, built from merak ops so that a model that mixes tokens
// with a Fourier transform (FNet's `fft2(x).real`) or feeds a spectrogram
// trains through them:
//
//   DFT-17/20 of x [.., n along axis, .., c] (c = 1: real, 2: complex) of
//   length N (dft_length; the signal truncated or zero-padded to it), with
//   s = -1 forward and +1 inverse and theta[j, k] = 2 pi j k / N:
//     Y = X e^(i s theta)  =>  Yr = Xr C - s Xi S,  Yi = s Xr S + Xi C
//   C = cos theta and S = sin theta constants [n', M] (M = N, or N/2 + 1
//   one-sided), one matmul each after moving the axis last; the inverse
//   divides by N. The one-sided inverse (irfft) weighs each bin by its
//   Hermitian twin (2, but 1 for bin 0 and for bin N/2 when N is even) and
//   returns the real part only.
//   STFT-17: frames (a gather of constant indices), times the window, then
//   the DFT of each frame along its last axis.
//   HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix: constants
//   of their (constant) sizes, as onnx's reference computes them.
//
// The gradients are those of matmuls by constants, gathers and products.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// `v` with dimension `axis` moved last (or back, `inverse`).
Value moveAxis(NodeContext &n, Value v, int64_t axis, bool back) {
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  if (axis == rank - 1)
    return v;
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  if (back) {
    SmallVector<int64_t> inv(rank);
    for (int64_t d = 0; d < rank; ++d)
      inv[perm[d]] = d;
    perm = inv;
  }
  return n.create<TransposeOp>(v, perm);
}

/// v [.., k] @ m [k, M] -> [.., M].
Value matmulLast(NodeContext &n, Value v, Value m) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t rows = 1;
  for (int64_t d : t.getShape().drop_back())
    rows *= d;
  int64_t cols = cast<RankedTensorType>(m.getType()).getDimSize(1);
  SmallVector<int64_t> shape(t.getShape());
  shape.back() = cols;
  Value flat = n.reshape(v, {rows, t.getShape().back()});
  return n.reshape(n.create<MatmulOp>(flat, m), shape);
}

/// The DFT of the signal `re` (+ i `im`; null: real) along its last axis,
/// of length N: the real and imaginary parts of its M bins (the imaginary
/// null for the one-sided inverse, whose result is real).
std::pair<Value, Value> dftLast(NodeContext &n, Value re, Value im, int64_t N, bool inverse,
                                bool onesided) {
  auto t = cast<RankedTensorType>(re.getType());
  const int64_t len = t.getShape().back(), last = t.getRank() - 1;
  const bool irfft = inverse && onesided;
  // Input samples (bins, for irfft) that take part, and output bins.
  const int64_t used = std::min(len, irfft ? N / 2 + 1 : N);
  const int64_t M = irfft ? N : onesided ? N / 2 + 1 : N;
  // N <= 2^16, so used * M cannot overflow.
  if (used * M > kMaxMaterialisedElements) {
    (void)n.unsupported("a DFT of " + Twine(used) + " x " + Twine(M) +
                        " points (its cosines and sines are constants; at most " +
                        Twine(kMaxMaterialisedElements) + ")");
    return {};
  }
  re = n.sliceDim(re, last, 0, used);
  if (im)
    im = n.sliceDim(im, last, 0, used);
  const double s = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / double(N) : 1.0;
  HostTensor c(RankedTensorType::get({used, M}, t.getElementType())), sn(c.getType());
  for (int64_t j = 0; j < used; ++j)
    for (int64_t k = 0; k < M; ++k) {
      // j k mod N keeps the angle small (and exact) for long transforms.
      double theta = 2.0 * M_PI * double((j * k) % N) / double(N);
      double w = scale;
      if (irfft) // j is the bin here: its weight with its Hermitian twin
        w *= (j == 0 || (N % 2 == 0 && j == N / 2)) ? 1.0 : 2.0;
      c.setFromDouble(j * M + k, w * std::cos(theta));
      sn.setFromDouble(j * M + k, w * std::sin(theta));
    }
  Value C = n.constant(c), S = n.constant(sn);
  // Yr = Xr C - s Xi S, Yi = s Xr S + Xi C (s S folded into the constant).
  Value sS = s > 0 ? S : n.create<NegOp>(S);
  Value yr = matmulLast(n, re, C), yi = matmulLast(n, re, sS);
  if (im) {
    yr = n.create<SubOp>(yr, matmulLast(n, im, sS));
    yi = n.create<AddOp>(yi, matmulLast(n, im, C));
  }
  return {yr, irfft ? Value() : yi};
}

/// x [.., c] -> its real and imaginary parts [..] (imaginary null if c = 1).
FailureOr<std::pair<Value, Value>> complexParts(NodeContext &n, Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  if (!isa<FloatType>(t.getElementType()) || t.getRank() < 2 ||
      (t.getShape().back() != 1 && t.getShape().back() != 2))
    return (void)n.error("the signal must be a float tensor [.., 1] (real) or [.., 2] (complex)"),
           failure();
  SmallVector<Value> parts = n.unstack(x, t.getRank() - 1);
  if (parts.empty())
    return failure();
  return std::make_pair(parts[0], parts.size() == 2 ? parts[1] : Value());
}

/// [..] real and imaginary (or real alone) -> [.., 2] (or [.., 1]).
Value complexOf(NodeContext &n, Value re, Value im) {
  return im ? n.stack({re, im}, -1) : n.stack(re, -1);
}

LogicalResult dft(NodeContext &n) {
  auto xt = n.inputType(0);
  const int64_t rank = xt.getRank();
  if (failed(n.requireInputs(1)))
    return failure();
  int64_t axis = n.getOpset() >= 20 ? -2 : n.getInt("axis", 1);
  if (n.getOpset() >= 20 && n.hasInput(2)) {
    FailureOr<int64_t> a = n.constantInt(2, "the axis of DFT");
    if (failed(a))
      return failure();
    axis = *a;
  }
  FailureOr<int64_t> ax = n.axis(axis, rank);
  if (failed(ax))
    return failure();
  if (*ax == rank - 1)
    return n.error("the axis may not be the last one, which holds the real and imaginary parts");
  const bool inverse = n.getInt("inverse", 0), onesided = n.getInt("onesided", 0);
  auto parts = complexParts(n, n.input(0));
  if (failed(parts))
    return failure();
  if (onesided && !inverse && parts->second)
    return n.error("a one-sided forward DFT takes a real signal");
  int64_t len = xt.getDimSize(*ax);
  int64_t N = inverse && onesided ? 2 * (len - 1) : len;
  if (n.hasInput(1)) {
    FailureOr<int64_t> l = n.constantInt(1, "dft_length");
    if (failed(l))
      return failure();
    N = *l;
  }
  if (N < 1 || N > (int64_t(1) << 16))
    return N < 1 ? n.error("the DFT length is " + Twine(N) + ", not positive")
                 : n.unsupported("a DFT of length " + Twine(N) +
                                 " (a matmul by an N x N constant; at most 65536)");
  Value re = moveAxis(n, parts->first, *ax, false);
  Value im = parts->second ? moveAxis(n, parts->second, *ax, false) : Value();
  auto [yr, yi] = dftLast(n, re, im, N, inverse, onesided);
  if (n.hasFailed())
    return failure();
  yr = moveAxis(n, yr, *ax, true);
  if (yi)
    yi = moveAxis(n, yi, *ax, true);
  if (n.hasFailed())
    return failure();
  n.setOutputs(complexOf(n, yr, yi));
  return success();
}

LogicalResult stft(NodeContext &n) {
  if (failed(n.requireInputs(2)))
    return failure();
  auto xt = n.inputType(0);
  Value signal = n.input(0);
  if (xt.getRank() == 2) { // [batch, length]: real (torch.onnx's export)
    xt = RankedTensorType::get({xt.getDimSize(0), xt.getDimSize(1), 1}, xt.getElementType());
    signal = n.reshape(signal, xt.getShape());
  }
  if (xt.getRank() != 3)
    return n.error("the signal must be [batch, length, 1 or 2] (or [batch, length])");
  const int64_t B = xt.getDimSize(0), L = xt.getDimSize(1);
  FailureOr<int64_t> step = n.constantInt(1, "frame_step of STFT");
  if (failed(step))
    return failure();
  const int64_t hop = *step;
  Value window = n.hasInput(2) ? n.input(2) : Value();
  if (window && (n.inputType(2).getRank() != 1 ||
                 n.inputType(2).getElementType() != xt.getElementType()))
    return n.error("the window must be a 1-d tensor of the signal's type");
  int64_t wlen = window ? n.inputType(2).getDimSize(0) : L, N = wlen;
  if (n.hasInput(3)) {
    FailureOr<int64_t> fl = n.constantInt(3, "frame_length of STFT");
    if (failed(fl))
      return failure();
    N = *fl;
    if (!window)
      wlen = N;
  }
  if (hop < 1 || N < 1 || N > L || N > (int64_t(1) << 16))
    return n.error("frame_step must be positive and the frame length (" + Twine(N) +
                   ") in [1, the signal's " + Twine(L) + "]");
  const int64_t frames = 1 + (L - N) / hop;
  if (wlen > kMaxMaterialisedElements || frames > kMaxMaterialisedElements / std::max<int64_t>(wlen, 1))
    return n.unsupported("an STFT of " + Twine(frames) + " frames of " + Twine(wlen));
  // Frames of the window's length (past the signal's end: zeros).
  const int64_t need = (frames - 1) * hop + wlen;
  Value x = padWith(n, signal, 1, 0, std::max<int64_t>(need - L, 0), 0.0);
  HostTensor idx(RankedTensorType::get({frames * wlen}, n.builder().getI64Type()));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < wlen; ++j)
      idx.setFromInt(f * wlen + j, f * hop + j);
  x = n.reshape(n.gather(x, n.constant(idx), 1), {B, frames, wlen, xt.getDimSize(2)});
  auto parts = complexParts(n, x);
  if (failed(parts))
    return failure();
  auto [re, im] = *parts;
  const bool onesided = n.getInt("onesided", 1);
  if (onesided && im)
    return n.error("a one-sided STFT takes a real signal");
  if (window) {
    Value w = n.reshape(window, {1, 1, wlen});
    re = n.create<MulOp>(re, w);
    if (im)
      im = n.create<MulOp>(im, w);
  }
  auto [yr, yi] = dftLast(n, re, im, N, false, onesided);
  if (n.hasFailed() || !yr)
    return failure();
  n.setOutputs(complexOf(n, yr, yi));
  return success();
}

/// The output type of a generator (output_datatype, float by default).
FailureOr<Type> generatedType(NodeContext &n) {
  int64_t dt = n.getInt("output_datatype", 1);
  Type t = convertDataType(n.getContext(), dt);
  if (!t || !isa<FloatType>(t))
    return (void)n.unsupported("output_datatype " + dataTypeName(dt)), failure();
  return t;
}

enum class WindowKind { Hann, Hamming, Blackman };

template <WindowKind kind>
LogicalResult windowOp(NodeContext &n) {
  FailureOr<int64_t> size = n.constantInt(0, "the window size");
  FailureOr<Type> et = generatedType(n);
  if (failed(size) || failed(et))
    return failure();
  const int64_t len = *size;
  if (len < 0 || len > kMaxMaterialisedElements)
    return n.error("the window size is " + Twine(len));
  const double d = n.getInt("periodic", 1) ? double(len) : double(len - 1);
  HostTensor w(RankedTensorType::get({len}, *et));
  for (int64_t i = 0; i < len; ++i) {
    double a = 2.0 * M_PI * double(i) / d, v;
    if (kind == WindowKind::Hann)
      v = 0.5 - 0.5 * std::cos(a);
    else if (kind == WindowKind::Hamming)
      v = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a);
    else
      v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    w.setFromDouble(i, v);
  }
  n.setOutputs(n.constant(w));
  return success();
}

/// MelWeightMatrix-17: [dft_length / 2 + 1, num_mel_bins] triangular filters
/// between mel-spaced edges, as onnx's reference spaces them (the span cut
/// into num_mel_bins + 2 steps).
LogicalResult melWeightMatrix(NodeContext &n) {
  FailureOr<int64_t> bins = n.constantInt(0, "num_mel_bins");
  FailureOr<int64_t> dftLen = n.constantInt(1, "dft_length");
  FailureOr<int64_t> rate = n.constantInt(2, "sample_rate");
  FailureOr<double> lo = n.constantScalar(3, "lower_edge_hertz");
  FailureOr<double> hi = n.constantScalar(4, "upper_edge_hertz");
  FailureOr<Type> et = generatedType(n);
  if (failed(bins) || failed(dftLen) || failed(rate) || failed(lo) || failed(hi) || failed(et))
    return failure();
  const int64_t mels = *bins, N = *dftLen, sr = *rate;
  if (mels < 1 || N < 1 || sr < 1)
    return n.error("num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t spec = N / 2 + 1;
  if (mels > kMaxMaterialisedElements || spec > kMaxMaterialisedElements / mels)
    return n.unsupported("a mel matrix of more than " + Twine(kMaxMaterialisedElements) +
                         " elements");
  auto toMel = [](double hz) { return 2595.0 * std::log1p(hz / 700.0) / std::log(10.0); };
  const double low = toMel(*lo), step = (toMel(*hi) - low) / double(mels + 2);
  SmallVector<int64_t> edge;
  for (int64_t i = 0; i < mels + 2; ++i) {
    double hz = 700.0 * std::expm1((double(i) * step + low) / 2595.0 * std::log(10.0));
    double bin = std::floor(double(N + 1) * hz / double(sr));
    // Every edge a spectrogram bin (which also bounds the loops below).
    if (!(bin >= 0 && bin < double(spec)))
      return n.error("the mel filters' edge " + Twine(i) + " falls outside the " + Twine(spec) +
                     " spectrogram bins (the edges must lie in [0, the Nyquist frequency])");
    edge.push_back((int64_t)bin);
  }
  HostTensor w(RankedTensorType::get({spec, mels}, *et));
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j < 0 || j >= spec)
      return false;
    w.setFromDouble(j * mels + i, v);
    return true;
  };
  for (int64_t i = 0; i < mels; ++i) {
    int64_t l = edge[i], c = edge[i + 1], h = edge[i + 2];
    bool ok = true;
    if (c == l)
      ok &= set(c, i, 1.0);
    for (int64_t j = l; c != l && j <= c; ++j)
      ok &= set(j, i, double(j - l) / double(c - l));
    for (int64_t j = c; j < h; ++j)
      ok &= set(j, i, double(h - j) / double(h - c));
    if (!ok)
      return n.error("the mel filter " + Twine(i) + " reaches past the " + Twine(spec) +
                     " spectrogram bins (upper_edge_hertz above the Nyquist frequency?)");
  }
  n.setOutputs(n.constant(w));
  return success();
}

} // namespace

void onnx_import::registerSignalOps(OpRegistry &r) {
  r.add("DFT", 17, dft);
  r.add("DFT", 20, dft); // axis an input (default -2)
  r.add("STFT", 17, stft);
  r.add("HannWindow", 17, windowOp<WindowKind::Hann>);
  r.add("HammingWindow", 17, windowOp<WindowKind::Hamming>);
  r.add("BlackmanWindow", 17, windowOp<WindowKind::Blackman>);
  r.add("MelWeightMatrix", 17, melWeightMatrix);
}
