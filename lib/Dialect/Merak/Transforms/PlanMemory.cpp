//===- PlanMemory.cpp - merak-plan-memory ---------------------------------===//
//
// The static memory plan of the generated program (see Passes.td): arena
// offsets by liveness with best-fit placement, parameter storage and constant
// storage offsets. The planned function has a single block, so program order
// is the order of its ops and a live range is an interval of op indices.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Analysis/PipelineSchedule.h"
#include "merak/Dialect/Merak/Transforms/MemoryPlan.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"
#include <map>

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKPLANMEMORY
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-plan-memory"

using namespace mlir;
using namespace mlir::merak;

int64_t mlir::merak::storageElementBytes(Type t) {
  if (t.isInteger(1))
    return 1;
  if (t.isBF16())
    return 2;
  // The runtime's types: int8/int16 and the unsigned integers (values of
  // the importer and the evaluator) are not among them.
  if (t.isF32() || t.isSignlessInteger(32))
    return 4;
  if (t.isF64() || t.isSignlessInteger(64))
    return 8;
  return 0;
}

static int64_t alignUp(int64_t n) {
  return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

/// Bytes of a tensor's buffer, aligned; every buffer takes at least one
/// alignment unit so that distinct live values never share an address.
static int64_t bufferBytes(Type type) {
  auto t = cast<RankedTensorType>(type);
  return std::max(alignUp(t.getNumElements() * storageElementBytes(t.getElementType())),
                  kBufferAlignment);
}

bool mlir::merak::isViewOp(Operation *op) { return isa<ReshapeOp, TpIdentityOp>(op); }

Value mlir::merak::viewRoot(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (isViewOp(def)) {
      value = def->getOperand(0);
      continue;
    }
    // A result an update op writes into its operand's buffer.
    auto inPlace = def->getAttrOfType<DenseI64ArrayAttr>(kInPlaceAttr);
    unsigned k = cast<OpResult>(value).getResultNumber();
    if (!inPlace || (int64_t)k >= inPlace.size() || inPlace[k] < 0 ||
        inPlace[k] >= (int64_t)def->getNumOperands())
      break;
    value = def->getOperand(inPlace[k]);
  }
  return value;
}

/// The kind of a fragment's argument or result name ("stash:3" -> "stash").
static StringRef nameKind(StringAttr name) {
  return name ? name.getValue().split(':').first : StringRef();
}

static bool isKeptKind(StringRef kind) {
  return kind == "stash" || kind == "rstash" || kind == "wstash";
}

bool mlir::merak::hasOwnArenaBuffer(Value root) {
  if (isa<RequestType>(root.getType()))
    return false; // a started collective's request: no buffer
  Operation *def = root.getDefiningOp();
  if (!def)
    return true;
  if (isa<ConstantOp>(def))
    return false;
  if (isa<GetParamOp>(def))
    return def->hasAttr(kCopyAttr);
  return true;
}

bool mlir::merak::isInPlaceFragmentArg(func::FuncOp fragment, unsigned i) {
  auto [stage, fragKind] = pipelineFragmentStageKind(fragment);
  if (stage < 0 || fragKind == "update")
    return false;
  StringRef kind = nameKind(fragment.getArgAttrOfType<StringAttr>(i, "merak.name"));
  return !kind.empty() && kind != "act" && kind != "cot" && kind != "step";
}

bool mlir::merak::isInPlaceFragmentResult(func::FuncOp fragment, unsigned i) {
  auto [stage, fragKind] = pipelineFragmentStageKind(fragment);
  if (stage < 0 || fragKind == "update")
    return false;
  StringRef kind = nameKind(fragment.getResultAttrOfType<StringAttr>(i, "merak.name"));
  if (!isKeptKind(kind))
    return false;
  for (unsigned a = 0; a < fragment.getNumArguments(); ++a)
    if (nameKind(fragment.getArgAttrOfType<StringAttr>(a, "merak.name")) == kind)
      return false;
  return true;
}

