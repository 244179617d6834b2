//===- MerakScanOps.cpp - merak.selective_scan's verifiers ----------------===//
//
// merak.selective_scan and merak.selective_scan_grad: u and delta [B, D, T]
// (one type, by the ops' traits), a [D, N], b and c [B, T, N], one element
// type.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::merak;

/// The operand shapes of either op (both have u, a and b).
template <class OpTy> static LogicalResult verifySelectiveScan(OpTy op) {
  auto u = cast<RankedTensorType>(op.getU().getType());
  auto a = cast<RankedTensorType>(op.getA().getType());
  auto b = cast<RankedTensorType>(op.getB().getType());
  if (u.getRank() != 3 || a.getRank() != 2 || b.getRank() != 3)
    return op.emitOpError("expects u [B, D, T], a [D, N] and b, c [B, T, N]; got ranks ")
           << u.getRank() << ", " << a.getRank() << " and " << b.getRank();
  if (a.getElementType() != u.getElementType() || b.getElementType() != u.getElementType())
    return op.emitOpError("expects one element type for every operand");
  ArrayRef<int64_t> us = u.getShape(), as = a.getShape(), bs = b.getShape();
  if (as[0] != us[1] || bs[0] != us[0] || bs[1] != us[2] || bs[2] != as[1])
    return op.emitOpError("shapes do not agree: u ")
           << u << ", a " << a << ", b " << b << " (expects [B, D, T], [D, N], [B, T, N])";
  return success();
}

LogicalResult SelectiveScanOp::verify() { return verifySelectiveScan(*this); }
LogicalResult SelectiveScanGradOp::verify() { return verifySelectiveScan(*this); }
