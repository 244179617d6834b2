//===- VJPBuilder.h - helpers shared by the VJP rules (internal) -*- C++ -*-===//
#ifndef MERAK_LIB_AUTODIFF_VJPBUILDER_H
#define MERAK_LIB_AUTODIFF_VJPBUILDER_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::merak::vjp {

inline RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Small builder facade: every op at one location, result types inferred.
struct Emitter {
  OpBuilder &b;
  Location loc;

  Value scalar(Value like, double v);
  Value zerosLike(Value like);
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value reshape(Value x, ArrayRef<int64_t> shape);
  Value broadcast(Value x, ArrayRef<int64_t> shape);
  /// Sum over `axes`, keeping them as size-1 dimensions.
  Value sumKeep(Value x, ArrayRef<int64_t> axes) {
    return ReduceSumOp::create(b, loc, x, axes, /*keepdims=*/true);
  }
  /// The gradient `g` of a broadcast result, reduced to `target`'s shape.
  Value unbroadcast(Value g, RankedTensorType target);
  Value cast(Value x, Type elementType);
};

} // namespace mlir::merak::vjp

#endif