FailureOr<PlannedBuffer> mlir::merak::getPlannedBuffer(Value value,
                                                       SymbolTableCollection &symbols) {
  value = viewRoot(value);
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto fn = cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (auto off = fn.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kOffsetAttr);
        off && off.getInt() >= 0)
      return PlannedBuffer{PlannedBuffer::Arena, off.getInt()};
    return emitError(arg.getLoc(), "argument ") << arg.getArgNumber() << " has no planned offset";
  }
  Operation *op = value.getDefiningOp();
  if (auto get = dyn_cast<GetParamOp>(op); get && !op->hasAttr(kCopyAttr)) {
    auto param = symbols.lookupNearestSymbolFrom<ParamOp>(op, get.getNameAttr());
    auto off = param ? param->getAttrOfType<IntegerAttr>(kOffsetAttr) : IntegerAttr();
    if (!off)
      return op->emitError("parameter has no planned storage offset");
    return PlannedBuffer{PlannedBuffer::Params, off.getInt()};
  }
  if (isa<ConstantOp>(op)) {
    auto off = op->getAttrOfType<IntegerAttr>(kOffsetAttr);
    if (!off)
      return op->emitError("constant has no planned storage offset");
    return PlannedBuffer{PlannedBuffer::Consts, off.getInt()};
  }
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
  unsigned i = cast<OpResult>(value).getResultNumber();
  if (!offsets || (int64_t)i >= offsets.size() || offsets[i] < 0)
    return op->emitError("result ") << i << " has no planned arena offset";
  return PlannedBuffer{PlannedBuffer::Arena, offsets[i]};
}

/// The values of pipeline fragment `fn` that live in the runner's buffers
/// (isInPlaceFragmentArg/Result), not in the arena: those arguments, and a
/// result's value when it is computed here into the arena (not a request,
/// a constant or a parameter's storage) and returned once. Run after the
/// get_param copies are marked (kCopyAttr).
static llvm::DenseSet<Value> inPlaceValues(func::FuncOp fn) {
  llvm::DenseSet<Value> inPlace;
  for (BlockArgument arg : fn.getArguments())
    if (isInPlaceFragmentArg(fn, arg.getArgNumber()))
      inPlace.insert(arg);
  Operation *ret = fn.getBody().front().getTerminator();
  DenseMap<Value, unsigned> returned;
  for (Value v : ret->getOperands())
    ++returned[viewRoot(v)];
  for (auto [j, v] : llvm::enumerate(ret->getOperands())) {
    Value root = viewRoot(v);
    Operation *def = root.getDefiningOp();
    if (def && returned[root] == 1 && isInPlaceFragmentResult(fn, j) && hasOwnArenaBuffer(root))
      inPlace.insert(root);
  }
  return inPlace;
}

namespace {
/// Best-fit placement over a coalescing free list: blocks by offset (to merge
/// neighbours) and by size (to find the best fit), both O(log n).
class ArenaAllocator {
public:
  int64_t allocate(int64_t size) {
    auto fit = bySize.lower_bound(size);
    if (fit != bySize.end()) {
      int64_t off = fit->second, blockSize = fit->first;
      erase(off, blockSize);
      if (blockSize > size)
        insert(off + size, blockSize - size);
      return off;
    }
    // Extend the free block at the top, if any, rather than leave it behind.
    if (!byOffset.empty()) {
      auto last = std::prev(byOffset.end());
      if (last->first + last->second == top) {
        int64_t off = last->first;
        erase(off, last->second);
        top = off + size;
        peak = std::max(peak, top);
        return off;
      }
    }
    int64_t off = top;
    top += size;
    peak = std::max(peak, top);
    return off;
  }

  void release(int64_t off, int64_t size) {
    auto next = byOffset.lower_bound(off);
    if (next != byOffset.end() && off + size == next->first) {
      size += next->second;
      erase(next->first, next->second);
    }
    auto after = byOffset.lower_bound(off);
    if (after != byOffset.begin()) {
      auto prev = std::prev(after);
      if (prev->first + prev->second == off) {
        off = prev->first;
        size += prev->second;
        erase(prev->first, prev->second);
      }
    }
    if (off + size == top) {
      top = off; // the top shrinks back; the bytes stay counted in peak
      return;
    }
    insert(off, size);
  }

  int64_t peakBytes() const { return peak; }

private:
  void insert(int64_t off, int64_t size) {
    byOffset[off] = size;
    bySize.emplace(size, off);
  }
  void erase(int64_t off, int64_t size) {
    byOffset.erase(off);
    auto [lo, hi] = bySize.equal_range(size);
    for (auto it = lo; it != hi; ++it)
      if (it->second == off) {
        bySize.erase(it);
        return;
      }
  }

