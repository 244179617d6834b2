//===- HostTensor.cpp - host tensors and their encodings ------------------===//
#include "merak/Evaluator/HostTensor.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/BuiltinDialect.h"
#include "llvm/ADT/APFloat.h"
#include <cstring>
#include <cmath>

using namespace mlir;
using namespace mlir::merak;

double mlir::merak::roundToFloatType(double v, FloatType type) {
  if (type.isF64())
    return v;
  if (type.isF32())
    return (double)(float)v;
  llvm::APFloat ap(v);
  bool lost;
  ap.convert(type.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven, &lost);
  ap.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return ap.convertToDouble();
}

int64_t mlir::merak::wrapToIntType(int64_t v, IntegerType type) {
  const unsigned w = type.getWidth();
  if (w == 1)
    return v != 0;
  if (w >= 64)
    return v; // uint64: the bit pattern (see isRepresentable)
  const uint64_t low = (uint64_t)v & ((uint64_t(1) << w) - 1);
  if (type.isUnsigned())
    return (int64_t)low;
  const uint64_t sign = uint64_t(1) << (w - 1);
  return (int64_t)(low ^ sign) - (int64_t)sign; // sign-extended
}

bool HostTensor::isRepresentable() const {
  auto it = dyn_cast<IntegerType>(getElementType());
  if (!it || !it.isUnsigned() || it.getWidth() != 64)
    return true;
  return llvm::all_of(idata, [](int64_t v) { return v >= 0; });
}

HostTensor::HostTensor(RankedTensorType type) : type(type) {
  numElements = type.getNumElements();
  if (isFloat())
    fdata.assign(numElements, 0.0);
  else
    idata.assign(numElements, 0);
}

void HostTensor::setFromDouble(int64_t k, double v) {
  if (auto ft = dyn_cast<FloatType>(getElementType())) {
    fdata[k] = roundToFloatType(v, ft);
    return;
  }
  auto it = cast<IntegerType>(getElementType());
  if (it.getWidth() == 1) {
    idata[k] = v != 0.0;
    return;
  }
  // Float -> int truncates toward zero. Out-of-range values (undefined in
  // C++, platform-dependent in numpy and PyTorch) saturate to the target
  // type's limits, and NaN becomes 0: a deliberate, documented choice.
  double t = std::trunc(v);
  if (std::isnan(t)) {
    idata[k] = 0;
    return;
  }
  // The type's limits as stored (sign-extended; ui64's maximum as its bit
  // pattern, which isRepresentable refuses).
  const int w = (int)it.getWidth();
  const bool isUnsigned = it.isUnsigned();
  const uint64_t ones = ~uint64_t(0);
  const int64_t minV = isUnsigned ? 0 : (int64_t)(ones << (w - 1));
  const int64_t maxV = (int64_t)(ones >> (isUnsigned ? 64 - w : 65 - w));
  if (t <= (isUnsigned ? 0.0 : -std::ldexp(1.0, w - 1)))
    idata[k] = minV;
  else if (t >= std::ldexp(1.0, isUnsigned ? w : w - 1))
    idata[k] = maxV;
  else // in range; a uint64 above 2^63 as its bit pattern
    idata[k] = t >= 0x1p63 ? (int64_t)(uint64_t)t : (int64_t)t;
}

void HostTensor::setFromInt(int64_t k, int64_t v) {
  if (auto ft = dyn_cast<FloatType>(getElementType()))
    fdata[k] = roundToFloatType((double)v, ft);
  else
    idata[k] = wrapToIntType(v, cast<IntegerType>(getElementType()));
}

void HostTensor::roundToType() {
  if (auto ft = dyn_cast<FloatType>(getElementType())) {
    if (ft.isF64())
      return;
    for (double &v : fdata)
      v = roundToFloatType(v, ft);
    return;
  }
  auto it = cast<IntegerType>(getElementType());
  if (it.getWidth() == 64)
    return;
  for (int64_t &v : idata)
    v = wrapToIntType(v, it);
}

HostTensor HostTensor::reshaped(RankedTensorType newType) const {
  HostTensor t = *this;
  t.type = newType;
  return t;
}

