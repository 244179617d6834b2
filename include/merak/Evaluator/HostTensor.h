//===- HostTensor.h - tensors of the reference evaluator --------*- C++ -*-===//
//
// A deliberately simple tensor: floats are held as doubles rounded to the
// element type after every op, integers and booleans as int64. It trades
// speed for obvious correctness; the evaluator is the oracle.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_EVALUATOR_HOSTTENSOR_H
#define MERAK_EVALUATOR_HOSTTENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <string>
#include <vector>

namespace mlir::merak {

class HostTensor {
public:
  HostTensor() = default;
  /// Zero-filled tensor of `type`.
  explicit HostTensor(RankedTensorType type);

  RankedTensorType getType() const { return type; }
  Type getElementType() const { return type.getElementType(); }
  ArrayRef<int64_t> getShape() const { return type.getShape(); }
  int64_t getRank() const { return type.getRank(); }
  int64_t size() const { return numElements; }
  bool isFloat() const { return isa<FloatType>(type.getElementType()); }

  /// Float storage (valid when isFloat()).
  std::vector<double> &f() { return fdata; }
  const std::vector<double> &f() const { return fdata; }
  /// Integer/boolean storage (valid when !isFloat()).
  std::vector<int64_t> &i() { return idata; }
  const std::vector<int64_t> &i() const { return idata; }

  /// False when a uint64 element is 2^63 or more: the integers are stored
  /// as int64, whose order, division and conversions such a value breaks,
  /// so the evaluator reports it instead of computing with it.
  bool isRepresentable() const;

  /// Element `k` as a double, whatever the storage.
  double getAsDouble(int64_t k) const {
    return isFloat() ? fdata[k] : (double)idata[k];
  }
  /// Stores `v` at `k`, converting (and rounding) to the element type.
  void setFromDouble(int64_t k, double v);
  void setFromInt(int64_t k, int64_t v);

  /// Rounds every float element to the element type's precision, wraps
  /// integers to their width.
  void roundToType();

  /// Same data, new shape (element count must match).
  HostTensor reshaped(RankedTensorType newType) const;

  /// Decodes little-endian raw bytes of `type` (i1 as one byte per element).
  static FailureOr<HostTensor> fromBytes(RankedTensorType type, ArrayRef<char> bytes);
  /// Encodes to little-endian raw bytes (i1 as one byte per element).
  std::vector<char> toBytes() const;
  /// Element size in bytes of the raw encoding.
  static int64_t elementBytes(Type elementType);

  static FailureOr<HostTensor> fromAttr(ElementsAttr attr);
  /// A DenseElementsAttr holding this tensor.
  DenseElementsAttr toAttr() const;

private:
  RankedTensorType type;
  int64_t numElements = 0;
  std::vector<double> fdata;
  std::vector<int64_t> idata;
};

/// Rounds a double to the precision of a float type.
double roundToFloatType(double v, FloatType type);
/// Wraps an integer to the width and signedness of an integer type (i1:
/// 0/1; ui8..ui32 zero-extended; ui64 kept as its bit pattern).
int64_t wrapToIntType(int64_t v, IntegerType type);

} // namespace mlir::merak

#endif
