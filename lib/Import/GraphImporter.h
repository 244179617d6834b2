//===- GraphImporter.h - state of one ONNX graph import ---------*- C++ -*-===//
//
// Internal to lib/Import: the per-model state shared by the graph walk
// (OnnxImporter.cpp) and the per-node API handlers use (NodeContext.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_LIB_IMPORT_GRAPHIMPORTER_H
#define MERAK_LIB_IMPORT_GRAPHIMPORTER_H

#include "ImporterImpl.h"
#include "merak/Import/OnnxImporter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::merak::onnx_import {

/// The function the importer creates (`func.func @forward`).
inline constexpr const char *kEntryName = "forward";

class GraphImporter {
public:
  /// Consumes `model`: the raw bytes of each initializer are released once
  /// they are copied into a resource blob, so peak memory stays near one
  /// copy of the parameters.
  GraphImporter(MLIRContext *ctx, onnx::ModelProto &model,
                StringRef baseDir, const ImportOptions &options)
      : ctx(ctx), model(model), graph(*model.mutable_graph()), baseDir(baseDir),
        options(options), builder(ctx) {}

  OwningOpRef<ModuleOp> run();

  MLIRContext *ctx;
  onnx::ModelProto &model;
  onnx::GraphProto &graph;
  std::string baseDir;
  const ImportOptions &options;
  /// Set when --batch-size bound some input's leading dimension.
  bool batchBound = false;
  DropoutLedger dropouts;
  /// What the importer read more leniently than ONNX allows (readLeniently):
  /// the nodes under each reason, warned once per reason after the nodes.
  /// (A handful of reasons at most: a vector in first-seen order.)
  SmallVector<std::pair<std::string, SmallVector<std::string>>> lenientReads;
  /// The modules of BatchNormalization nodes without training_mode that
  /// dynamo's metadata shows as training (TorchExportModes.cpp).
  SmallVector<std::string> exportTrainingNorms;
  /// The BatchNormalization nodes whose FX node is a training-mode batch
  /// norm, with its module path (readTorchExportModes).
  llvm::DenseMap<const onnx::NodeProto *, std::string> exportNormModules;
  /// Whether some node carries dynamo's FX metadata, and the parameters its
  /// FX nodes read (`%p_<path>`, the path's dots as underscores).
  bool fromDynamo = false;
  llvm::StringSet<> exportParameters;
  /// Whether the FX nodes read initializer `name` as a parameter.
  bool isExportParameter(StringRef name) const;
  /// Whether a float initializer of `type` is a parameter (OnnxImporter.cpp).
  bool isParameter(StringRef name, RankedTensorType type) const;
  OpBuilder builder;
  Location fileLoc = UnknownLoc::get(ctx);
  llvm::StringMap<Value> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringSet<> consumed; // names read by some node or graph output
  llvm::StringMap<int> readers; // how many node inputs read each name
  ModuleOp module;
  int64_t opset = 0;
  /// Loop and Scan body nodes imported so far, nested loops included
  /// (kMaxUnrolledNodes bounds them).
  int64_t unrolledNodes = 0;

  LogicalResult fail(Location loc, const Twine &msg) {
    emitError(loc) << msg;
    return failure();
  }
  Location nodeLoc(const onnx::NodeProto &node) {
    std::string name = node.name().empty()
                           ? node.op_type() + "#" + (node.output_size() ? node.output(0) : "")
                           : node.name();
    return NameLoc::get(StringAttr::get(ctx, name), fileLoc);
  }
  ElementsAttr makeElements(const HostTensor &t, StringRef hint);
  ElementsAttr makeResource(RankedTensorType type, ArrayRef<char> bytes, StringRef hint,
                            std::unique_ptr<llvm::MemoryBuffer> mapped = nullptr);
  llvm::StringMap<ParamOp> params;
  /// Sequence values (ONNX seq(tensor)) of static length, as their items.
  llvm::StringMap<SmallVector<Value>> sequences;
  LogicalResult indexInitializers();
  LogicalResult verifyNodeSchema(const onnx::NodeProto &node, Location loc);
  LogicalResult importIdentityParam(const onnx::NodeProto &node);
  FailureOr<SmallVector<const onnx::NodeProto *>> sortNodes();
  /// Reports every node (the graph's and its branches', withSubgraphs)
  /// without an import rule, all at once.
  LogicalResult checkSupported(ArrayRef<const onnx::NodeProto *> nodes);
  // The phases of run().
  LogicalResult readOpset();
  LogicalResult checkBoundInput(const onnx::ValueInfoProto &in, Location loc,
                                const HostTensor &value);
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &in, Location loc);
  LogicalResult importInitializers(func::FuncOp func);
  /// Refuses a tied weight the exporter's optimizer copied (FoldedCopies.cpp).
  LogicalResult checkFoldedCopies();
  /// Reads torch's dynamo metadata (TorchExportModes.cpp): refuses an
  /// export whose graph optimizer folded training-mode batch norms or
  /// removed dropouts, and fills exportNormModules, fromDynamo and
  /// exportParameters.
  LogicalResult readTorchExportModes(ArrayRef<const onnx::NodeProto *> nodes);
  /// After the nodes: the untagged dropouts decided, and a warning for the
  /// batch norms imported as training from the exporter's metadata and one
  /// per reason of lenientReads.
  void resolveTrainingModes();
  LogicalResult importNodes(ArrayRef<const onnx::NodeProto *> order);
  LogicalResult importOutputs(func::FuncOp func, ArrayRef<Type> argTypes);
};
} // namespace mlir::merak::onnx_import

#endif