  std::map<int64_t, int64_t> byOffset;
  std::multimap<int64_t, int64_t> bySize;
  int64_t top = 0, peak = 0;
};

struct MerakPlanMemoryPass : merak::impl::MerakPlanMemoryBase<MerakPlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn) {
      module.emitError("merak-plan-memory: no function @") << entry;
      return signalPassFailure();
    }
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError("merak-plan-memory: the function must have a single block");
      return signalPassFailure();
    }
    if (failed(checkTypes(fn)) || failed(planStorage(module, {fn})) || failed(planArena(fn)))
      signalPassFailure();
  }

  LogicalResult checkType(Location loc, Type type) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || !t.hasStaticShape())
      return emitError(loc, "merak-plan-memory: not a static tensor: ") << type;
    if (storageElementBytes(t.getElementType()) == 0)
      return emitError(loc, "merak-plan-memory: element type ")
             << t.getElementType() << " is not supported by code generation (f32, f64, bf16, i64, i32, i1)";
    return success();
  }

  LogicalResult checkTypes(func::FuncOp fn) {
    for (BlockArgument arg : fn.getArguments())
      if (failed(checkType(arg.getLoc(), arg.getType())))
        return failure();
    WalkResult r = fn.walk([&](Operation *op) {
      for (Value v : op->getResults())
        if (!isa<RequestType>(v.getType()) && failed(checkType(op->getLoc(), v.getType())))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return failure(r.wasInterrupted());
  }

  /// True when a parameter starts as all zeros (optimizer state): the
  /// program zero-fills it instead of carrying its bytes.
  static bool startsAtZero(ParamOp p) {
    auto dense = dyn_cast<DenseElementsAttr>(p.getInitialValue());
    if (!dense || !dense.isSplat())
      return false;
    Type et = dense.getElementType();
    if (isa<FloatType>(et))
      return dense.getSplatValue<APFloat>().isPosZero();
    return dense.getSplatValue<APInt>().isZero();
  }

  /// Parameter storage (declaration order, the zero-initialised ones last)
  /// and constant storage.
  LogicalResult planStorage(ModuleOp module, ArrayRef<func::FuncOp> fns) {
    Builder b(module.getContext());
    // Three groups: initialised from the data as they are; tensor-parallel
    // shards (the program copies its shard out of the full tensor in the
    // data); zero-initialised.
    auto group = [](ParamOp p) {
      return startsAtZero(p) ? 2 : getShardLayout(p) ? 1 : 0;
    };
    int64_t params = 0, initBytes = 0;
    for (int g : {0, 1, 2}) {
      for (auto param : module.getOps<ParamOp>()) {
        if (group(param) != g)
          continue;
        if (failed(checkType(param.getLoc(), param.getType())))
          return failure();
        param->setAttr(kOffsetAttr, b.getI64IntegerAttr(params));
        params += bufferBytes(param.getType());
      }
      if (g == 0)
        initBytes = params;
    }
    module->setAttr(kParamsInitBytesAttr, b.getI64IntegerAttr(initBytes));
    int64_t consts = 0;
    for (func::FuncOp fn : fns)
      fn.walk([&](ConstantOp c) {
        c->setAttr(kOffsetAttr, b.getI64IntegerAttr(consts));
        consts += bufferBytes(c.getType());
      });
    module->setAttr(kParamsBytesAttr, b.getI64IntegerAttr(params));
    module->setAttr(kConstsBytesAttr, b.getI64IntegerAttr(consts));
    return success();
  }

  /// `result` accumulated further by in-place ops, each its only reader at
  /// one of their in-place operands (a tied weight's two gradients: an
  /// embedding's scatter, then the head's GEMM, into one accumulator): the
  /// last of those results. Such a reader's operand is granted its buffer
  /// (nothing else reads it), so the chain shares the parameter's storage.
  static Value accumulatedInPlace(Value result) {
    while (result.hasOneUse()) {
      Operation *user = *result.getUsers().begin();
      auto next = dyn_cast<InPlaceOpInterface>(user);
      if (!next)
        break;
      Value to;
      for (auto [r, o] : next.getInPlaceCandidates())
        if (user->getOperand(o) == result && user->getResult(r).getType() == result.getType())
          to = user->getResult(r);
      if (!to)
        break;
      result = to;
    }
    return result;
  }

  /// Marks the results of in-place ops (InPlaceOpInterface: fused optimizer
  /// updates, accumulations) that can be written into their operand's buffer (kInPlaceAttr): the
  /// operand is not a view or an argument, and its buffer is not read after the update. An arena
  /// operand: no use of it (or of a view of it) after the op. A parameter's
  /// storage (a get_param not copied): every read of that parameter ends at
  /// the op, and the result (or what in-place ops accumulate into it,
  /// accumulatedInPlace) is only written back to the same parameter by
  /// set_params after it (which then copy nothing). O(ops + uses).
  LogicalResult planInPlace(Block &block, DenseMap<Operation *, int64_t> &index) {
    Builder b(block.getParentOp()->getContext());
    for (Operation &op : block)
      op.removeAttr(kInPlaceAttr);
    // Last use of every value with its plain views (no in-place aliasing yet).
    DenseMap<Value, int64_t> lastUse;
    llvm::StringMap<int64_t> lastRead; // of any get_param of a parameter
    for (Operation &op : block)
      for (Value v : op.getOperands()) {
        Value root = viewRoot(v);
        int64_t &last = lastUse[root];
        last = std::max(last, index[&op]);
        if (auto get = root.getDefiningOp<GetParamOp>()) {
          int64_t &read = lastRead[get.getName()];
          read = std::max(read, index[&op]);
        }
      }
    llvm::StringMap<unsigned> writes;
    for (Operation &op : block)
      if (auto set = dyn_cast<SetParamOp>(op))
        ++writes[set.getName()];
    for (Operation &op : block) {
      auto inPlaceOp = dyn_cast<InPlaceOpInterface>(op);
      if (!inPlaceOp)
        continue;
      auto pairs = inPlaceOp.getInPlaceCandidates();
      if (pairs.empty())
        continue;
      int64_t i = index[&op];
      SmallVector<int64_t> inPlace(op.getNumResults(), -1);
      SmallPtrSet<Value, 8> taken;
      bool any = false;
      for (auto [r, o] : pairs) {
        Value operand = op.getOperand(o), result = op.getResult(r);
        // Not a view; an operand accumulated in place before (its buffer
        // another's, accumulatedInPlace) may pass its buffer on.
        Operation *def = operand.getDefiningOp();
        if (!def || isViewOp(def) || operand.getType() != result.getType() ||
            !taken.insert(operand).second)
          continue;
        if (isa<ConstantOp>(def) || lastUse[operand] != i)
          continue;
        if (auto get = dyn_cast<GetParamOp>(def)) {
          // Parameter storage: nothing reads the old value later, and the
          // only writes of the parameter are of this result.
          StringRef name = get.getName();
          Value written = accumulatedInPlace(result);
          if (lastRead[name] != i || writes[name] == 0 || written.use_empty() ||
              !llvm::all_of(written.getUsers(),
                            [&](Operation *user) {
                              auto set = dyn_cast<SetParamOp>(user);
                              return set && set.getName() == name;
                            }) ||
              writes[name] !=
                  (unsigned)std::distance(written.getUsers().begin(), written.getUsers().end()))
            continue;
        }
        inPlace[r] = o;
        any = true;
      }
      if (any)
        op.setAttr(kInPlaceAttr, b.getDenseI64ArrayAttr(inPlace));
    }
    return success();
  }

  LogicalResult planArena(func::FuncOp fn) {
    Block &block = fn.getBody().front();
    Builder b(fn.getContext());

    // Program order and alias roots (reshape is a view of its operand).
    DenseMap<Operation *, int64_t> index;
    int64_t n = 0;
    for (Operation &op : block)
      index[&op] = n++;
    auto rootOf = [](Value v) { return viewRoot(v); };

    if (failed(planInPlace(block, index)))
      return failure();

    // Last use of every alias group.
    DenseMap<Value, int64_t> lastUse;
    for (Operation &op : block)
      for (Value v : op.getOperands()) {
        int64_t &last = lastUse[rootOf(v)];
        last = std::max(last, index[&op]);
      }

    // get_param values still read after a set_param of the same parameter
    // need a private copy.
    llvm::StringMap<SmallVector<int64_t>> writes;
    for (Operation &op : block)
      if (auto set = dyn_cast<SetParamOp>(op))
        writes[set.getName()].push_back(index[&op]);
    for (Operation &op : block)
      if (auto get = dyn_cast<GetParamOp>(op)) {
        auto it = writes.find(get.getName());
        if (it == writes.end() || !lastUse.count(get.getResult()))
          continue;
        int64_t from = index[&op], to = lastUse[get.getResult()];
        if (llvm::any_of(it->second, [&](int64_t w) { return w > from && w < to; }))
          op.setAttr(kCopyAttr, b.getUnitAttr());
        else
          op.removeAttr(kCopyAttr);
      }

    const llvm::DenseSet<Value> inPlace = inPlaceValues(fn);
    auto inArena = [&](Value root) { return !inPlace.contains(root) && hasOwnArenaBuffer(root); };

    ArenaAllocator arena;
    DenseMap<Value, int64_t> offsetOf;
    auto place = [&](Value root) {
      int64_t off = arena.allocate(bufferBytes(root.getType()));
      offsetOf[root] = off;
      return off;
    };
    auto release = [&](Value root) {
      arena.release(offsetOf[root], bufferBytes(root.getType()));
    };

    // Arguments are written before the step starts (-1: read in place).
    for (BlockArgument arg : fn.getArguments()) {
      if (!inArena(arg)) {
        fn.setArgAttr(arg.getArgNumber(), kOffsetAttr, b.getI64IntegerAttr(-1));
        continue;
      }
      fn.setArgAttr(arg.getArgNumber(), kOffsetAttr, b.getI64IntegerAttr(place(arg)));
      if (!lastUse.count(arg))
        release(arg);
    }

    Operation *terminator = block.getTerminator();
    SmallVector<int64_t> resultOffsets;
    for (Operation &op : block) {
      int64_t i = index[&op];
      if (&op == terminator) {
        // Returned values stay where they are; values in parameter or
        // constant storage get a slot that the step copies them into;
        // those written in the runner's buffers none (-1).
        for (Value v : op.getOperands()) {
          Value root = rootOf(v);
          resultOffsets.push_back(inPlace.contains(root) ? -1
                                  : inArena(root)        ? offsetOf[root]
                                                  : arena.allocate(bufferBytes(v.getType())));
        }
        break;
      }
      SmallVector<int64_t> offsets;
      bool any = false;
      for (Value r : op.getResults()) {
        if (isViewOp(&op) || viewRoot(r) != r || !inArena(r)) {
          offsets.push_back(-1);
          continue;
        }
        offsets.push_back(place(r));
        any = true;
      }
      if (any)
        op.setAttr(kOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
      // Operands whose group dies here, then results nobody reads.
      SmallPtrSet<Value, 4> done;
      for (Value v : op.getOperands()) {
        Value root = rootOf(v);
        if (inArena(root) && lastUse[root] == i && done.insert(root).second)
          release(root);
      }
      for (Value r : op.getResults())
        if (!isViewOp(&op) && viewRoot(r) == r && inArena(r) && !lastUse.count(r))
          release(r);
    }
    fn->setAttr(kResultOffsetsAttr, b.getDenseI64ArrayAttr(resultOffsets));
    LLVM_DEBUG(llvm::dbgs() << "merak-plan-memory: @" << fn.getSymName() << " arena peak "
                            << arena.peakBytes() << " bytes\n");
    fn->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(arena.peakBytes()));
    return success();
  }
};
} // namespace

LogicalResult mlir::merak::planMemory(ModuleOp module, ArrayRef<func::FuncOp> fns) {
  MerakPlanMemoryPass pass;
  for (func::FuncOp fn : fns) {
    if (!fn.getBody().hasOneBlock())
      return fn.emitError("merak-plan-memory: the function must have a single block");
    if (failed(pass.checkTypes(fn)))
      return failure();
  }
  if (failed(pass.planStorage(module, fns)))
    return failure();
  for (func::FuncOp fn : fns)
    if (failed(pass.planArena(fn)))
      return failure();
  return success();
}

