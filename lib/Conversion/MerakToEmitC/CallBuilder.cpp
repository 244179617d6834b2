//===- CallBuilder.cpp - Building runtime calls in EmitC -------------------===//
#include "CallBuilder.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

std::string emitc_lowering::dimsLiteral(ArrayRef<int64_t> values) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "Dims{" << values.size() << ", {";
  llvm::interleave(values, os, ", ");
  os << "}}";
  return s;
}

std::string emitc_lowering::dimsOf(Type tensorType) {
  return dimsLiteral(cast<RankedTensorType>(tensorType).getShape());
}

std::string emitc_lowering::dtypeOf(Type type) {
  if (auto t = dyn_cast<ShapedType>(type))
    type = t.getElementType();
  if (type.isF32())
    return "DT::F32";
  if (type.isF64())
    return "DT::F64";
  if (type.isBF16())
    return "DT::BF16";
  if (type.isSignlessInteger(64))
    return "DT::I64";
  if (type.isSignlessInteger(32))
    return "DT::I32";
  return "DT::BOOL"; // merak-plan-memory admitted nothing else
}

std::string emitc_lowering::doubleLiteral(double v) {
  if (std::isinf(v))
    return v > 0 ? "HUGE_VAL" : "-HUGE_VAL";
  if (std::isnan(v))
    return "NAN";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.17g", v);
  return s;
}

std::string emitc_lowering::groupLiteral(StringRef g) {
  return g == "dp"    ? "Group::DP"
         : g == "tp"  ? "Group::TP"
         : g == "ep"  ? "Group::EP"
         : g == "edp" ? "Group::EDP"
                      : "Group::PP";
}

int64_t emitc_lowering::byteSize(Type tensorType) {
  auto r = cast<RankedTensorType>(tensorType);
  return r.getNumElements() * storageElementBytes(r.getElementType());
}

int64_t emitc_lowering::numElements(Type tensorType) {
  return cast<RankedTensorType>(tensorType).getNumElements();
}

int64_t emitc_lowering::normAxis(int64_t axis, Type tensorType) {
  return axis < 0 ? axis + cast<RankedTensorType>(tensorType).getRank() : axis;
}

Value Emitter::pointer(PlannedBuffer buffer) {
  auto key = std::make_pair((int)buffer.region, buffer.offset);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  Value base = bases[buffer.region];
  Value p = base;
  if (buffer.offset != 0) {
    Value off = emitc::LiteralOp::create(b, loc, b.getI64Type(), std::to_string(buffer.offset));
    p = emitc::AddOp::create(b, loc, base.getType(), base, off);
  }
  cache[key] = p;
  return p;
}

Value Emitter::ioPointer(int64_t slot) {
  Value &p = ioCache[slot];
  if (!p) {
    auto charPtr = emitc::PointerType::get(emitc::OpaqueType::get(b.getContext(), "char"));
    Value index = emitc::LiteralOp::create(b, loc, b.getI64Type(), std::to_string(slot));
    Value entry =
        emitc::SubscriptOp::create(b, loc, cast<TypedValue<emitc::PointerType>>(io), index);
    p = emitc::LoadOp::create(b, loc, charPtr, entry);
  }
  return p;
}

FailureOr<Value> Emitter::pointer(Value value) {
  if (io)
    if (auto it = ioSlots.find(viewRoot(value)); it != ioSlots.end())
      return ioPointer(it->second);
  FailureOr<PlannedBuffer> buffer = getPlannedBuffer(value, symbols);
  if (failed(buffer))
    return failure();
  return pointer(*buffer);
}

LogicalResult Emitter::Call::ptrs(ArrayRef<Value> values) {
  for (Value v : values) {
    if (!v) {
      lit("nullptr");
      continue;
    }
    FailureOr<Value> p = e.pointer(v);
    if (failed(p))
      return failure();
    ptr(*p);
  }
  return success();
}

void Emitter::Call::emit() {
  emitc::CallOpaqueOp::create(e.b, e.loc, TypeRange{}, callee, operands,
                              e.b.getArrayAttr(args), ArrayAttr());
}
