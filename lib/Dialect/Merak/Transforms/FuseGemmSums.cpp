//===- FuseGemmSums.cpp - merak-fuse-gemm-sums ----------------------------===//
//
// A sum of products with a short contraction each becomes one product over
// the concatenated contraction (see Passes.td):
//
//   add(add(matmul(a1, b1), matmul(a2, b2)), ..., matmul(ak, bk))
//     -> matmul(concat(a1, ..., ak, axis = 1), concat(b1, ..., bk, axis = 0))
//
// with a side whose every operand is a transpose concatenated before it:
// concat(transpose(x_i), axis = 1) = transpose(concat(x_i, axis = 0)). A
// recurrent layer's weight gradient is such a sum, one product per time step
// contracted over the batch: one GEMM instead of k GEMMs that each write the
// whole weight-sized result, and k - 1 weight-sized adds.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKFUSEGEMMSUMS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-fuse-gemm-sums"

using namespace mlir;
using namespace mlir::merak;

namespace {

/// An add whose operands have its result's type (no broadcast).
bool isPlainAdd(Operation *op) {
  auto add = dyn_cast_or_null<AddOp>(op);
  return add && add.getLhs().getType() == add.getType() && add.getRhs().getType() == add.getType();
}

/// Whether `add` is inside a larger sum: read only by a plain add of its type.
bool isInnerAdd(AddOp add) { return add->hasOneUse() && isPlainAdd(*add->user_begin()); }

/// The terms of the sum rooted at `root`: the operands of its plain adds
/// read by nothing else, depth first, and those adds.
void collectTerms(AddOp root, SmallVectorImpl<Value> &terms, SmallVectorImpl<Operation *> &adds) {
  SmallVector<Value> stack{root.getRhs(), root.getLhs()};
  adds.push_back(root);
  while (!stack.empty()) {
    Value v = stack.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (isPlainAdd(def) && v.hasOneUse() && def->getBlock() == root->getBlock()) {
      adds.push_back(def);
      stack.push_back(def->getOperand(1));
      stack.push_back(def->getOperand(0));
      continue;
    }
    terms.push_back(v);
  }
}

/// A 2-D product read only by the sum, of the sum's type.
MatmulOp productTerm(Value v, Type sumType) {
  auto m = v.getDefiningOp<MatmulOp>();
  if (!m || !v.hasOneUse() || m.getType() != sumType)
    return {};
  auto l = cast<RankedTensorType>(m.getLhs().getType());
  auto r = cast<RankedTensorType>(m.getRhs().getType());
  return l.getRank() == 2 && r.getRank() == 2 ? m : MatmulOp();
}

/// The splat value of a constant `v`, if it is one.
SplatElementsAttr splatOf(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c ? dyn_cast<SplatElementsAttr>(c.getValue()) : SplatElementsAttr();
}

/// The input of a 2-D transpose.
Value transposeInput(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && t.getPerm().size() == 2 && t.getPerm()[0] == 1 ? t.getInput() : Value();
}

/// `v` (2-D) transposed without a copy: a transpose's input, or a splat
/// constant of the swapped shape (a zero initial state, whose transpose
/// constant folding has already made a constant).
Value transposed(OpBuilder &b, Value v) {
  if (Value in = transposeInput(v))
    return in;
  auto type = cast<RankedTensorType>(v.getType());
  auto swapped =
      RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)}, type.getElementType());
  return ConstantOp::create(b, v.getLoc(), splatOf(v).resizeSplat(swapped));
}

/// `parts` (2-D) joined along `axis`; when every part is a transpose (or a
/// splat), the transpose of their inputs joined along the other axis (rows
/// copied whole).
Value join(OpBuilder &b, Location loc, ArrayRef<Value> parts, int64_t axis) {
  if (!llvm::all_of(parts, [](Value p) { return transposeInput(p) || splatOf(p); }))
    return ConcatOp::create(b, loc, parts, axis);
  SmallVector<Value> inputs;
  for (Value p : parts)
    inputs.push_back(transposed(b, p));
  return TransposeOp::create(b, loc, ConcatOp::create(b, loc, inputs, 1 - axis),
                             ArrayRef<int64_t>{1, 0});
}

/// Rewrites the sum rooted at `root` when at least two of its terms are
/// products and joining them pays; returns whether it did.
bool fuseSum(AddOp root) {
  SmallVector<Value> terms;
  SmallVector<Operation *> adds;
  collectTerms(root, terms, adds);
  // The products with the first one's operand types (bf16 operands giving
  // f32 and f32 ones do not mix).
  auto operandTypes = [](MatmulOp m) {
    return std::make_pair(m.getLhs().getType().getElementType(),
                          m.getRhs().getType().getElementType());
  };
  SmallVector<MatmulOp> products;
  SmallVector<Value> rest;
  for (Value t : terms) {
    MatmulOp m = productTerm(t, root.getType());
    if (m && (products.empty() || operandTypes(m) == operandTypes(products.front())))
      products.push_back(m);
    else
      rest.push_back(t);
  }
  if (products.size() < 2)
    return false;
  // Joining copies every operand once (K (M + N) elements in all) and saves
  // k - 1 GEMM outputs and their adds (M N each, read and written several
  // times): only when the copies are at most a quarter of that.
  auto shape = cast<RankedTensorType>(root.getType()).getShape();
  int64_t m = shape[0], n = shape[1], k = 0;
  for (MatmulOp p : products)
    k += cast<RankedTensorType>(p.getLhs().getType()).getDimSize(1);
  if (4 * k * (m + n) > static_cast<int64_t>(products.size() - 1) * m * n)
    return false;
  LLVM_DEBUG(llvm::dbgs() << "merak-fuse-gemm-sums: " << products.size()
                          << " products joined, contraction " << k << "\n");
  OpBuilder b(root);
  Location loc = root.getLoc();
  SmallVector<Value> lhs, rhs;
  for (MatmulOp p : products) {
    lhs.push_back(p.getLhs());
    rhs.push_back(p.getRhs());
  }
  Value sum = MatmulOp::create(b, loc, root.getType(), join(b, loc, lhs, 1), join(b, loc, rhs, 0));
  for (Value t : rest)
    sum = AddOp::create(b, loc, root.getType(), sum, t);
  root.getResult().replaceAllUsesWith(sum);
  // The adds first (root to leaves, each read only by the one before it),
  // then the products and the transposes and constants nothing reads any
  // more.
  for (Operation *op : adds)
    op->erase();
  // Each feeding op once (a product may read one value on both sides).
  llvm::SetVector<Operation *> feeders;
  for (MatmulOp p : products) {
    for (Value v : {p.getLhs(), p.getRhs()})
      if (Operation *def = v.getDefiningOp(); def && isa<TransposeOp, ConstantOp>(def))
        feeders.insert(def);
    p.erase();
  }
  for (Operation *def : feeders)
    if (def->use_empty())
      def->erase();
  return true;
}

struct FuseGemmSumsPass : public mlir::merak::impl::MerakFuseGemmSumsBase<FuseGemmSumsPass> {
  void runOnOperation() override {
    SmallVector<AddOp> roots;
    getOperation().walk([&](AddOp add) {
      if (isPlainAdd(add) && !isInnerAdd(add) &&
          cast<RankedTensorType>(add.getType()).getRank() == 2)
        roots.push_back(add);
    });
    for (AddOp root : roots)
      fuseSum(root);
  }
};

} // namespace
