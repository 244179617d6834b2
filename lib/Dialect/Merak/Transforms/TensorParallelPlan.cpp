//===- TensorParallelPlan.cpp - merak-tensor-parallel's regions, planned --===//
//
// The loop around the walk (TensorParallelWalk.cpp) that settles
// merak-tensor-parallel's regions: each walk's failed regions are retried
// with the blocks they ask for (equal, ragged, or a ragged block held
// whole) or given up, and consistent regions that would not pay are
// pruned, until a walk is consistent.
//
//===----------------------------------------------------------------------===//
#include "TensorParallelWalk.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::tensor_parallel;

namespace {
/// The number of elements of `v`'s tensor.
int64_t numElements(Value v) { return tensorOf(v).getNumElements(); }

/// Whether `seed`'s ragged block `block` may be held whole (Seed::whole):
/// a Linear's weight read as a matrix (no view, no experts' stack), the
/// block split so far, and narrower than a block that stays split (the
/// queries beside a multi-query key head), so that the layer still splits.
bool canHoldWhole(const Seed &seed, int64_t block) {
  if (!isa<MatmulOp>(seed.matmul) || seed.weight.view || seed.weight.stack ||
      block >= (int64_t)seed.sizes.size() || (!seed.whole.empty() && seed.whole[block]))
    return false;
  for (auto [i, len] : llvm::enumerate(seed.sizes))
    if ((int64_t)i != block && (seed.whole.empty() || !seed.whole[i]) && len > seed.sizes[block])
      return true;
  return false;
}

/// Resolves the walk's failed regions (all of them with `waitingToo`, else
/// those that did not stop at an activation another region might split):
/// a region of one seed retries with the blocks it asked for (equal, or
/// ragged ones that divide over tp); the others' seeds are given up.
/// Whether any was resolved.
bool resolveFailures(Walk &walk, SmallVector<Seed> &seeds, int64_t tp, bool waitingToo) {
  bool changed = false;
  DenseMap<int, SmallVector<int>> conflicts; // by the region's final root
  for (auto &[region, disagreeing] : walk.conflicts)
    conflicts[walk.root(region)].append(disagreeing);
  DenseSet<int> conflicted;
  for (auto &[region, retry] : walk.failedRegions) {
    if (!waitingToo && walk.waiting.count(region))
      continue;
    changed = true;
    // Regions that met with different splits: the seeds that disagreed
    // with the op's first split operand go first (a multi-query
    // attention's key and value projections, so that its queries split by
    // heads, the one key head read whole, as Megatron-LM replicates key
    // heads fewer than tp); the others walk again.
    if (auto c = conflicts.find(walk.root(region)); c != conflicts.end()) {
      if (conflicted.insert(c->first).second)
        for (int m : c->second)
          seeds[m].alive = false;
      continue;
    }
    SmallVector<int> members;
    for (int m : walk.regions.members(region))
      members.push_back(m);
    Seed *only = members.size() == 1 ? &seeds[members[0]] : nullptr;
    if (only && only->blocks == 1 && retry.blocks > 1) {
      only->blocks = retry.blocks;
      continue;
    }
    // Parts of the output found on a view of it are in the view's units
    // (Falcon's [q | k | v] as heads of [.., heads, head_dim]): the
    // output's are these times its length over theirs.
    SmallVector<int64_t> sizes = retry.sizes;
    if (only && retry.block < 0 && !sizes.empty()) {
      int64_t full = tensorOf(only->matmul->getResult(0)).getDimSize(only->dim());
      int64_t sum = llvm::sum_of(sizes);
      if (full % sum == 0)
        for (int64_t &n : sizes)
          n *= full / sum;
    }
    // (Ragged blocks are in the output's units: a seed whose weight is a
    // merging view, XLNet's [H, N * D], takes none.)
    bool divides = !sizes.empty() && !(only && only->weight.merges(only->weight.outAxis())) &&
                   llvm::all_of(sizes, [&](int64_t n) { return n % tp == 0; });
    if (only && only->blocks == 1 && divides && retry.block < 0) {
      only->sizes = sizes;
      only->blocks = sizes.size();
      continue;
    }
    if (only && retry.whole >= 0 && canHoldWhole(*only, retry.whole)) {
      only->whole.resize(only->sizes.size());
      only->whole[retry.whole] = true;
      continue;
    }
    // One of its ragged blocks cut apart further: those parts become blocks.
    if (only && divides && retry.block >= 0 && retry.block < (int64_t)only->sizes.size() &&
        only->sizes[retry.block] == llvm::sum_of(retry.sizes)) {
      auto at = only->sizes.begin() + retry.block;
      at = only->sizes.erase(at);
      only->sizes.insert(at, retry.sizes.begin(), retry.sizes.end());
      only->blocks = only->sizes.size();
      if (!only->whole.empty()) { // (a split block was cut apart)
        auto w = only->whole.erase(only->whole.begin() + retry.block);
        only->whole.insert(w, retry.sizes.size(), false);
      }
      continue;
    }
    // Parts a fused projection is cut into that do not divide by tp (GQA's
    // key heads, Mamba-2's groups): said, as pruneIndivisibleRagged does.
    if (only && !retry.sizes.empty() && !divides) {
      InFlightDiagnostic d = only->matmul->emitRemark("merak-tensor-parallel: '")
                             << only->weight.param.getSymName()
                             << "' stays whole: its parts along the split dimension (";
      llvm::interleaveComma(retry.sizes, d);
      d << ") do not all divide by tp=" << tp;
    }
    for (int m : members)
      seeds[m].alive = false;
  }
  return changed;
}

/// Gives up the consistent regions that would not pay: one without a
/// row-parallel end (it would only add communication), and one that sums
/// a norm's statistics but is not a Megatron block, whose columns read one
/// value (the block's input) and whose ends are no wider than it and do
/// not widen what they contract: such a norm on a residual stream would
/// split the stream across blocks, and one on an LM head's transform or a
/// low-rank projection would all-reduce more than it saves (the latent
/// query of DeepSeek-V3 and Mistral 4, `q_b(norm(q_a(x)))`: q_a narrows,
/// q_b widens its rank back; the heads split at q_b instead). Failed
/// regions are left to resolveFailures. Whether any was given up.
bool prune(Walk &walk, SmallVector<Seed> &seeds) {
  DenseMap<int, int64_t> widestEnd;
  DenseSet<int> widening;
  for (Partial &p : walk.partials) {
    int64_t &w = widestEnd[walk.root(p.seed)];
    w = std::max(w, numElements(p.op->getResult(0)));
    // (The split activation it contracts: a weight split upstream through
    // views, XLNet's o, may hold fewer elements than the tokens' output.)
    if (llvm::any_of(p.op->getOperands(), [&](Value v) {
          return walk.split.count(v) && (!walk.activations || walk.activations->contains(v)) &&
                 numElements(v) < numElements(p.op->getResult(0));
        }))
      widening.insert(walk.root(p.seed));
  }
  DenseSet<Operation *> columns(walk.columns.begin(), walk.columns.end());
  DenseMap<int, Value> inputOf; // null: the columns read several values
  for (auto [i, s] : llvm::enumerate(seeds))
    if (columns.contains(s.matmul)) {
      Value input = s.matmul->getOperand(s.input());
      auto [it, fresh] = inputOf.try_emplace(walk.root(i), input);
      if (!fresh && it->second != input)
        it->second = Value();
    }
  DenseSet<int> summing;
  for (auto [op, seed] : walk.statistics)
    summing.insert(walk.root(seed));
  bool changed = false;
  for (auto [i, s] : llvm::enumerate(seeds)) {
    int root = walk.root(i);
    if (!columns.contains(s.matmul) || walk.failedRegions.count(root))
      continue;
    Value input = inputOf.lookup(root);
    bool block = input && widestEnd.lookup(root) <= numElements(input) && !widening.contains(root);
    if (!widestEnd.count(root) || (summing.contains(root) && !block))
      s.alive = false, changed = true;
  }
  return changed;
}

/// Gives up the regions with ragged blocks (a fused projection whose parts
/// the walk found, or parts joined) in which a split dimension does not
/// divide by tp: the parts' heads or groups do not (Mamba-2's 2 groups at
/// tp 4), and the layer stays whole, with a remark. In a region of equal
/// blocks that is the user's error, reported after the walk. Whether any
/// was given up.
bool pruneIndivisibleRagged(Walk &walk, SmallVector<Seed> &seeds, int64_t tp) {
  DenseSet<int> ragged, indivisible;
  for (auto &[v, s] : walk.split) {
    if (!s.sizes.empty())
      ragged.insert(walk.root(s.seed));
    else if (!s.divides(v, tp))
      indivisible.insert(walk.root(s.seed));
  }
  if (ragged.empty())
    return false;
  for (ParamShard &p : walk.params)
    if (!p.divides(tp))
      indivisible.insert(walk.root(p.seed));
  bool changed = false;
  for (auto [i, s] : llvm::enumerate(seeds)) {
    int root = walk.root(i);
    if (!s.alive || !ragged.contains(root) || !indivisible.contains(root))
      continue;
    if (root == (int)i)
      s.matmul->emitRemark("merak-tensor-parallel: '")
          << s.weight.param.getSymName() << "' and its block stay whole: its parts (heads or "
          << "groups) do not divide by tp=" << tp;
    s.alive = false;
    changed = true;
  }
  return changed;
}
} // namespace

