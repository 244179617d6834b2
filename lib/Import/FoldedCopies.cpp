//===- FoldedCopies.cpp - Tied weights the exporter's optimizer copied ----===//
//
// torch 2.x's dynamo exporter optimises the graph by default, folding
// `Transpose(W)` of a weight into a new initializer `val_N`. For a weight
// used twice -- GPT-2's tied embedding and LM head -- that leaves W and a
// transposed copy of it as two initializers: trained apart, the tie breaks
// and the model silently trains differently from PyTorch. The same
// optimiser also merges initializers with equal values (every RMSNorm weight
// starts as ones) into one, so which parameters PyTorch trains apart is
// lost. The importer therefore refuses an optimised export -- a weight
// (a float tensor of more than one element) named `val_<digits>`, the
// optimiser's names -- saying how to export without the optimiser, and
// names both initializers when one is another's transposed copy.
// Every matrix is hashed once (its values, and a val_ matrix's transpose),
// so the check is linear in the parameter bytes.
//
//===----------------------------------------------------------------------===//
#include "GraphImporter.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/xxhash.h"

#include <cstring>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// The raw bytes of a float32 matrix param, or an empty ref.
ArrayRef<char> matrixBytes(ParamOp p) {
  auto type = dyn_cast<RankedTensorType>(p.getInitialValue().getType());
  if (!type || type.getRank() != 2 || !type.getElementType().isF32())
    return {};
  auto res = dyn_cast<DenseResourceElementsAttr>(p.getInitialValue());
  AsmResourceBlob *blob = res ? res.getRawHandle().getBlob() : nullptr;
  if (!blob || (int64_t)blob->getData().size() != type.getNumElements() * 4)
    return {};
  return blob->getData();
}

/// The bytes of the [rows, cols] float32 matrix `m` transposed.
std::vector<char> transposed(ArrayRef<char> m, int64_t rows, int64_t cols) {
  std::vector<char> t(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&t[(c * rows + r) * 4], &m[(r * cols + c) * 4], 4);
  return t;
}

} // namespace

LogicalResult GraphImporter::checkFoldedCopies() {
  llvm::Regex generated("^val_[0-9]+$");
  // Most exports have no generated initializer: then no weight is hashed
  // (reading every page of a 6 GB external data file, once per import: the
  // planner imports the model once per probe).
  if (llvm::none_of(params, [&](auto &kv) { return generated.match(kv.second.getSymName()); }))
    return success();
  ParamOp folded;
  llvm::DenseMap<uint64_t, SmallVector<ParamOp, 1>> byHash;
  for (auto &kv : params)
    if (ArrayRef<char> bytes = matrixBytes(kv.second);
        !bytes.empty() && !isRepeatedElement(bytes, 4))
      byHash[llvm::xxh3_64bits(ArrayRef<uint8_t>(
                 reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()))]
          .push_back(kv.second);
  for (auto &kv : params) {
    ParamOp copy = kv.second;
    if (!generated.match(copy.getSymName()))
      continue;
    if (!folded || copy.getSymName() < folded.getSymName())
      folded = copy; // the first by name, for a deterministic message
    ArrayRef<char> bytes = matrixBytes(copy);
    if (bytes.empty() || isRepeatedElement(bytes, 4))
      continue;
    auto shape = cast<RankedTensorType>(copy.getInitialValue().getType()).getShape();
    std::vector<char> t = transposed(bytes, shape[0], shape[1]);
    auto it = byHash.find(llvm::xxh3_64bits(
        ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(t.data()), t.size())));
    if (it == byHash.end())
      continue;
    for (ParamOp original : it->second) {
      ArrayRef<char> o = matrixBytes(original);
      if (original == copy || o.size() != t.size() || std::memcmp(o.data(), t.data(), t.size()))
        continue;
      return fail(copy.getLoc(),
                  "initializer '" + copy.getSymName() + "' holds the values of '" +
                      original.getSymName() +
                      "' transposed: the exporter's optimizer folded a Transpose of a "
                      "weight used twice (tied weights) into a copy, and training the two "
                      "apart would untie them. Export with torch.onnx.export(..., "
                      "optimize=False) (or dynamo=False)");
    }
  }
  if (folded)
    return fail(folded.getLoc(),
                "initializer '" + folded.getSymName() +
                    "' is a weight folded by torch.onnx's graph optimizer, which also merges "
                    "weights with equal initial values into one: which parameters PyTorch "
                    "trains apart is lost in this export. Export with torch.onnx.export(..., "
                    "dynamo=True, optimize=False) (or dynamo=False)");
  return success();
}
