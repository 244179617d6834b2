//===- VJPBuilder.cpp - helpers shared by the VJP rules -------------------===//
#include "VJPBuilder.h"

#include "merak/Evaluator/HostTensor.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::vjp;

Value Emitter::scalar(Value like, double v) {
  HostTensor t(RankedTensorType::get({}, typeOf(like).getElementType()));
  t.setFromDouble(0, v);
  return ConstantOp::create(b, loc, t.toAttr());
}

Value Emitter::zerosLike(Value like) {
  auto t = typeOf(like);
  HostTensor zero(RankedTensorType::get({}, t.getElementType()));
  return ConstantOp::create(
      b, loc, SplatElementsAttr::get(t, zero.toAttr().getSplatValue<Attribute>()));
}

Value Emitter::reshape(Value x, ArrayRef<int64_t> shape) {
  auto t = typeOf(x);
  if (t.getShape() == shape)
    return x;
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), x);
}

Value Emitter::broadcast(Value x, ArrayRef<int64_t> shape) {
  auto t = typeOf(x);
  if (t.getShape() == shape)
    return x;
  return BroadcastOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), x);
}

Value Emitter::unbroadcast(Value g, RankedTensorType target) {
  auto gt = typeOf(g);
  if (gt.getShape() == target.getShape())
    return g;
  int64_t lead = gt.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < gt.getRank(); ++d)
    if (d < lead || (target.getDimSize(d - lead) == 1 && gt.getDimSize(d) != 1))
      axes.push_back(d);
  Value r = axes.empty() ? g : sumKeep(g, axes);
  return reshape(r, target.getShape());
}

Value Emitter::cast(Value x, Type elementType) {
  auto t = typeOf(x);
  if (t.getElementType() == elementType)
    return x;
  return CastOp::create(b, loc, RankedTensorType::get(t.getShape(), elementType), x);
}
