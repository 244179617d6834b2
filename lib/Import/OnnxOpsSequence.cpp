//===- OnnxOpsSequence.cpp - ONNX sequence ops over static lists ----------===//
//
// torch 2.x's dynamo exporter (unoptimised) spells torch.split / chunk as
//
//   seq = SplitToSequence(x, split)      ->  a list of tensors
//   y_i = SequenceAt(seq, i)             ->  one of them, i a constant
//
// merak has no sequence type: a sequence whose length and element shapes
// are known at import is a list of values (GraphImporter::sequences), and
// these ops pick from, build and concatenate such lists. A position that is
// not a compile-time constant is an error naming the input.
//
//===----------------------------------------------------------------------===//
#include "ImporterImpl.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

namespace {

/// SplitToSequence-11: `split` a scalar (equal chunks of that size, the last
/// smaller) or a 1-D list of sizes; absent: chunks of 1, with the split axis
/// removed when keepdims = 0.
LogicalResult splitToSequence(NodeContext &n) {
  auto in = n.inputType(0);
  auto ax = n.axis(n.getInt("axis", 0), in.getRank());
  if (failed(ax))
    return failure();
  int64_t dim = in.getDimSize(*ax);
  SmallVector<int64_t> sizes;
  bool squeeze = false;
  if (n.hasInput(1)) {
    auto split = n.constantInput(1, "split");
    if (failed(split))
      return failure();
    if (split->getRank() == 0) {
      int64_t chunk = split->i()[0];
      if (chunk < 1)
        return n.error("split must be positive, got " + Twine(chunk));
      for (int64_t at = 0; at < dim; at += chunk)
        sizes.push_back(std::min(chunk, dim - at));
    } else {
      int64_t total = 0;
      for (int64_t k = 0; k < split->size(); ++k) {
        sizes.push_back(split->i()[k]);
        total += sizes.back();
        if (sizes.back() < 0)
          return n.error("split sizes must be non-negative");
      }
      if (total != dim)
        return n.error("split sizes add up to " + Twine(total) + ", not the dimension " +
                       Twine(dim));
    }
  } else {
    sizes.assign(dim, 1);
    squeeze = n.getInt("keepdims", 1) == 0;
  }
  SmallVector<Value> parts = n.createSplit(n.input(0), *ax, sizes);
  if (squeeze)
    for (Value &p : parts) {
      SmallVector<int64_t> shape(cast<RankedTensorType>(p.getType()).getShape());
      shape.erase(shape.begin() + *ax);
      p = n.reshape(p, shape);
    }
  n.setSequenceOutput(parts);
  return success();
}

/// SequenceAt-11: a constant position, negative from the end.
LogicalResult sequenceAt(NodeContext &n) {
  const SmallVector<Value> *seq = n.inputSequence(0);
  if (!seq)
    return n.error("input 0 is not a sequence");
  auto pos = n.constantInts(1, "position");
  if (failed(pos))
    return failure();
  int64_t size = seq->size(), p = pos->empty() ? 0 : (*pos)[0];
  if (p < -size || p >= size)
    return n.error("position " + Twine(p) + " is outside a sequence of " + Twine(size));
  n.setOutputs((*seq)[p < 0 ? p + size : p]);
  return success();
}

/// SequenceConstruct-11: the inputs as a sequence.
LogicalResult sequenceConstruct(NodeContext &n) {
  SmallVector<Value> items;
  for (unsigned i = 0; i < n.numInputs(); ++i)
    items.push_back(n.input(i));
  n.setSequenceOutput(items);
  return success();
}

/// ConcatFromSequence-11: Concat of the items along `axis`, or with
/// new_axis = 1 a stack (each item gains the axis first).
LogicalResult concatFromSequence(NodeContext &n) {
  const SmallVector<Value> *seq = n.inputSequence(0);
  if (!seq || seq->empty())
    return n.error("input 0 is not a non-empty sequence");
  int64_t rank = cast<RankedTensorType>((*seq)[0].getType()).getRank();
  for (auto [i, v] : llvm::enumerate(*seq))
    if (int64_t r = cast<RankedTensorType>(v.getType()).getRank(); r != rank)
      return n.error("the sequence's items have different ranks: item 0 has rank " +
                     Twine(rank) + ", item " + Twine(i) + " rank " + Twine(r));
  bool stack = n.getInt("new_axis", 0) == 1;
  auto ax = n.axis(n.getInt("axis", 0), rank + (stack ? 1 : 0));
  if (failed(ax))
    return failure();
  SmallVector<Value> items(*seq);
  if (stack)
    for (Value &v : items) {
      SmallVector<int64_t> shape(cast<RankedTensorType>(v.getType()).getShape());
      shape.insert(shape.begin() + *ax, 1);
      v = n.reshape(v, shape);
    }
  n.setOutputs(n.create<ConcatOp>(items, *ax));
  return success();
}

/// SequenceLength-11: the item count as an int64 scalar constant.
LogicalResult sequenceLength(NodeContext &n) {
  const SmallVector<Value> *seq = n.inputSequence(0);
  if (!seq)
    return n.error("input 0 is not a sequence");
  HostTensor len(RankedTensorType::get({}, IntegerType::get(n.getContext(), 64)));
  len.i()[0] = static_cast<int64_t>(seq->size());
  n.setOutputs(n.constant(len));
  return success();
}

} // namespace

void onnx_import::registerSequenceOps(OpRegistry &r) {
  r.add("SplitToSequence", 11, splitToSequence);
  r.sameAs("SplitToSequence", 24, 11); // bfloat16
  r.add("SequenceAt", 11, sequenceAt);
  r.add("SequenceConstruct", 11, sequenceConstruct);
  r.add("ConcatFromSequence", 11, concatFromSequence);
  r.add("SequenceLength", 11, sequenceLength);
}
