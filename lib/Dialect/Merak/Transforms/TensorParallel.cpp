//===- TensorParallel.cpp - merak-tensor-parallel -------------------------===//
//
// Megatron-LM tensor parallelism found by graph structure (see Passes.td).
//
// A *seed* is a Linear whose input is replicated: `matmul(x, W^T)` with W a
// parameter read only there (`transpose(get_param W) perm = [1, 0]`, PyTorch's
// [out, in] layout) or `matmul(x, W)` ([in, out], Gemm-like), or `matmul(W,
// x)` (W [out, in] on the left: Mamba's dt_proj, split on its rows), or the expert
// GEMM of a Mixture-of-Experts layer, `expert_matmul(x, W[e])` with W
// [E, out, in] (or [E, in, out]) read only there, or stacked from one
// parameter per expert read only there: every expert's matrix is
// split alike on its output features (expert tensor parallelism), or an
// ungrouped convolution `conv2d(x, W) bias b` with W [O, I, kh, kw] (and b)
// read only there, or b a splat constant (dynamo's zeros for bias=False),
// split on its output channels (dimension 1 of NCHW): a Conv -> BatchNorm ->
// ReLU -> Conv pair is a CNN's MLP; a row-parallel conv2d's bias moves
// after the sum (it would be added tp times); a depthwise conv2d passes the
// split channels on (its groups become the local channels). Splitting its
// output features over the tp ranks makes its result *split*: a value whose
// dimension `dim` is viewed as [blocks, tp, n / (blocks * tp)] and of which
// rank r holds part r of every block. A forward walk in program order
// propagates split values through each op by its sharding rule
// (ShardingRuleOpInterface, lib/Dialect/Merak/Interfaces): the split lands
// on one factor of the op; the operands holding that factor must be split
// alike, or be parameters read only there (the biases of column layers, the
// weight of a row-parallel layer, the rows of an expert's bias gathered per
// token), which are split alike, or any other float value computed from
// parameters and constants alone, of which each rank reads its part
// (merak.local_shard: a relative-position bias computed from its table);
// replicated operands without the factor get Megatron's f (each rank's
// gradient of them is partial); the results holding it are split. A split
// *reduction* factor is a row-parallel end: every rank holds a partial sum,
// summed over tp (merak.all_reduce, Megatron's g). A norm over the split
// features (OLMo 2's q/k norms) is split alike, its statistics summed over
// tp (the op's splitStatistics), where its region is a Megatron block.
// Seeds whose values reach a replicated factor (a softmax's axis) or an op
// without a rule (the function's results, ...) are left replicated,
// together with every seed their values met; the walk repeats until it is
// consistent (TensorParallelWalk.cpp). A fused QKV projection gets blocks = 3 when its
// split lands on the replicated part selector of a `merak.split` of its
// output into three equal parts, or on the parts' dimension that gathers
// pick q, k and v from (nn.MultiheadAttention's in_proj viewed as
// [..., 3, C]); one whose output is cut into parts of different lengths
// (Phi-3's GQA qkv_proj: q, k, v of H * D, KV * D, KV * D, by slices or a
// split) gets those lengths as its blocks, each split over tp: such a
// *ragged* split passes through ops whose sharding rule keeps the split
// dimension whole as one parallel factor (a bias, an activation, a
// depthwise conv1d; their parameters split in the same blocks) to the
// slices (or split) that take its blocks apart, each of which is then
// split normally, or stays ragged over several blocks; a block cut apart
// further refines the seed's blocks (Mamba-2's [z, xBC, dt], then xBC into
// [x, B, C]), and split values concatenated along their split dimension
// are ragged blocks, one per part. A ragged block that cannot be split (a
// multi-query key head inside a fused projection, cut inside the head) is
// held whole (Seed::whole): every rank computes it, the weight stays whole
// and each rank gathers its rows of it through f (gatherRows), and values
// computed from whole blocks alone are read without f.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/Transforms/Passes.h"

#include "TensorParallelWalk.h"
#include "VocabParallel.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKTENSORPARALLEL
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-tensor-parallel"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::tensor_parallel;

