//===- MerakToEmitC.cpp - merak-to-emitc ----------------------------------===//
//
// Lowers the function planned by merak-plan-memory to one EmitC function of
// runtime calls (see Passes.td and runtime/include/merak_rt/kernels.def):
// each op through its LowerToRuntimeOpInterface rule (the external models
// of LoweringModels.cpp), func.return by copying returned values into their
// result slots.
//
// A pipeline fragment reads its arguments and writes its results through
// the runtime's pointer table `IO` (runtime/include/merak_rt/pipeline.h):
// argument i at IO[i], result j at IO[arguments + j]. The op computing a
// returned value writes it there directly, so the runtime can hand the
// fragment its stash and message buffers instead of copying them into and
// out of the arena; a returned value that is not computed here (an
// argument, a parameter, a constant, or a value returned twice) is copied.
//
//===----------------------------------------------------------------------===//
#include "CallBuilder.h"
#include "LoweringContext.h"

#include "merak/Conversion/MerakToEmitC.h"
#include "merak/Conversion/MerakToEmitC/LowerToRuntimeOpInterface.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKTOEMITC
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-to-emitc"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::emitc_lowering;

namespace {
/// True for ops that emit at least one kernel call (the trace's op list):
/// what an op's lowering rule says; an op without one is reported as
/// unsupported, after its opMark.
bool emitsKernel(Operation *op) {
  if (isa<func::ReturnOp>(op))
    return false;
  auto lowering = dyn_cast<LowerToRuntimeOpInterface>(op);
  return !lowering || lowering.emitsKernel();
}

/// Returned values in parameter or constant storage are copied to their
/// result slots (with `io`, the fragment's IO entries).
LogicalResult lowerReturn(func::ReturnOp ret, func::FuncOp fn, Emitter &e, bool io) {
  auto slots = fn->getAttrOfType<DenseI64ArrayAttr>(kResultOffsetsAttr);
  if (!slots || slots.size() != (int64_t)ret.getNumOperands())
    return fn.emitError("merak-to-emitc: the function has no planned result offsets");
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    FailureOr<Value> src = e.pointer(v);
    if (failed(src))
      return failure();
    Value dst = io ? e.ioPointer(fn.getNumArguments() + i)
                   : e.pointer(PlannedBuffer{PlannedBuffer::Arena, slots[i]});
    if (*src != dst)
      e.call(kernels::copyBytes).ptr(dst).ptr(*src).i64(byteSize(v.getType())).emit();
  }
  return success();
}

/// The IO entries of fragment `fn`'s buffers: argument i at i; a returned
/// value's buffer at arguments + j for its first result j when this
/// function computes it into the arena (not an argument, parameter or
/// constant storage, or a started collective's request).
llvm::DenseMap<Value, int64_t> ioSlots(func::FuncOp fn) {
  llvm::DenseMap<Value, int64_t> slots;
  for (BlockArgument arg : fn.getArguments())
    slots[arg] = arg.getArgNumber();
  Operation *ret = fn.getBody().front().getTerminator();
  for (auto [j, v] : llvm::enumerate(ret->getOperands())) {
    Value root = viewRoot(v);
    if (!root.getDefiningOp() || slots.count(root) || !hasOwnArenaBuffer(root))
      continue;
    slots[root] = fn.getNumArguments() + j;
  }
  return slots;
}

