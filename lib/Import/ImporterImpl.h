//===- ImporterImpl.h - internals of the ONNX importer ----------*- C++ -*-===//
#ifndef MERAK_LIB_IMPORT_IMPORTERIMPL_H
#define MERAK_LIB_IMPORT_IMPORTERIMPL_H

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Evaluator/HostTensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <onnx/onnx_pb.h>

namespace mlir::merak::onnx_import {

/// Largest tensor (in elements) a model may declare or compute: 2^40.
/// Anything larger is reported as absurd dimensions.
inline constexpr int64_t kMaxElements = int64_t(1) << 40;
/// Largest constant the importer builds from a model's shapes and attributes
/// (Range's values, index vectors): 2^24 elements. A declared dimension may
/// be far larger (types cost nothing); materialising it may not.
inline constexpr int64_t kMaxMaterialisedElements = int64_t(1) << 24;
/// Most loop-body nodes (Loop, Scan) an import unrolls, nested loops' too:
/// the program holds every one.
inline constexpr int64_t kMaxUnrolledNodes = int64_t(1) << 18;

/// MLIR element type of an ONNX TensorProto data type, or null.
Type convertDataType(MLIRContext *ctx, int32_t onnxType);
/// Name of an ONNX data type ("UINT8") for messages.
std::string dataTypeName(int32_t onnxType);

/// A tensor's value as little-endian bytes of its element type (i1: one
/// byte per element), the encoding of HostTensor::fromBytes and of dense
/// resource blobs.
/// `bytes` views the proto's raw_data, a mapped external-data file (kept
/// alive in `file`) or `storage`; move-only, valid while the proto lives.
struct RawTensor {
  RankedTensorType type;
  ArrayRef<char> bytes;
  std::vector<char> storage;
  std::unique_ptr<llvm::MemoryBuffer> file;