namespace {

struct MerakTensorParallelPass
    : merak::impl::MerakTensorParallelBase<MerakTensorParallelPass> {
  using Base::Base;

  RankedTensorType local(RankedTensorType t, int64_t dim) {
    SmallVector<int64_t> shape(t.getShape());
    shape[dim] /= tp;
    return RankedTensorType::get(shape, t.getElementType());
  }

  /// This rank's part of the replicated `x` along `dim` viewed as [blocks,
  /// tp, n / (blocks tp)] (inserted after x's definition): merak.local_shard
  /// splits the leading dimension, so `dim` (after the blocks, viewed as
  /// their own dimension) is moved there and back by transposes. Any part
  /// of a splat constant is a smaller splat.
  Value localPart(OpBuilder &b, Value x, int64_t dim, int64_t blocks) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfterValue(x);
    Location loc = x.getLoc();
    if (auto c = x.getDefiningOp<ConstantOp>())
      if (auto splat = dyn_cast<SplatElementsAttr>(c.getValue()))
        return ConstantOp::create(
            b, loc,
            SplatElementsAttr::get(local(tensorOf(x), dim), splat.getSplatValue<Attribute>()));
    if (blocks > 1) {
      RankedTensorType whole = tensorOf(x);
      SmallVector<int64_t> shape(whole.getShape());
      shape[dim] /= blocks;
      shape.insert(shape.begin() + dim, blocks);
      Value view =
          ReshapeOp::create(b, loc, RankedTensorType::get(shape, whole.getElementType()), x);
      Value part = localPart(b, view, dim + 1, 1);
      b.setInsertionPointAfterValue(part);
      return ReshapeOp::create(b, loc, local(whole, dim), part);
    }
    RankedTensorType t = tensorOf(x);
    SmallVector<int64_t> perm = {dim}, back(t.getRank());
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != dim)
        perm.push_back(d);
    for (auto [i, d] : llvm::enumerate(perm))
      back[d] = i;
    auto permuted = [&](RankedTensorType in, ArrayRef<int64_t> p) {
      SmallVector<int64_t> shape;
      for (int64_t d : p)
        shape.push_back(in.getDimSize(d));
      return RankedTensorType::get(shape, in.getElementType());
    };
    Value v = x;
    if (dim != 0)
      v = TransposeOp::create(b, loc, permuted(t, perm), v, perm);
    v = LocalShardOp::create(b, loc, local(tensorOf(v), 0), v, "tp");
    if (dim != 0)
      v = TransposeOp::create(b, loc, permuted(tensorOf(v), back), v, back);
    return v;
  }

  /// Splits `w`'s param along `axis` and retypes its reads; a stack's
  /// experts each along the matching axis of theirs. Ragged blocks some of
  /// which are held `whole` keep the param whole (gatherRows).
  void shardParam(Weight w, int64_t axis, int64_t blocks, ArrayRef<int64_t> sizes = {},
                  ArrayRef<bool> whole = {}) {
    if (w.stack) {
      for (Value part : w.stack.getInputs()) {
        auto view = part.getDefiningOp<ReshapeOp>();
        auto get = view.getInput().getDefiningOp<GetParamOp>();
        auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
        shardParam(Weight{param, get, TransposeOp()}, axis - 1, blocks, sizes);
        part.setType(local(tensorOf(part), axis));
      }
      w.stack.getResult().setType(local(tensorOf(w.stack.getResult()), axis));
      return;
    }
    if (llvm::is_contained(whole, true))
      return gatherRows(w, axis, sizes, whole);
    // (The reader first: a view's dimension is found from the full shape.)
    shortenReader(w, axis, [&](int64_t n) { return n / tp; });
    ParamOp param = w.param;
    auto type = local(param.getTensorType(), axis);
    param.setTypeAttr(TypeAttr::get(type));
    ShardLayout layout{axis, tp, blocks};
    layout.blockSizes.assign(sizes.begin(), sizes.end());
    setShardLayout(param, layout);
    w.get.getResult().setType(type);
  }

  /// The transpose or view that reads `w`'s get_param: its dimension
  /// holding the parameter's `axis` (n long, more through a merging view)
  /// becomes length(n) long. Before the get_param is retyped.
  static void shortenReader(Weight w, int64_t axis, function_ref<int64_t(int64_t)> length) {
    Value reader = w.transpose ? w.transpose.getResult() : w.view ? w.view.getResult() : Value();
    if (!reader)
      return;
    SmallVector<int64_t> shape(tensorOf(reader).getShape());
    int64_t at = w.transpose
                     ? llvm::find(w.transpose.getPerm(), axis) - w.transpose.getPerm().begin()
                     : *viewedDimension(tensorOf(w.view.getInput()).getShape(), shape, axis);
    shape[at] = length(shape[at]);
    reader.setType(RankedTensorType::get(shape, tensorOf(reader).getElementType()));
  }

  /// A parameter whose ragged blocks `sizes` along `axis` are split over tp
  /// but those marked `whole` (Seed::whole): it stays whole on every rank,
  /// and its reader gets this rank's rows, `gather(tp_identity(W), rows)`
  /// with rows = base + rank * stride (a split block's part r, a whole
  /// block's every row), whose gradient is zero outside them and summed
  /// over tp.
  void gatherRows(Weight w, int64_t axis, ArrayRef<int64_t> sizes, ArrayRef<bool> whole) {
    SmallVector<int64_t> base, stride;
    int64_t start = 0;
    for (auto [len, all] : llvm::zip(sizes, whole)) {
      int64_t count = all ? len : len / tp;
      for (int64_t i = 0; i < count; ++i) {
        base.push_back(start + i);
        stride.push_back(all ? 0 : count);
      }
      start += len;
    }
    GetParamOp get = w.get;
    Location loc = get.getLoc();
    OpBuilder b(get->getContext());
    b.setInsertionPointAfter(get);
    auto i64 = b.getI64Type();
    auto rowsType = RankedTensorType::get({(int64_t)base.size()}, i64);
    auto constant = [&](ArrayRef<int64_t> values) {
      return ConstantOp::create(b, loc, DenseElementsAttr::get(rowsType, values));
    };
    Value f = TpIdentityOp::create(b, loc, get.getResult());
    Value rank = GroupRankOp::create(b, loc, RankedTensorType::get({}, i64), "tp");
    Value rows =
        AddOp::create(b, loc, constant(base), MulOp::create(b, loc, rank, constant(stride)));
    SmallVector<int64_t> shape(tensorOf(get.getResult()).getShape());
    shape[axis] = base.size();
    auto localType = RankedTensorType::get(shape, tensorOf(get.getResult()).getElementType());
    Value mine = GatherOp::create(b, loc, localType, f, rows, axis);
    shortenReader(w, axis, [&](int64_t) { return (int64_t)base.size(); });
    get.getResult().replaceAllUsesExcept(mine, f.getDefiningOp());
  }

  /// findVocabHead, and by default (`vocab-parallel-fallback`, not asked
  /// for explicitly) only a head at least as wide as its input (V >= C: an
  /// LM head, not a classifier of a few classes, where the split's
  /// all-reduces would cost more than the rows it saves).
  FailureOr<VocabHead> findDefaultVocabHead(func::FuncOp fn,
                                            const llvm::StringMap<SmallVector<GetParamOp>> &getters,
                                            std::string &why) {
    FailureOr<VocabHead> head = findVocabHead(fn, getters, tp, why);
    if (failed(head) || !vocabParallelFallback)
      return head;
    ArrayRef<int64_t> shape = head->weight.getTensorType().getShape();
    int64_t v = shape[head->axis], c = shape[1 - head->axis];
    if (v >= c)
      return head;
    why = ("the head '" + head->weight.getSymName() + "' has fewer classes (" + Twine(v) +
           ") than input features (" + Twine(c) +
           "): a classifier, which --vocab-parallel splits only when asked")
              .str();
    return failure();
  }

  /// Vocabulary parallelism (VocabParallel.h): the LM head with its
  /// tables, then token embeddings of their own. Every check comes before
  /// the first change: with `vocab-parallel-fallback` a model whose head
  /// does not qualify keeps it replicated (with a remark).
  LogicalResult splitVocabulary(func::FuncOp fn,
                                const llvm::StringMap<SmallVector<GetParamOp>> &getters) {
    std::string why;
    FailureOr<VocabHead> head = findDefaultVocabHead(fn, getters, why);
    if (failed(head) && !vocabParallelFallback)
      return fn.emitError("merak-tensor-parallel: vocab-parallel: ") << why;
    if (succeeded(head))
      merak::splitVocabulary(fn, *head, getters, tp);
    SmallVector<ParamOp> tables = findTokenTables(getters);
    splitTokenTables(tables, getters, tp);
    if (failed(head)) {
      InFlightDiagnostic d =
          fn.emitRemark("merak-tensor-parallel: the ")
          << (tables.empty() ? "embedding, LM head and loss stay replicated (no vocabulary "
                               "parallelism): "
                             : "LM head and loss stay replicated: ")
          << why;
      if (!tables.empty())
        d << "; only " << describeTables(tables) << " split on their rows";
    }
    return success();
  }

  /// "the token embedding(s) 'a', 'b'".
  static std::string describeTables(ArrayRef<ParamOp> tables) {
    std::string out = "the token embedding(s) ";
    for (ParamOp t : tables)
      out += (out.back() == '\'' ? ", '" : "'") + t.getSymName().str() + "'";
    return out;
  }

  /// With no Linear pair to shard: only the vocabulary (a recurrent LM's
  /// head, a text classifier's token embedding), with a warning; an error
  /// naming both reasons when there is none.
  LogicalResult splitVocabularyOnly(func::FuncOp fn,
                                    const llvm::StringMap<SmallVector<GetParamOp>> &getters) {
    std::string why = "--vocab-parallel=false";
    FailureOr<VocabHead> head =
        vocabParallel ? findDefaultVocabHead(fn, getters, why) : FailureOr<VocabHead>(failure());
    int64_t lookups = 0;
    if (succeeded(head)) {
      merak::splitVocabulary(fn, *head, getters, tp);
      lookups = head->lookups.size();
    }
    SmallVector<ParamOp> tables = vocabParallel ? findTokenTables(getters) : SmallVector<ParamOp>();
    // An explicit --vocab-parallel whose head does not qualify is an error,
    // as with a pair (below: with no table either, both reasons).
    if (failed(head) && !tables.empty() && !vocabParallelFallback)
      return fn.emitError("merak-tensor-parallel: vocab-parallel: ") << why;
    splitTokenTables(tables, getters, tp);
    if (failed(head) && tables.empty())
      return fn.emitError("merak-tensor-parallel: found no structure to shard over tp=")
             << (int64_t)tp << ": no Linear -> ... -> Linear pair (an MLP, attention "
             << "projections around a head split, or convolutions Conv -> ... -> Conv) whose "
                "intermediate values only pass "
             << "through ops whose sharding rule keeps the split (elementwise ops, "
             << "reshapes, transposes, splits, softmax, batched matmuls, ...), and no "
                "vocabulary to split ("
             << why << ")";
    InFlightDiagnostic d =
        fn.emitWarning("merak-tensor-parallel: no Linear -> ... -> Linear pair to shard over tp=")
        << (int64_t)tp << ": only the vocabulary is split (";
    if (succeeded(head)) {
      d << "the LM head '" << head->weight.getSymName() << "'"
        << (head->bias ? " and its bias" : "");
      for (ParamOp table : head->tables)
        d << ", the embedding '" << table.getSymName() << "'";
      if (lookups)
        d << ", " << lookups << " embedding lookup(s)";
      d << ", the cross-entropy" << (tables.empty() ? "" : ", ");
    }
    if (!tables.empty())
      d << describeTables(tables);
    d << "); every other layer is computed whole on each tp rank";
    if (failed(head))
      d << " (the LM head and loss stay replicated: " << why << ")";
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError("merak-tensor-parallel: tp must be positive");
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || !fn.getBody().hasOneBlock()) {
      module.emitError("merak-tensor-parallel: no single-block function @") << entry;
      return signalPassFailure();
    }
    llvm::StringMap<SmallVector<GetParamOp>> getters;
    bool written = false;
    module.walk([&](Operation *op) {
      if (auto get = dyn_cast<GetParamOp>(op))
        getters[get.getName()].push_back(get);
      written |= isa<SetParamOp>(op);
    });
    if (written) {
      module.emitError("merak-tensor-parallel: runs on the model before training "
                       "(found merak.set_param)");
      return signalPassFailure();
    }

    // Seeds: every Linear with a weight of its own.
    SmallVector<Seed> seeds;
    {
      Walk probe(seeds, getters);
      fn.walk([&](MatmulOp mm) {
        int64_t lhs = tensorOf(mm.getLhs()).getRank(), rhs = tensorOf(mm.getRhs()).getRank();
        std::optional<Weight> right = probe.soleParam(mm.getRhs());
        if (right && rhs == 2 && lhs >= 2) {
          seeds.push_back({mm, *right, {}});
          return;
        }
        // A view of a parameter whose leading dimensions are 1, its output
        // features led by one of the parameter's (XLNet's per-head weights
        // [H, N, D] in `einsum("ibh,hnd->ibnd")`, which dynamo writes as a
        // batch-1 matmul by `reshape(W) [1, H, N * D]`): split on that one.
        if (!right && lhs >= 2 && rhs >= 2 &&
            llvm::all_of(tensorOf(mm.getRhs()).getShape().drop_back(2),
                         [](int64_t n) { return n == 1; }))
          if (auto viewed = probe.viewedParam(mm.getRhs(), rhs - 1)) {
            viewed->first.out = viewed->second;
            seeds.push_back({mm, viewed->first, {}});
            return;
          }
        // `W @ x` with W [out, in] (Mamba's dt_proj, `dt_proj.weight @
        // x.transpose(1, 2)`): the features are the result's rows.
        if (right || lhs != 2 || rhs < 2)
          return;
        std::optional<Weight> w = probe.soleParam(mm.getLhs());
        if (!w || w->transpose)
          return;
        w->out = 0;
        Seed seed{mm, *w, {}};
        seed.weightOnLeft = true;
        seeds.push_back(seed);
      });
      fn.walk([&](ExpertMatmulOp em) {
        if (em.getFirst()) // split over "ep" already (experts replicated over tp)
          return;
        std::optional<Weight> w = probe.soleParam(em.getWeight());
        if (!w || w->transpose)
          return;
        w->out = em.getTransposeWeight() ? 2 : 1;
        seeds.push_back({em, *w, {}});
      });
      fn.walk([&](Conv2DOp conv) {
        if (conv.getGroups() != 1)
          return;
        std::optional<Weight> w = probe.soleParam(conv.getWeight());
        std::optional<Weight> bias;
        ConstantOp splat;
        if (Value b = conv.getBias()) {
          splat = b.getDefiningOp<ConstantOp>();
          if (splat && !cast<ElementsAttr>(splat.getValue()).isSplat())
            splat = {};
          if (!splat && !(bias = probe.soleParam(b)))
            return;
        }
        if (!w || w->transpose || (bias && bias->transpose))
          return;
        w->out = 0; // [O, I, kh, kw]
        if (bias)
          bias->out = 0;
        seeds.push_back({conv, *w, {}, {}, bias, splat});
      });
    }

    std::unique_ptr<Walk> walk = planRegions(fn, seeds, getters, tp);
    if (walk->columns.empty()) {
      // Only the vocabulary, if it splits (a recurrent net's LM head).
      if (failed(splitVocabularyOnly(fn, getters)))
        signalPassFailure();
      return;
    }

    LLVM_DEBUG(llvm::dbgs() << "merak-tensor-parallel: " << walk->columns.size()
                            << " column-parallel Linears, " << walk->partials.size()
                            << " partial sums (row-parallel ends), " << walk->params.size()
                            << " parameters split alike, " << walk->split.size()
                            << " split values\n");
    // Sizes: every split dimension divides into blocks * tp parts.
    bool ok = true;
    auto name = [&](int seed) { return seeds[walk->root(seed)].weight.param.getSymName(); };
    const int64_t parts = tp;
    for (Operation &op : fn.getBody().front()) {
      for (Value r : op.getResults()) {
        auto it = walk->split.find(r);
        if (!ok || it == walk->split.end())
          continue;
        if (it->second.divides(r, parts))
          continue;
        int64_t n = tensorOf(r).getDimSize(it->second.dim), blocks = it->second.blocks;
        InFlightDiagnostic d = op.emitError("merak-tensor-parallel: dimension ")
                               << it->second.dim << " of this result (size " << n;
        if (blocks > 1)
          d << " = " << blocks << " blocks of " << n / blocks;
        d << (isa<ReshapeOp>(op) ? ", e.g. the attention heads" : "")
          << ") does not divide by tp=" << parts
          << (blocks > 1 ? " in each block" : "") << " (the tensor-parallel block of '"
          << name(it->second.seed) << "')";
        ok = false;
      }
    }
    DenseMap<Operation *, Seed *> seedOf;
    for (Seed &s : seeds)
      seedOf[s.matmul] = &s;
    // A seed's weight read through a view (XLNet's heads [H, N, D] as
    // [H, N * D]): its own dimension must divide too.
    for (Operation *mm : walk->columns) {
      Seed &s = *seedOf.lookup(mm);
      int64_t axis = s.weight.outAxis(), n = s.weight.size(axis);
      if (ok && s.weight.view && n % (s.blocks * tp) != 0) {
        mm->emitError("merak-tensor-parallel: dimension ")
            << axis << " of '" << s.weight.param.getSymName() << "' (" << n
            << ", e.g. the attention heads) does not divide by tp=" << parts;
        ok = false;
      }
    }
    for (ParamShard &p : walk->params) {
      if (ok && !p.divides(tp)) {
        p.user->emitError("merak-tensor-parallel: dimension ")
            << p.axis << " of '" << p.weight.param.getSymName() << "' (" << p.weight.size(p.axis)
            << ") does not divide by tp=" << parts;
        ok = false;
      }
    }
    if (!ok)
      return signalPassFailure();

    // Rewrite: local types, sharded params, f and g.
    for (Operation &op : fn.getBody().front()) {
      auto iface = dyn_cast<ShardingRuleOpInterface>(op);
      for (Value r : op.getResults())
        if (auto it = walk->split.find(r); it != walk->split.end()) {
          SmallVector<int64_t> shape(tensorOf(r).getShape());
          shape[it->second.dim] = it->second.localSize(shape[it->second.dim], tp);
          r.setType(RankedTensorType::get(shape, tensorOf(r).getElementType()));
          if (iface && it->second.sizes.empty())
            iface.recordSplit("tp", it->second.dim, it->second.blocks, tp);
        }
      if (iface && llvm::any_of(op.getOperands(), [&](Value v) { return walk->split.count(v); }))
        iface.adaptToLocalTypes();
    }
    // A ragged block's slice (or gather) starts after the local parts of
    // the split blocks before it and the whole ones.
    OpBuilder b(&getContext());
    for (auto [op, splitBefore, wholeBefore] : walk->raggedCuts) {
      int64_t start = splitBefore / tp + wholeBefore;
      if (auto pick = dyn_cast<GatherOp>(op)) { // whole blocks: positions start, start + 1, ...
        auto type = cast<RankedTensorType>(pick.getIndices().getType());
        SmallVector<APInt> positions;
        for (int64_t i = 0; i < type.getNumElements(); ++i)
          positions.push_back(APInt(type.getElementTypeBitWidth(), start + i, /*isSigned=*/true));
        b.setInsertionPoint(pick);
        pick.getIndicesMutable().assign(
            ConstantOp::create(b, pick.getLoc(), DenseElementsAttr::get(type, positions)));
        continue;
      }
      auto slice = cast<SliceOp>(op);
      int64_t dim = walk->split.lookup(slice.getInput()).dim;
      SmallVector<int64_t> starts(slice.getStarts()), limits(slice.getLimits());
      starts[dim] = start;
      limits[dim] = starts[dim] + tensorOf(slice.getResult()).getDimSize(dim);
      slice.setStarts(starts);
      slice.setLimits(limits);
    }
    DenseMap<Value, Value> fOf;
    auto fFor = [&](Value x, Location loc) {
      Value &f = fOf[x];
      if (!f) {
        b.setInsertionPointAfterValue(x);
        f = TpIdentityOp::create(b, loc, x);
      }
      return f;
    };
    // (Values of whole blocks carry partial gradients already.)
    for (OpOperand *use : walk->replicatedReads)
      if (!walk->wholeValues.count(use->get()))
        use->set(fFor(use->get(), use->getOwner()->getLoc()));
    DenseMap<std::tuple<Value, int64_t, int64_t>, Value> partOf;
    for (auto [use, dim, blocks] : walk->scatteredReads) {
      Value &part = partOf[{use->get(), dim, blocks}];
      if (!part)
        part = localPart(b, use->get(), dim, blocks);
      use->set(part);
    }
    for (Operation *mm : walk->columns) {
      Seed &s = *seedOf.lookup(mm);
      if (llvm::is_contained(s.whole, true)) {
        InFlightDiagnostic d = mm->emitRemark("merak-tensor-parallel: '")
                               << s.weight.param.getSymName()
                               << "' stays whole on every rank: its blocks of ";
        llvm::interleave(
            llvm::make_filter_range(llvm::zip(s.sizes, s.whole),
                                    [](auto block) { return std::get<1>(block); }),
            d, [&](auto block) { d << std::get<0>(block); }, ", ");
        d << " rows (heads or groups that do not split over tp=" << parts
          << ") are computed by every rank, the others split";
      }
      shardParam(s.weight, s.weight.outAxis(), s.blocks, s.sizes, s.whole);
      if (s.bias)
        shardParam(*s.bias, 0, s.blocks, s.sizes);
      if (s.splatBias) {
        auto attr = cast<ElementsAttr>(s.splatBias.getValue());
        auto type = local(tensorOf(s.splatBias.getResult()), 0);
        b.setInsertionPoint(mm);
        mm->setOperand(
            2, ConstantOp::create(b, mm->getLoc(),
                                  SplatElementsAttr::get(type, attr.getSplatValue<Attribute>())));
      }
      mm->setOperand(s.input(), fFor(mm->getOperand(s.input()), mm->getLoc()));
    }
    for (ParamShard &p : walk->params)
      shardParam(p.weight, p.axis, p.blocks, p.sizes, p.whole);
    // A norm's local sums: summed over tp (g), then f, so that each rank's
    // partial gradient of the sums is summed too.
    auto sumOverTp = [](OpBuilder &at, Value partial) -> Value {
      Location loc = partial.getLoc();
      auto whole = AllReduceOp::create(at, loc, ValueRange{partial}, "tp", "sum");
      return TpIdentityOp::create(at, loc, whole.getResult(0));
    };
    for (auto [op, seed] : walk->statistics) {
      b.setInsertionPoint(op);
      op->getResult(0).replaceAllUsesWith(
          cast<ShardingRuleOpInterface>(op).splitStatistics(b, tp, sumOverTp));
      op->erase();
    }
    for (Partial &p : walk->partials) {
      // A row-parallel conv2d's bias is added once, after the sum.
      Value bias;
      if (auto conv = dyn_cast<Conv2DOp>(p.op); conv && conv.getBias()) {
        bias = conv.getBias();
        conv.getBiasMutable().clear();
      }
      b.setInsertionPointAfter(p.op);
      auto g = AllReduceOp::create(b, p.op->getLoc(), p.op->getResults(), "tp", "sum");
      SmallVector<Value> sums(g.getResults());
      if (bias) { // [O] -> [O, 1, 1], broadcast over NCHW
        auto bt = tensorOf(bias);
        auto shaped = RankedTensorType::get({bt.getDimSize(0), 1, 1}, bt.getElementType());
        Value column = ReshapeOp::create(b, p.op->getLoc(), shaped, bias);
        sums[0] = AddOp::create(b, p.op->getLoc(), sums[0].getType(), sums[0], column);
      }
      if (p.mean) { // the ranks' means summed: divided by tp
        auto type = cast<RankedTensorType>(sums[0].getType());
        Value scale = ConstantOp::create(
            b, p.op->getLoc(),
            DenseElementsAttr::get(RankedTensorType::get({}, type.getElementType()),
                                   FloatAttr::get(type.getElementType(), 1.0 / tp)));
        sums[0] = MulOp::create(b, p.op->getLoc(), type, sums[0], scale);
      }
      for (auto [partial, sum] : llvm::zip(p.op->getResults(), sums))
        partial.replaceAllUsesExcept(sum, g);
    }
    if (vocabParallel && failed(splitVocabulary(fn, getters)))
      return signalPassFailure();
  }
};
} // namespace
