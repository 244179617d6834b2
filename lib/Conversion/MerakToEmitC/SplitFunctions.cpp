//===- SplitFunctions.cpp - merak-split-emitc-functions -------------------===//
//
// Splits a long EmitC function into static parts of at most `max-calls`
// calls, which the original calls in order:
//
//   extern "C" void merak_train_step(char* v1, char* v2, const char* v3) {
//     char* v4 = v2 + 64;
//     gather(..., v4, ...);
//     ...                                    // 170k lines
//   }
// becomes
//   static void merak_train_step_part0(char* v1, char* v2, const char* v3) {
//     char* v4 = v2 + 64;
//     gather(..., v4, ...);
//     ...                                    // the first max-calls calls
//   }
//   static void merak_train_step_part1(char* v1, char* v2, const char* v3) {
//     char* v4 = v2 + 64;                    // read here, defined in part 0:
//     ...                                    // computed again
//   }
//   extern "C" void merak_train_step(char* v1, char* v2, const char* v3) {
//     merak_train_step_part0(v1, v2, v3);
//     merak_train_step_part1(v1, v2, v3);
//   }
//
// clang -O0 is superlinear in one function's size (a 2-layer Mamba at
// sequence 2048: 170k lines, 220 s whole, 15 s in parts of ~1000 lines;
// GPT-2-sized steps of 10k lines: 1.3 s whole, 1.0 s split).
//
// What crosses parts is merak-to-emitc's pointer arithmetic only: literals,
// a region base or the IO table plus a literal (emitc.add), an IO table
// entry (emitc.subscript, emitc.load; the runtime fills the table before
// the call and no kernel writes it). A function with any other op outside
// its calls is left whole, so nothing whose value could change between
// parts is ever recomputed.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKSPLITEMITCFUNCTIONS
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-split-emitc-functions"

using namespace mlir;

namespace {
bool isCall(Operation *op) {
  return isa<emitc::CallOpaqueOp, emitc::CallOp>(op) && op->getNumResults() == 0;
}

/// The pointer arithmetic a later part may compute again.
bool isRecomputable(Operation *op) {
  return isa<emitc::LiteralOp, emitc::AddOp, emitc::SubscriptOp, emitc::LoadOp>(op);
}

/// The function's ops cut into parts of at most `maxCalls` calls (the
/// terminator not included), or nothing when it is short or holds an op a
/// part could not compute again.
SmallVector<SmallVector<Operation *>> cutIntoParts(emitc::FuncOp fn, int64_t maxCalls) {
  if (!fn.getBody().hasOneBlock())
    return {};
  Block &body = fn.getBody().front();
  auto ret = dyn_cast<emitc::ReturnOp>(body.getTerminator());
  if (!ret || ret->getNumOperands() != 0)
    return {};
  int64_t calls = 0;
  for (Operation &op : body.without_terminator()) {
    if (isCall(&op))
      ++calls;
    else if (!isRecomputable(&op)) {
      LLVM_DEBUG(llvm::dbgs() << "left whole: @" << fn.getSymName() << " holds " << op.getName()
                              << "\n");
      return {};
    }
  }
  if (calls <= maxCalls)
    return {};
  SmallVector<SmallVector<Operation *>> parts(1);
  int64_t inPart = 0;
  for (Operation &op : body.without_terminator()) {
    if (inPart == maxCalls) {
      parts.emplace_back();
      inPart = 0;
    }
    parts.back().push_back(&op);
    inPart += isCall(&op);
  }
  return parts;
}

/// Builds the parts of `fn` and makes `fn` call them.
class Splitter {
public:
  Splitter(emitc::FuncOp fn, SymbolTable &symbols) : fn(fn), symbols(symbols) {}

  void split(ArrayRef<SmallVector<Operation *>> parts) {
    Block &body = fn.getBody().front();
    SmallVector<emitc::FuncOp> made;
    for (auto [k, ops] : llvm::enumerate(parts))
      made.push_back(makePart(k, ops));
    OpBuilder b = OpBuilder::atBlockTerminator(&body);
    for (emitc::FuncOp part : made)
      emitc::CallOp::create(b, fn.getLoc(), part, body.getArguments());
  }

private:
  /// A `static void <fn>_part<k>` before `fn` holding `ops`, their operands
  /// from outside it computed again at its top.
  emitc::FuncOp makePart(size_t k, ArrayRef<Operation *> ops) {
    OpBuilder b(fn);
    auto part = emitc::FuncOp::create(b, fn.getLoc(), (fn.getSymName() + "_part" + Twine(k)).str(),
                                      fn.getFunctionType());
    part.setSpecifiersAttr(b.getStrArrayAttr({"static"}));
    symbols.insert(part, Block::iterator(fn)); // unique name, before fn
    Block *entry = part.addEntryBlock();
    b.setInsertionPointToEnd(entry);
    auto ret = emitc::ReturnOp::create(b, fn.getLoc(), Value());
    for (Operation *op : ops)
      op->moveBefore(ret);

    local.clear();
    arguments = entry->getArguments();
    b.setInsertionPoint(ops.front());
    for (Operation *op : ops)
      for (OpOperand &use : op->getOpOperands())
        if (Operation *def = use.get().getDefiningOp(); !def || def->getParentOp() != part)
          use.set(recompute(use.get(), b));
    return part;
  }

  /// `v` (an argument of fn or of an earlier part, or a value of an
  /// earlier part) in the part being built.
  Value recompute(Value v, OpBuilder &b) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return arguments[arg.getArgNumber()];
    if (Value have = local.lookup(v))
      return have;
    Operation *def = v.getDefiningOp();
    IRMapping operands;
    for (Value operand : def->getOperands())
      operands.map(operand, recompute(operand, b));
    Value copy = b.clone(*def, operands)->getResult(0);
    local[v] = copy;
    return copy;
  }

  emitc::FuncOp fn;
  SymbolTable &symbols;
  ValueRange arguments;               ///< the current part's
  llvm::DenseMap<Value, Value> local; ///< earlier parts' values -> the current part's
};

struct MerakSplitEmitCFunctionsPass
    : merak::impl::MerakSplitEmitCFunctionsBase<MerakSplitEmitCFunctionsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (maxCalls < 1) {
      getOperation().emitError("merak-split-emitc-functions: max-calls must be at least 1, not ")
          << maxCalls.getValue();
      return signalPassFailure();
    }
    SymbolTable symbols(getOperation());
    SmallVector<emitc::FuncOp> fns(getOperation().getOps<emitc::FuncOp>());
    for (emitc::FuncOp fn : fns) {
      SmallVector<SmallVector<Operation *>> parts = cutIntoParts(fn, maxCalls);
      if (!parts.empty())
        Splitter(fn, symbols).split(parts);
    }
  }
};
} // namespace
