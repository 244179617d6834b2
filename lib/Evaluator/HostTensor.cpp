//===- HostTensor.cpp - host tensors and their encodings ------------------===//
#include "merak/Evaluator/HostTensor.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/BuiltinDialect.h"
#include "llvm/ADT/APFloat.h"
#include <cstring>
#include <limits>
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
  switch (type.getWidth()) {
  case 1:
    return v != 0;
  case 32:
    return (int64_t)(int32_t)(uint32_t)(uint64_t)v;
  default:
    return v;
  }
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
  double lo = it.getWidth() == 32 ? -0x1p31 : -0x1p63;
  double hi = it.getWidth() == 32 ? 0x1p31 : 0x1p63; // exclusive
  if (t <= lo)
    idata[k] = it.getWidth() == 32 ? std::numeric_limits<int32_t>::min()
                                   : std::numeric_limits<int64_t>::min();
  else if (t >= hi)
    idata[k] = it.getWidth() == 32 ? std::numeric_limits<int32_t>::max()
                                   : std::numeric_limits<int64_t>::max();
  else
    idata[k] = (int64_t)t;
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
    } else if (eb == 8) {
      std::memcpy(&t.idata[k], p, 8);
    } else if (eb == 4) {
      int32_t v;
      std::memcpy(&v, p, 4);
      t.idata[k] = v;
    } else {
      t.idata[k] = *p != 0;
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
    } else if (eb == 8) {
      std::memcpy(p, &idata[k], 8);
    } else if (eb == 4) {
      int32_t v = (int32_t)idata[k];
      std::memcpy(p, &v, 4);
    } else {
      *p = idata[k] != 0;
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
    int64_t k = 0;
    for (const APInt &v : dense.getValues<APInt>())
      t.idata[k++] = isBool ? (int64_t)v.getBoolValue() : v.getSExtValue();
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
  for (int64_t v : idata)
    vals.push_back(APInt(width, (uint64_t)v, /*isSigned=*/true));
  return DenseElementsAttr::get(type, vals);
}