int64_t HostTensor::elementBytes(Type elementType) {
  if (elementType.isInteger(1))
    return 1;
  return (elementType.getIntOrFloatBitWidth() + 7) / 8;
}

FailureOr<HostTensor> HostTensor::fromBytes(RankedTensorType type,
                                            ArrayRef<char> bytes) {
  HostTensor t(type);
  Type et = type.getElementType();
  int64_t eb = elementBytes(et);
  if ((int64_t)bytes.size() != eb * t.numElements)
    return failure();
  const char *p = bytes.data();
  for (int64_t k = 0; k < t.numElements; ++k, p += eb) {
    if (et.isF32()) {
      float v;
      std::memcpy(&v, p, 4);
      t.fdata[k] = v;
    } else if (et.isF64()) {
      std::memcpy(&t.fdata[k], p, 8);
    } else if (auto ft = dyn_cast<FloatType>(et)) {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      llvm::APFloat ap(ft.getFloatSemantics(), llvm::APInt(16, bits));
      t.fdata[k] = ap.convertToDouble();
    } else if (et.isInteger(1)) {
      t.idata[k] = *p != 0;
    } else {
      // Integers: the low eb bytes (little-endian), wrapped (sign- or
      // zero-extended) to the type.
      uint64_t bits = 0;
      std::memcpy(&bits, p, eb);
      t.idata[k] = wrapToIntType((int64_t)bits, cast<IntegerType>(et));
    }
  }
  return t;
}

std::vector<char> HostTensor::toBytes() const {
  Type et = getElementType();
  int64_t eb = elementBytes(et);
  std::vector<char> out(eb * numElements);
  char *p = out.data();
  for (int64_t k = 0; k < numElements; ++k, p += eb) {
    if (et.isF32()) {
      float v = (float)fdata[k];
      std::memcpy(p, &v, 4);
    } else if (et.isF64()) {
      std::memcpy(p, &fdata[k], 8);
    } else if (auto ft = dyn_cast<FloatType>(et)) {
      llvm::APFloat ap(fdata[k]);
      bool lost;
      ap.convert(ft.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven, &lost);
      uint16_t bits = (uint16_t)ap.bitcastToAPInt().getZExtValue();
      std::memcpy(p, &bits, 2);
    } else if (et.isInteger(1)) {
      *p = idata[k] != 0;
    } else { // the low eb bytes, little-endian
      uint64_t bits = (uint64_t)idata[k];
      std::memcpy(p, &bits, eb);
    }
  }
  return out;
}

FailureOr<HostTensor> HostTensor::fromAttr(ElementsAttr attr) {
  auto type = dyn_cast<RankedTensorType>(attr.getType());
  if (!type || !type.hasStaticShape())
    return failure();
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob)
      return failure();
    return fromBytes(type, blob->getData());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return failure();
  HostTensor t(type);
  if (t.isFloat()) {
    int64_t k = 0;
    for (const APFloat &v : dense.getValues<APFloat>())
      t.fdata[k++] = v.convertToDouble() ;
  } else {
    bool isBool = type.getElementType().isInteger(1);
    bool isUnsigned = type.getElementType().isUnsignedInteger();
    int64_t k = 0;
    for (const APInt &v : dense.getValues<APInt>())
      t.idata[k++] = isBool       ? (int64_t)v.getBoolValue()
                     : isUnsigned ? (int64_t)v.getZExtValue()
                                  : v.getSExtValue();
  }
  return t;
}

DenseElementsAttr HostTensor::toAttr() const {
  Type et = getElementType();
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<APFloat> vals;
    vals.reserve(numElements);
    for (double v : fdata) {
      APFloat ap(v);
      bool lost;
      ap.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(ap);
    }
    return DenseElementsAttr::get(type, vals);
  }
  unsigned width = et.getIntOrFloatBitWidth();
  if (width == 1) {
    SmallVector<bool> vals(idata.begin(), idata.end());
    return DenseElementsAttr::get(type, ArrayRef<bool>(vals.data(), vals.size()));
  }
  SmallVector<APInt> vals;
  vals.reserve(numElements);
  bool isSigned = !et.isUnsignedInteger();
  for (int64_t v : idata)
    vals.push_back(APInt(width, (uint64_t)v, isSigned, /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, vals);
}