  static RawTensor owning(RankedTensorType type, std::vector<char> data) {
    RawTensor r;
    r.type = type;
    r.storage = std::move(data);
    r.bytes = r.storage;
    return r;
  }
};
/// Whether `bytes` is one element of `width` bytes repeated (a splat).
inline bool isRepeatedElement(ArrayRef<char> bytes, size_t width) {
  for (size_t at = width; at < bytes.size(); at += width)
    if (std::memcmp(bytes.data(), bytes.data() + at, width) != 0)
      return false;
  return true;
}

/// Decodes a TensorProto (raw, typed or external data) without converting
/// or copying the elements: parameters go straight into resource blobs.
FailureOr<RawTensor> decodeTensorRaw(MLIRContext *ctx, const onnx::TensorProto &t,
                                     StringRef baseDir, std::string &error);

/// Decodes a TensorProto (raw, typed or external data). `baseDir` is the
/// model's directory for external data; empty forbids external data.
FailureOr<HostTensor> decodeTensor(MLIRContext *ctx, const onnx::TensorProto &t,
                                   StringRef baseDir, std::string &error);

class GraphImporter;

/// "node 'name'", or for unnamed nodes "node <unnamed, output 'y'>".
std::string describeNode(const onnx::NodeProto &node);
/// Whether torch's dynamo exporter wrote `node` (it records the FX node it
/// came from in the node's metadata; TorchExportModes.cpp).
bool fromTorchExport(const onnx::NodeProto &node);
/// "a, b and 3 more" (the first three items).
std::string listed(ArrayRef<std::string> items);

/// A hash of `s` that is stable across builds and LLVM versions (FNV-1a),
/// for seeds that must not change when the compiler is rebuilt.
inline uint64_t stableHash(llvm::StringRef s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

/// A random draw (RandomUniform, RandomUniformLike) waiting for its uses to
/// become Bernoulli masks (OnnxOpsRandom.cpp): its placeholder value, its
/// range [low, high), its seed and the node, for errors.
struct RandomDraw {
  UnrealizedConversionCastOp op;
  double low, high;
  int64_t seed;
  std::string node;
};

/// The graph's Dropout nodes (OnnxOpsDropout.cpp): how many train
/// (training_mode true, or a random draw: only training code draws), and
/// the merak.dropout ops made for nodes with a nonzero ratio but no
/// training_mode input, which ONNX reads as inference and torch's export of
/// scaled_dot_product_attention writes in training exports;
/// resolveUntaggedDropouts decides them once the graph is read. Also the
/// random draws, which resolveRandomDraws turns into masks then.
struct DropoutLedger {
  int64_t training = 0;
  SmallVector<DropoutOp> untagged;
  SmallVector<RandomDraw> draws;
};

/// What a per-op handler sees: one ONNX node being imported.
class NodeContext {
public:
  NodeContext(GraphImporter &g, const onnx::NodeProto &node, int64_t opset,
              OpBuilder &b, Location loc)
      : graph(g), node(node), opset(opset), b(b), loc(loc) {}

  const onnx::NodeProto &getNode() const { return node; }
  int64_t getOpset() const { return opset; }
  OpBuilder &builder() { return b; }
  Location getLoc() const { return loc; }
  MLIRContext *getContext() { return b.getContext(); }

  unsigned numInputs() const { return node.input_size(); }
  /// True when input `i` exists and is not the empty name.
  bool hasInput(unsigned i) const {
    return (int)i < node.input_size() && !node.input(i).empty();
  }
  /// The value of input `i` (null when absent).
  Value input(unsigned i);
  RankedTensorType inputType(unsigned i) {
    return cast<RankedTensorType>(input(i).getType());
  }
  /// The compile-time value of input `i`; an error naming the input when it
  /// is not a constant.
  FailureOr<HostTensor> constantInput(unsigned i, StringRef what);
  /// A scalar (one-element) constant input as a double.
  FailureOr<double> constantScalar(unsigned i, StringRef what);
  /// Integer list from a constant input (e.g. a shape).
  FailureOr<SmallVector<int64_t>> constantInts(unsigned i, StringRef what);
  /// A one-element integer constant input (a trip count, a length), read as
  /// an integer (INT64_MAX stays exact).
  FailureOr<int64_t> constantInt(unsigned i, StringRef what);
  /// An error unless inputs 0 .. count-1 are all given and every given
  /// input is a tensor (not a sequence): for ops whose schema Debian's onnx
  /// lacks, so nothing checked their arity.
  LogicalResult requireInputs(unsigned count);
  /// True when output `i` is consumed by the graph or is a graph output.
  bool isOutputUsed(unsigned i) const;
  unsigned numOutputs() const { return node.output_size(); }

  // Attributes.
  const onnx::AttributeProto *attr(StringRef name) const;
  int64_t getInt(StringRef name, int64_t dflt) const;
  double getFloat(StringRef name, double dflt) const;
  std::string getString(StringRef name, StringRef dflt) const;
  std::optional<SmallVector<int64_t>> getInts(StringRef name) const;

  /// Input 0 viewed as a matrix at `axis` (Flatten, pre-13 Softmax):
  /// {product of dims before axis, product of the rest}; axis may be rank.
  FailureOr<std::pair<int64_t, int64_t>> flattenedAt(int64_t axis);

  /// Normalises a possibly negative axis against `rank`.
  FailureOr<int64_t> axis(int64_t a, int64_t rank);
  /// The axis in constant input `i` (one value; CumSum, CumProd),
  /// normalised against `rank`.
  FailureOr<int64_t> constantAxis(unsigned i, int64_t rank);

  /// Creates an op, infers and verifies its result types, and folds it when
  /// its operands are constant. On a malformed node (shapes that do not
  /// fit) it reports the error, marks the node failed and returns null;
  /// later creates on the node are no-ops, so handlers need not check
  /// every step.
  template <typename OpTy, typename... Args>
  Value create(Args &&...args) {
    auto r = createMulti<OpTy>(std::forward<Args>(args)...);
    return r.empty() ? Value() : r[0];
  }
  template <typename OpTy, typename... Args>
  SmallVector<Value> createMulti(Args &&...args) {
    // After a failed create, later ones are no-ops (their operands may be
    // null). Optional operands are legitimately null Values.
    if (failedNode)
      return {};
    Operation *op;
    if constexpr (OpTy::template hasTrait<InferTypeOpInterface::Trait>() &&
                  !std::is_same_v<OpTy, SplitOp>) {
      // Build with a placeholder type; `finish` infers the real one and
      // reports bad shapes instead of aborting in the inferring builder.
      op = OpTy::create(b, loc, b.getNoneType(), std::forward<Args>(args)...)
               .getOperation();
    } else {
      op = OpTy::create(b, loc, std::forward<Args>(args)...).getOperation();
    }
    return finish(op);
  }
  /// Split has variadic results: pass placeholder types explicitly.
  SmallVector<Value> createSplit(Value input, int64_t axis, ArrayRef<int64_t> sizes);
  bool hasFailed() const { return failedNode; }
  Value constant(const HostTensor &t);
  Value scalarLike(Value like, double v);
  /// Numpy broadcast of `v` to `shape` (no-op when equal).
  Value broadcastTo(Value v, ArrayRef<int64_t> shape);
  Value reshape(Value v, ArrayRef<int64_t> shape);
  /// A slice of `v` along dimension `dim` (the others whole).
  Value sliceDim(Value v, int64_t dim, int64_t start, int64_t limit, int64_t stride = 1);
  /// `v` cut along `dim` into its slices without that dimension, in order:
  /// one split (whose gradient is one concat, where a slice per element
  /// would pad each gradient to the whole tensor).
  SmallVector<Value> unstack(Value v, int64_t dim);
  /// `values` (of one shape) stacked along a new dimension `axis` (negative:
  /// from the end of the result's rank); an error if their shapes differ.
  Value stack(ArrayRef<Value> values, int64_t axis);
  /// merak.gather of `data`'s slices along `axis`; by constant indices that
  /// take every slice in order, each r times (repeat_interleave; r = 1:
  /// every slice once), a broadcast instead: nothing is indexed at run
  /// time, and the batch split sees the rows kept in order.
  Value gather(Value data, Value indices, int64_t axis);

  void setOutputs(ArrayRef<Value> values);
  /// Imports the nodes of subgraph `g` into the enclosing function, where
  /// they see every outer value, with its declared inputs bound to `inputs`
  /// (a loop body's; an If branch has none), and returns its outputs. Its
  /// names leave the scope afterwards, so a body imports once per
  /// iteration. A branch's single sequence output becomes the node's
  /// output 0 (and none is returned).
  FailureOr<SmallVector<Value>> importSubgraph(const onnx::GraphProto &g,
                                               ArrayRef<Value> inputs = {});
  /// Sequences (OnnxOpsSequence.cpp): input `i` as a list of values (null
  /// when it is not a sequence), and output 0 set to a list.
  const SmallVector<Value> *inputSequence(unsigned i);
  void setSequenceOutput(ArrayRef<Value> items);
  LogicalResult error(const Twine &msg);
  LogicalResult unsupported(const Twine &what);
  /// The graph's Dropout bookkeeping.
  DropoutLedger &dropouts();
  /// Records that this node was read more leniently than ONNX allows,
  /// because `what` (the exporter's intent is unambiguous); the graph warns
  /// once per reason, naming the nodes.
  void readLeniently(StringRef what);
  /// Whether torch's dynamo exporter recorded this node as a training-mode
  /// batch norm (TorchExportModes.cpp); counted for the graph's warning.
  bool exportTrainsBatchNorm();

private:
  SmallVector<Value> finish(Operation *op);
  bool failedNode = false;

  GraphImporter &graph;
  const onnx::NodeProto &node;
  int64_t opset;
  OpBuilder &b;
  Location loc;
};

using Handler = LogicalResult (*)(NodeContext &);

/// The op table. ONNX versions every op separately: at a model's opset an
/// op has the semantics of its largest since-version <= opset (the ai.onnx
/// history in OnnxOpVersions.inc, generated from the onnx wheel). A node is
/// imported only by a handler that covers exactly that version:
///  - add(op, v, fn): fn implements version v;
///  - sameAs(op, v, base): version v only widened types merak does not
///    support, or added something base's handler already handles or
///    refuses by name (decided per op from onnx's Changelog.md);
///  - up to kAuditedOpset, a handler also covers the versions up to the next
///    add() of the op: the handlers were written against ONNX 1.12's schemas
///    (opsets <= 17), whose node tests check them.
/// Any other version is unsupported ("Reshape-21").
class OpRegistry {
public:
  static constexpr int64_t kAuditedOpset = 17;

  void add(StringRef opType, int64_t sinceVersion, Handler fn);
  void sameAs(StringRef opType, int64_t version, int64_t base);

  struct Resolution {
    /// The op's ONNX version at the opset; 0 when ONNX does not define the
    /// op (or not yet at this opset).
    int64_t version = 0;
    /// Null when merak has no handler for that version.
    Handler fn = nullptr;
    /// The earlier version `version` was declared the same as (sameAs), or 0.
    int64_t sameAs = 0;
  };
  Resolution lookup(StringRef opType, int64_t opset) const;
  /// True when some version of the op has a handler.
  bool imports(StringRef opType) const { return table.count(opType); }
  /// The since-versions of an ai.onnx op, ascending; empty if ONNX has no
  /// such op.
  static ArrayRef<int64_t> onnxVersions(StringRef opType);
  /// The inputs of ai.onnx op `opType` at since-version `version` (from the
  /// onnx wheel's schemas, OnnxOpArity.inc): at least `minInputs`, and bit
  /// i of `required` set when formal input i (the last of `formals`,
  /// variadic, standing for every later input) must not be empty.
  struct Arity {
    int64_t minInputs = 0, formals = 0;
    uint64_t required = 0;
  };
  static std::optional<Arity> onnxArity(StringRef opType, int64_t version);
  static const OpRegistry &get();

private:
  struct Entry {
    Handler fn = nullptr; // set by add()
    int64_t base = 0;     // set by sameAs()
  };
  llvm::StringMap<std::map<int64_t, Entry>> table;
};

/// Replaces every call of one of the model's local functions by the
/// function's body (LocalFunctions.cpp); `error` names what cannot be.
LogicalResult inlineLocalFunctions(onnx::ModelProto &model, std::string &error);

/// Turns the per-expert loops transformers' "eager" Mixture-of-Experts layers
/// trace into (NonZero of run-time routing) into the batched form, one body
/// for every (token, choice) pair (ExpertLoops.cpp); `error` names what
/// cannot be.
LogicalResult batchExpertLoops(onnx::ModelProto &model, std::string &error);
/// Rewrites experts run on sorted segments of run-time sizes (SplitToSequence
/// by expert counts, one product per part, a Concat) into the batched form
/// with each row's segment as its expert (ExpertSegments.cpp).
void batchExpertSegments(onnx::ModelProto &model);

/// Window attributes of a Conv/Pool node (OnnxOpsWindow.cpp) in the form of
/// the merak ops: kernel, strides, dilations per spatial dimension, padding
/// as the begins then the ends (t, l, b, r in 2-d). 1-d windows are lifted
/// to 2-d with a unit height (so are their input, weight and output, by the
/// callers).
struct Window {
  SmallVector<int64_t> kernel, strides, dilations, padding;
};
FailureOr<Window> windowAttrs(NodeContext &n, ArrayRef<int64_t> inSpatial,
                              ArrayRef<int64_t> kernel);
/// The windows merak's 2-d ops do not cover (OnnxOpsWindow.cpp): a 3-d
/// Conv, MaxPool/AveragePool in 3-d, AveragePool with dilations, LpPool.
LogicalResult importConv3D(NodeContext &n);
/// A 3-d ConvTranspose (without its bias) whose window `win` (pads
/// resolved: the crop of each end) gives the result `shape` [N, C_out, D',
/// H', W']; outPadD: the output_padding in depth.
Value importConvTranspose3D(NodeContext &n, const Window &win, ArrayRef<int64_t> shape,
                            int64_t outPadD);
enum class PoolKind { Max, Average, Lp };
/// Pooling by one strided slice per kernel offset; MaxPool's Indices too.
LogicalResult importPoolBySlices(NodeContext &n, PoolKind kind);
/// Col2Im-18 (OnnxOpsWindow.cpp): spread, shifted column blocks, summed.
LogicalResult importCol2Im(NodeContext &n);
/// MaxUnpool (OnnxOpsWindow.cpp): a scatter of the values to their indices.
LogicalResult importMaxUnpool(NodeContext &n);
/// CenterCropPad-18 (OnnxOpsWindow.cpp): slices and zero pads.
LogicalResult importCenterCropPad(NodeContext &n);
/// x with `before` and `after` elements of `value` added along dimension d
/// (OnnxOpsWindow.cpp).
Value padWith(NodeContext &n, Value x, int64_t d, int64_t before, int64_t after, double value);

void registerElementwiseOps(OpRegistry &r);
void registerShapeOps(OpRegistry &r);
void registerNNOps(OpRegistry &r);
void registerLossOps(OpRegistry &r);
void registerLegacyOps(OpRegistry &r);
void registerSequenceOps(OpRegistry &r);
void registerIndexingOps(OpRegistry &r);
void registerRecurrentOps(OpRegistry &r);

/// An ONNX activation by name (RNN/GRU/LSTM's list: Relu, Tanh, Sigmoid,
/// Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
/// Softsign, Softplus) on `x`, with its alpha and beta; null for another
/// name. The element-wise handlers build the same formulas.
Value namedActivation(NodeContext &n, StringRef name, double alpha, double beta, Value x);
void registerAttentionOps(OpRegistry &r);
void registerDropoutOps(OpRegistry &r);
/// After the graph: the untagged dropouts train when others do, else they
/// become the identity (OnnxOpsDropout.cpp), also in `values` (the graph's
/// names, its outputs among them).
void resolveUntaggedDropouts(DropoutLedger &ledger, llvm::StringMap<Value> &values);
void registerRandomOps(OpRegistry &r);
/// After the graph: every use of a random draw becomes a dropout mask, or
/// the import fails naming it (OnnxOpsRandom.cpp).
LogicalResult resolveRandomDraws(DropoutLedger &ledger, llvm::StringMap<Value> &values,
                                 const onnx::GraphProto &graph);
void registerResizeOps(OpRegistry &r);
void registerEinsumOps(OpRegistry &r);
void registerMathOps(OpRegistry &r);
void registerGridSampleOps(OpRegistry &r);
void registerControlOps(OpRegistry &r);
void registerSignalOps(OpRegistry &r);
void registerLinearAttentionOps(OpRegistry &r);
/// The names a node's subgraphs (If's branches) read from the enclosing
/// scopes, recursively (OnnxOpsControl.cpp).
void outerReads(const onnx::NodeProto &node, SmallVectorImpl<std::string> &out);
/// `nodes` and, after each, the nodes of its subgraphs, recursively.
void withSubgraphs(ArrayRef<const onnx::NodeProto *> nodes,
                   SmallVectorImpl<const onnx::NodeProto *> &all);

} // namespace mlir::merak::onnx_import

#endif