/// Emits `extern "C" void name(char *A, char *P, const char *C)` for `fn`
/// at the end of the module (with `io`, a pipeline fragment's
/// `(char *A, char *P, const char *C, char **IO)`); opMark indices
/// continue from `index`. `collectives` is set when it calls an entry
/// point of merak_rt/collectives.h.
LogicalResult lowerFunction(ModuleOp module, func::FuncOp fn, StringRef name, int64_t &index,
                            bool cuda, bool io, bool &collectives) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = fn.getLoc();
  auto charPtr = emitc::PointerType::get(emitc::OpaqueType::get(ctx, "char"));
  auto constCharPtr = emitc::PointerType::get(emitc::OpaqueType::get(ctx, "const char"));
  SmallVector<Type> params{charPtr, charPtr, constCharPtr};
  if (io)
    params.push_back(emitc::PointerType::get(charPtr));
  auto out = emitc::FuncOp::create(b, loc, name, FunctionType::get(ctx, params, {}));
  out.setSpecifiersAttr(b.getStrArrayAttr({"extern \"C\""}));
  Block *body = out.addEntryBlock();
  b.setInsertionPointToStart(body);

  SymbolTableCollection symbols;
  Emitter e(b, loc, body->getArgument(0), body->getArgument(1), body->getArgument(2), symbols);
  if (io)
    e.setIo(body->getArgument(3), ioSlots(fn));
  if (cuda)
    e.calleePrefix = "gpu::";
  LoweringContext lctx(symbols, cuda);
  llvm::SetVector<StringRef> unsupported;
  bool failedAny = false;
  for (Operation &op : fn.getBody().front()) {
    e.loc = op.getLoc();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (failed(lowerReturn(ret, fn, e, io)))
        failedAny = true;
      break;
    }
    const bool kernel = emitsKernel(&op);
    if (kernel)
      e.call(kernels::opMark).i64(index++).emit();
    auto lowering = dyn_cast<LowerToRuntimeOpInterface>(op);
    FailureOr<Lowering> lowered =
        lowering ? lowering.lowerToRuntime(e, lctx) : FailureOr<Lowering>(Lowering::NoKernel);
    if (failed(lowered))
      failedAny = true;
    else if (*lowered == Lowering::NoKernel)
      unsupported.insert(op.getName().getStringRef());
    // MPI's non-blocking collectives progress only inside MPI calls.
    if (lctx.requests.inFlight() && kernel && (!lowering || lowering.pollsCollectives()))
      e.call(kernels::collectiveProgress).emit();
  }
  collectives |= e.calledCollective;
  if (!unsupported.empty()) {
    std::string names;
    llvm::raw_string_ostream os(names);
    llvm::interleave(unsupported, os, ", ");
    return fn.emitError("merak-to-emitc: no ") << (cuda ? "CUDA" : "CPU") << " kernel for "
                                                 << names;
  }
  if (failedAny)
    return failure();
  e.call(kernels::opMark).i64(-1).emit();
  emitc::ReturnOp::create(b, loc, Value());
  return success();
}

struct MerakToEmitCPass : merak::impl::MerakToEmitCBase<MerakToEmitCPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerMerakToEmitCExternalModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || !fn->hasAttr(kArenaBytesAttr)) {
      module.emitError("merak-to-emitc: no function @")
          << entry << " planned by merak-plan-memory";
      return signalPassFailure();
    }
    if (target != "cpu" && target != "cuda") {
      module.emitError("merak-to-emitc: unknown target '") << target << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    if (failed(lowerToEmitC(module, {{fn, "merak_train_step"}}, target)))
      signalPassFailure();
  }
};
} // namespace

namespace mlir::merak {
SmallVector<Operation *> kernelOps(func::FuncOp fn) {
  SmallVector<Operation *> ops;
  for (Operation &op : fn.getBody().front())
    if (emitsKernel(&op))
      ops.push_back(&op);
  return ops;
}
} // namespace mlir::merak

LogicalResult mlir::merak::lowerToEmitC(ModuleOp module,
                                        ArrayRef<std::pair<func::FuncOp, std::string>> fns,
                                        StringRef target, bool fragmentIo) {
  const bool cuda = target == "cuda";
  if (fns.empty())
    return module.emitError("merak-to-emitc: nothing to lower");
  module.getContext()->getOrLoadDialect<emitc::EmitCDialect>();
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  Location loc = func::FuncOp(fns.front().first).getLoc();
  auto opsHeader = emitc::IncludeOp::create(
      b, loc, cuda ? "merak_rt/cuda/ops.h" : "merak_rt/ops.h", /*is_standard_include=*/false);
  emitc::IncludeOp::create(b, loc, "cmath", /*is_standard_include=*/true);
  if (cuda) {
    emitc::VerbatimOp::create(b, loc, "namespace gpu = merak::rt::gpu;");
    emitc::VerbatimOp::create(b, loc, "using namespace merak::rt::gpu;");
  } else {
    emitc::VerbatimOp::create(b, loc, "using namespace merak::rt::cpu;");
  }
  int64_t index = 0;
  bool collectives = false;
  for (auto &[fn, name] : fns)
    if (failed(lowerFunction(module, fn, name, index, cuda, fragmentIo, collectives)))
      return failure();
  // The collectives' header only where some function calls one.
  if (collectives) {
    b.setInsertionPointAfter(opsHeader);
    emitc::IncludeOp::create(b, loc,
                             cuda ? "merak_rt/cuda/collectives.h" : "merak_rt/collectives.h",
                             /*is_standard_include=*/false);
  }
  // Only the EmitC code stays.
  for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
    if (!isa<emitc::EmitCDialect>(op.getDialect()))
      op.erase();
  return success();
}