std::unique_ptr<Walk> tensor_parallel::planRegions(func::FuncOp fn, SmallVector<Seed> &seeds,
                                                   const Getters &getters, int64_t tp) {
  DenseSet<Value> fromInputs(fn.getArguments().begin(), fn.getArguments().end()), fromParams,
      activations;
  for (Operation &op : fn.getBody().front()) {
    auto reads = [&](const DenseSet<Value> &set) {
      return llvm::any_of(op.getOperands(), [&](Value v) { return set.contains(v); });
    };
    if (reads(fromInputs))
      fromInputs.insert(op.result_begin(), op.result_end());
    if (isa<GetParamOp>(op) || reads(fromParams))
      fromParams.insert(op.result_begin(), op.result_end());
    if (reads(activations) || (reads(fromInputs) && reads(fromParams)))
      activations.insert(op.result_begin(), op.result_end());
  }
  // Each round gives up or retries at least one region, so this ends. A
  // region waiting for another's split (queries meeting keys) is given up
  // only after the definite failures and the pruning, which may seed the
  // Linear it waits for (DeepSeek-V3's key heads behind the low-rank
  // query projection's region).
  while (true) {
    auto walk = std::make_unique<Walk>(seeds, getters, &activations);
    walk->run(fn);
    if (resolveFailures(*walk, seeds, tp, /*waitingToo=*/false) || prune(*walk, seeds) ||
        resolveFailures(*walk, seeds, tp, /*waitingToo=*/true) ||
        pruneIndivisibleRagged(*walk, seeds, tp))
      continue;
    walk->activations = nullptr;
    return walk;
  }
}
