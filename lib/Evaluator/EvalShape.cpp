//===- EvalShape.cpp - data-movement reference kernels --------------------===//
#include "Kernels.h"

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::kernels;

/// Copies element `from` of `src` to element `to` of `dst` (same dtype).
static inline void copyElem(const HostTensor &src, int64_t from, HostTensor &dst,
                            int64_t to) {
  if (src.isFloat())
    dst.f()[to] = src.f()[from];
  else
    dst.i()[to] = src.i()[from];
}

LogicalResult kernels::eval(ConstantOp op, Operands, Results out) {
  auto t = HostTensor::fromAttr(op.getValue());
  if (failed(t))
    return op.emitError("cannot read constant value");
  out.push_back(std::move(*t));
  return success();
}

LogicalResult kernels::eval(ReshapeOp op, Operands in, Results out) {
  out.push_back(in[0]->reshaped(resultType(op)));
  return success();
}

LogicalResult kernels::eval(BroadcastOp op, Operands in, Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(op.getType());
  auto s = broadcastStrides(a.getShape(), r.getShape());
  forEachIndex(r.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
    copyElem(a, dot(idx, s), r, lin);
  });
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(TransposeOp op, Operands in, Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(op.getType());
  auto inStrides = rowMajorStrides(a.getShape());
  SmallVector<int64_t> s;
  for (int64_t p : op.getPerm())
    s.push_back(inStrides[p]);
  forEachIndex(r.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
    copyElem(a, dot(idx, s), r, lin);
  });
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(SliceOp op, Operands in, Results out) {
  const HostTensor &a = *in[0];
  HostTensor r(op.getType());
  auto inStrides = rowMajorStrides(a.getShape());
  ArrayRef<int64_t> starts = op.getStarts(), strides = op.getStrides();
  int64_t base = dot(starts, inStrides);
  SmallVector<int64_t> s;
  for (size_t d = 0; d < inStrides.size(); ++d)
    s.push_back(inStrides[d] * strides[d]);
  forEachIndex(r.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
    copyElem(a, base + dot(idx, s), r, lin);
  });
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(ConcatOp op, Operands in, Results out) {
  HostTensor r(op.getType());
  int64_t axis = op.getAxis();
  auto rs = rowMajorStrides(r.getShape());
  int64_t offset = 0;
  for (const HostTensor *t : in) {
    forEachIndex(t->getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
      copyElem(*t, lin, r, dot(idx, rs) + offset * rs[axis]);
    });
    offset += t->getShape()[axis];
  }
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(SplitOp op, Operands in, Results out) {
  const HostTensor &a = *in[0];
  int64_t axis = op.getAxis();
  auto as = rowMajorStrides(a.getShape());
  int64_t offset = 0;
  for (Value res : op.getResults()) {
    HostTensor r(cast<RankedTensorType>(res.getType()));
    forEachIndex(r.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
      copyElem(a, dot(idx, as) + offset * as[axis], r, lin);
    });
    offset += r.getShape()[axis];
    out.push_back(std::move(r));
  }
  return success();
}

LogicalResult kernels::eval(GatherOp op, Operands in, Results out) {
  const HostTensor &data = *in[0], &indices = *in[1];
  HostTensor r(op.getType());
  int64_t axis = op.getAxis();
  ArrayRef<int64_t> ds = data.getShape();
  int64_t outer = 1, inner = 1, dim = ds[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= ds[d];
  for (int64_t d = axis + 1; d < (int64_t)ds.size(); ++d)
    inner *= ds[d];
  int64_t n = indices.size();
  for (int64_t j = 0; j < n; ++j) {
    int64_t ix = indices.i()[j];
    if (ix < -dim || ix >= dim)
      return op.emitError("gather index ") << ix << " out of range [" << -dim
                                           << ", " << dim << ")";
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      int64_t ix = indices.i()[j];
      if (ix < 0)
        ix += dim;
      for (int64_t k = 0; k < inner; ++k)
        copyElem(data, (o * dim + ix) * inner + k, r, (o * n + j) * inner + k);
    }
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(GatherGradOp op, Operands in, Results out) {
  const HostTensor &grad = *in[0], &indices = *in[1];
  HostTensor r(op.getType());
  int64_t axis = op.getAxis();
  ArrayRef<int64_t> ds = r.getShape();
  int64_t outer = 1, inner = 1, dim = ds[axis], n = indices.size();
  for (int64_t d = 0; d < axis; ++d)
    outer *= ds[d];
  for (int64_t d = axis + 1; d < (int64_t)ds.size(); ++d)
    inner *= ds[d];
  for (int64_t j = 0; j < n; ++j)
    if (indices.i()[j] < -dim || indices.i()[j] >= dim)
      return op.emitError("gather_grad index ") << indices.i()[j] << " out of range";
  // Accumulate in double, round once at the end.
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      int64_t ix = indices.i()[j] < 0 ? indices.i()[j] + dim : indices.i()[j];
      for (int64_t k = 0; k < inner; ++k)
        r.f()[(o * dim + ix) * inner + k] += grad.f()[(o * n + j) * inner + k];
    }
  r.roundToType();
  if (op.getAcc()) { // the rounded sums added into the accumulator
    const HostTensor &acc = *in[2];
    for (int64_t i = 0, e = r.size(); i < e; ++i)
      r.f()[i] += acc.f()[i];
    r.roundToType();
  }
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(GatherElementsGradOp op, Operands in,
                                             Results out) {
  const HostTensor &grad = *in[0], &indices = *in[1];
  HostTensor r(op.getType());
  int64_t axis = op.getAxis(), dim = r.getShape()[axis];
  auto rs = rowMajorStrides(r.getShape());
  bool bad = false;
  forEachIndex(indices.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
    int64_t ix = indices.i()[lin];
    if (ix < -dim || ix >= dim) {
      bad = true;
      return;
    }
    if (ix < 0)
      ix += dim;
    r.f()[dot(idx, rs) + (ix - idx[axis]) * rs[axis]] += grad.f()[lin];
  });
  if (bad)
    return op.emitError("gather_elements_grad index out of range");
  r.roundToType();
  out.push_back(std::move(r));
  return success();
}

LogicalResult kernels::eval(GatherElementsOp op, Operands in,
                                         Results out) {
  const HostTensor &data = *in[0], &indices = *in[1];
  HostTensor r(op.getType());
  int64_t axis = op.getAxis(), dim = data.getShape()[axis];
  auto ds = rowMajorStrides(data.getShape());
  bool bad = false;
  int64_t badIx = 0;
  forEachIndex(indices.getShape(), [&](int64_t lin, ArrayRef<int64_t> idx) {
    int64_t ix = indices.i()[lin];
    if (ix < -dim || ix >= dim) {
      bad = true;
      badIx = ix;
      return;
    }
    if (ix < 0)
      ix += dim;
    int64_t o = dot(idx, ds) + (ix - idx[axis]) * ds[axis];
    copyElem(data, o, r, lin);
  });
  if (bad)
    return op.emitError("gather_elements index ") << badIx << " out of range";
  out.push_back(std::move(r));
  return success();
}
