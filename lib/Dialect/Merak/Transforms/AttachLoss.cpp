//===- AttachLoss.cpp - merak-attach-loss ---------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKATTACHLOSS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-attach-loss"

using namespace mlir;
using namespace mlir::merak;

/// The index of the result or argument named `name` (merak.name), or -1.
static int findNamed(ArrayRef<DictionaryAttr> attrs, StringRef name) {
  for (auto [i, dict] : llvm::enumerate(attrs))
    if (dict)
      if (auto n = dict.getAs<StringAttr>("merak.name"); n && n.getValue() == name)
        return i;
  return -1;
}

namespace {
struct MerakAttachLossPass : merak::impl::MerakAttachLossBase<MerakAttachLossPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fwd = module.lookupSymbol<func::FuncOp>("forward");
    if (!fwd) {
      module.emitError("merak-attach-loss: no func.func @forward");
      return signalPassFailure();
    }
    if (module.lookupSymbol("loss")) {
      module.emitError("merak-attach-loss: the module already has a @loss");
      return signalPassFailure();
    }
    if (loss != "cross-entropy" && loss != "model-output") {
      module.emitError("merak-attach-loss: unknown loss '")
          << loss << "' (expected cross-entropy or model-output)";
      return signalPassFailure();
    }
    // A training step over an empty batch would "train" at loss 0.
    for (BlockArgument arg : fwd.getArguments())
      if (auto t = dyn_cast<RankedTensorType>(arg.getType());
          t && t.hasStaticShape() && t.getNumElements() == 0) {
        auto name = fwd.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "merak.name");
        fwd.emitError("merak-attach-loss: input '")
            << (name ? name.getValue() : StringRef("#" + std::to_string(arg.getArgNumber())))
            << "' of type " << t
            << " has no elements; a training step needs a batch of at least 1";
        return signalPassFailure();
      }
    OpBuilder mb(fwd);
    mb.setInsertionPointAfter(fwd);
    auto fn = cast<func::FuncOp>(mb.clone(*fwd));
    fn.setSymName("loss");
    if (failed(build(fn)))
      return signalPassFailure();
  }

  /// `global-mean`: the piece's mean `loss` becomes `loss * n / label_count`
  /// (0 when the piece counts no label, whose mean is 0/0), with `n` its
  /// labels other than the ignore_index and `label_count` a new argument:
  /// the step's count over its dp x micro-batch pieces. The pieces' average
  /// is then the sum over the step's counted labels over their number, the
  /// serial program's mean; without ignored labels n == label_count and the
  /// factor is exactly 1.
  LogicalResult weighByLabelCount(func::FuncOp fn, OpBuilder &b, Value labels, Value &loss) {
    Location loc = fn.getLoc();
    auto labelsType = cast<RankedTensorType>(labels.getType());
    auto lossType = cast<RankedTensorType>(loss.getType());
    auto f32 = b.getF32Type();
    auto scalar = RankedTensorType::get({}, f32);
    auto name = b.getNamedAttr("merak.name", b.getStringAttr(kLabelCountInput));
    if (failed(fn.insertArgument(fn.getNumArguments(), scalar, b.getDictionaryAttr(name), loc)))
      return failure();
    Value labelCount = fn.getArguments().back();
    Type labelElem = labelsType.getElementType();
    Value ignore = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, labelElem),
                               APInt(labelElem.getIntOrFloatBitWidth(), kTorchIgnoreIndex,
                                     /*isSigned=*/true)));
    Value counted = NeOp::create(b, loc, labels, ignore);
    Value ones = CastOp::create(b, loc, RankedTensorType::get(labelsType.getShape(), f32), counted);
    Value n = ReduceSumOp::create(
        b, loc, ones, llvm::to_vector(llvm::seq<int64_t>(0, labelsType.getRank())), false);
    Value weight = DivOp::create(b, loc, n, labelCount);
    if (lossType.getElementType() != f32)
      weight = CastOp::create(b, loc, lossType, weight);
    auto zeroOf = [&](RankedTensorType t) -> Value {
      return ConstantOp::create(b, loc,
                                DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)));
    };
    Value some = GtOp::create(b, loc, n, zeroOf(scalar));
    Value mean = WhereOp::create(b, loc, some, loss, zeroOf(lossType));
    loss = MulOp::create(b, loc, mean, weight);
    return success();
  }

  LogicalResult build(func::FuncOp fn) {
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    if (ret.getNumOperands() == 0)
      return fn.emitError("merak-attach-loss: @forward returns nothing");
    SmallVector<DictionaryAttr> resultAttrs;
    fn.getAllResultAttrs(resultAttrs);
    int which = 0;
    if (!logits.empty()) {
      which = findNamed(resultAttrs, logits);
      if (which < 0)
        return fn.emitError("merak-attach-loss: @forward has no output named '")
               << logits << "'";
    }
    Value out = ret.getOperand(which);
    // merak-tensor-parallel left these logits split over tp on the class
    // axis (vocabulary parallelism): the loss is the vocab-parallel one.
    StringAttr vocabGroup = fn.getResultAttrOfType<StringAttr>(which, kVocabParallelAttr);
    IntegerAttr vocabClasses = fn.getResultAttrOfType<IntegerAttr>(which, kVocabClassesAttr);
    if (vocabGroup && loss != "cross-entropy")
      return fn.emitError("merak-attach-loss: the logits are split over tp (vocabulary "
                          "parallelism) but the loss is '")
             << loss << "'";
    auto outType = cast<RankedTensorType>(out.getType());
    OpBuilder b(ret);
    Value lossValue;
    if (loss == "model-output") {
      if (outType.getRank() != 0 || !isa<FloatType>(outType.getElementType()))
        return fn.emitError("merak-attach-loss: loss=model-output needs a scalar "
                            "floating-point output, got ")
               << outType;
      lossValue = out;
    } else {
      if (outType.getRank() < 2 || !isa<FloatType>(outType.getElementType()))
        return fn.emitError("merak-attach-loss: logits must be a floating-point "
                            "tensor of rank >= 2, got ")
               << outType;
      SmallVector<int64_t> labelShape(outType.getShape().drop_back());
      Value labelsValue;
      if (labels == "next-token") {
        auto type = RankedTensorType::get(labelShape, b.getI64Type());
        if (failed(fn.insertArgument(fn.getNumArguments(), type,
                                     b.getDictionaryAttr(b.getNamedAttr(
                                         "merak.name", b.getStringAttr("labels"))),
                                     fn.getLoc())))
          return failure();
        labelsValue = fn.getArguments().back();
      } else {
        SmallVector<DictionaryAttr> argAttrs;
        fn.getAllArgAttrs(argAttrs);
        int idx = findNamed(argAttrs, labels);
        if (idx < 0)
          return fn.emitError("merak-attach-loss: no graph input named '")
                 << labels << "' for the labels";
        labelsValue = fn.getArgument(idx);
        auto lt = cast<RankedTensorType>(labelsValue.getType());
        if (!isa<IntegerType>(lt.getElementType()) || lt.getElementType().isInteger(1) ||
            lt.getShape() != ArrayRef<int64_t>(labelShape))
          return fn.emitError("merak-attach-loss: labels '")
                 << labels << "' must be integers shaped like the logits without "
                              "the class axis, got "
                 << lt;
      }
      // The labels' range (the manifest's index_limit): every class of the
      // logits, all tp shards of them under vocabulary parallelism.
      int64_t classes = vocabClasses ? vocabClasses.getInt()
                                     : outType.getShape().back() *
                                           (vocabGroup ? getMesh(fn->getParentOfType<ModuleOp>()).tp
                                                       : 1);
      // Labels equal to -100 (PyTorch's ignore_index: padded positions, a
      // tokenizer's masked labels) count for nothing, as in F.cross_entropy.
      unsigned labelsArg = cast<BlockArgument>(labelsValue).getArgNumber();
      if (!ShapedType::isDynamic(outType.getShape().back()))
        fn.setArgAttr(labelsArg, kIndexLimitAttr, b.getI64IntegerAttr(classes));
      fn.setArgAttr(labelsArg, kIgnoreIndexAttr, b.getI64IntegerAttr(kTorchIgnoreIndex));
      lossValue = CrossEntropyOp::create(
          b, fn.getLoc(), out, labelsValue, b.getI64IntegerAttr(outType.getRank() - 1),
          b.getStringAttr("mean"), b.getI64IntegerAttr(kTorchIgnoreIndex), vocabGroup,
          vocabClasses);
      if (globalMean && failed(weighByLabelCount(fn, b, labelsValue, lossValue)))
        return failure();
    }
    func::ReturnOp::create(b, ret.getLoc(), lossValue);
    ret.erase();
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(),
                                 {lossValue.getType()}));
    SmallVector<DictionaryAttr> names{
        b.getDictionaryAttr(b.getNamedAttr("merak.name", b.getStringAttr("loss")))};
    fn.setAllResultAttrs(ArrayRef<DictionaryAttr>(names));
    return success();
  }
};
} // namespace
