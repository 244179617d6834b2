//===- TensorProtoIO.cpp - .pb and .npy tensor files ----------------------===//
#include "merak/Import/TensorProtoIO.h"
#include "ImporterImpl.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <cstring>
#include <regex>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

static FailureOr<HostTensor> readPb(MLIRContext *ctx, StringRef path,
                                    StringRef data, std::string &error,
                                    std::string *name) {
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(data.data(), (int)data.size())) {
    error = "'" + path.str() + "' is not a valid TensorProto file";
    return failure();
  }
  if (name)
    *name = proto.name();
  // External data in test files is resolved next to the file itself.
  SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  auto t = decodeTensor(ctx, proto, dir.empty() ? "." : dir.str(), error);
  if (failed(t))
    error = "'" + path.str() + "': " + error;
  return t;
}

/// The integer element types with their ONNX data type and numpy
/// descriptor (|b1: bool; signless = signed).
struct IntKind {
  unsigned width;
  bool isUnsigned;
  int32_t onnx;
  const char *npy;
};
static constexpr IntKind kIntKinds[] = {
    {64, false, onnx::TensorProto::INT64, "<i8"},  {32, false, onnx::TensorProto::INT32, "<i4"},
    {16, false, onnx::TensorProto::INT16, "<i2"},  {8, false, onnx::TensorProto::INT8, "|i1"},
    {64, true, onnx::TensorProto::UINT64, "<u8"},  {32, true, onnx::TensorProto::UINT32, "<u4"},
    {16, true, onnx::TensorProto::UINT16, "<u2"},  {8, true, onnx::TensorProto::UINT8, "|u1"},
    {1, false, onnx::TensorProto::BOOL, "|b1"}};

static const IntKind *intKind(Type t) {
  auto it = dyn_cast<IntegerType>(t);
  if (!it)
    return nullptr;
  for (const IntKind &k : kIntKinds)
    if (k.width == it.getWidth() && k.isUnsigned == it.isUnsigned())
      return &k;
  return nullptr;
}

static Type npyType(MLIRContext *ctx, StringRef descr) {
  Builder b(ctx);
  if (descr == "<f4") return b.getF32Type();
  if (descr == "<f8") return b.getF64Type();
  if (descr == "<f2") return b.getF16Type();
  for (const IntKind &k : kIntKinds)
    if (descr == k.npy)
      return k.width == 1   ? b.getI1Type()
             : k.isUnsigned ? IntegerType::get(ctx, k.width, IntegerType::Unsigned)
                            : b.getIntegerType(k.width);
  return {};
}

static FailureOr<HostTensor> readNpy(MLIRContext *ctx, StringRef path,
                                     StringRef data, std::string &error) {
  auto bad = [&](const Twine &why) -> FailureOr<HostTensor> {
    error = ("'" + path + "' is not a supported .npy file: " + why).str();
    return failure();
  };
  if (data.size() < 10 || !data.starts_with("\x93NUMPY"))
    return bad("missing magic");
  unsigned major = (unsigned char)data[6];
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = (unsigned char)data[8] | ((unsigned char)data[9] << 8);
    offset = 10;
  } else {
    if (data.size() < 12)
      return bad("truncated header");
    headerLen = (unsigned char)data[8] | ((unsigned char)data[9] << 8) |
                ((unsigned char)data[10] << 16) | ((size_t)(unsigned char)data[11] << 24);
    offset = 12;
  }
  if (offset + headerLen > data.size())
    return bad("truncated header");
  std::string header = data.substr(offset, headerLen).str();
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']*)'")))
    return bad("no descr");
  Type et = npyType(ctx, m[1].str());
  if (!et)
    return bad("unsupported dtype '" + m[1].str() + "'");
  bool fortran = std::regex_search(header, m, std::regex("'fortran_order':\\s*True"));
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    return bad("no shape");
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  std::string dims = m[1].str();
  StringRef(dims).split(parts, ',', -1, false);
  for (StringRef p : parts) {
    p = p.trim();
    if (p.empty())
      continue;
    int64_t d;
    if (p.getAsInteger(10, d) || d < 0)
      return bad("bad dimension '" + p + "'");
    shape.push_back(d);
  }
  auto n = checkedNumElements(shape);
  if (failed(n) || *n > onnx_import::kMaxElements)
    return bad("absurd shape");
  StringRef body = data.drop_front(offset + headerLen);
  auto type = RankedTensorType::get(shape, et);
  int64_t eb = HostTensor::elementBytes(et);
  if ((int64_t)body.size() < eb * *n)
    return bad("data size does not match the shape");
  body = body.take_front(eb * *n);
  if (!fortran || shape.size() < 2) {
    auto t = HostTensor::fromBytes(type, ArrayRef<char>(body.data(), body.size()));
    if (failed(t))
      return bad("data size does not match the shape");
    return t;
  }
  // Column-major data: element (i0..ik) sits at sum(i_d * prod(shape[<d])).
  std::vector<char> rowMajor(body.size());
  SmallVector<int64_t> colStride(shape.size(), 1), idx(shape.size(), 0);
  for (size_t d = 1; d < shape.size(); ++d)
    colStride[d] = colStride[d - 1] * shape[d - 1];
  for (int64_t lin = 0; lin < *n; ++lin) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      src += idx[d] * colStride[d];
    std::memcpy(&rowMajor[lin * eb], body.data() + src * eb, eb);
    for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return HostTensor::fromBytes(type, rowMajor);
}

FailureOr<HostTensor> mlir::merak::readTensorFile(MLIRContext *ctx, StringRef path,
                                                  std::string &error,
                                                  std::string *name) {
  if (name)
    name->clear();
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf) {
    error = "cannot read '" + path.str() + "': " + buf.getError().message();
    return failure();
  }
  StringRef data = (*buf)->getBuffer();
  if (path.ends_with(".npy"))
    return readNpy(ctx, path, data, error);
  return readPb(ctx, path, data, error, name);
}

static int32_t onnxDataType(Type t) {
  if (t.isF32()) return onnx::TensorProto::FLOAT;
  if (t.isF64()) return onnx::TensorProto::DOUBLE;
  if (t.isF16()) return onnx::TensorProto::FLOAT16;
  if (t.isBF16()) return onnx::TensorProto::BFLOAT16;
  const IntKind *k = intKind(t);
  return k ? k->onnx : onnx::TensorProto::BOOL;
}

static StringRef npyDescr(Type t) {
  if (t.isF32()) return "<f4";
  if (t.isF64()) return "<f8";
  if (t.isF16()) return "<f2";
  const IntKind *k = intKind(t);
  return k ? k->npy : "";
}

LogicalResult mlir::merak::writeTensorFile(const HostTensor &t, StringRef path,
                                           StringRef name, std::string &error) {
  std::vector<char> bytes = t.toBytes();
  std::string contents;
  if (path.ends_with(".npy")) {
    StringRef descr = npyDescr(t.getElementType());
    if (descr.empty()) {
      error = "bf16 tensors cannot be written as .npy; use .pb";
      return failure();
    }
    std::string shape;
    for (auto [i, d] : llvm::enumerate(t.getShape()))
      shape += (i ? ", " : "") + std::to_string(d);
    if (t.getRank() == 1)
      shape += ",";
    std::string header = "{'descr': '" + descr.str() +
                         "', 'fortran_order': False, 'shape': (" + shape + "), }";
    size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header.push_back('\n');
    contents = std::string("\x93NUMPY\x01\x00", 8);
    contents.push_back((char)(header.size() & 0xff));
    contents.push_back((char)(header.size() >> 8));
    contents += header;
    contents.append(bytes.begin(), bytes.end());
  } else {
    onnx::TensorProto proto;
    proto.set_name(name.str());
    proto.set_data_type(onnxDataType(t.getElementType()));
    for (int64_t d : t.getShape())
      proto.add_dims(d);
    proto.set_raw_data(bytes.data(), bytes.size());
    contents = proto.SerializeAsString();
  }
  // Write beside the target and rename, so a failure never leaves a
  // truncated file under the final name.
  std::string tmp = (path + ".tmp").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec) {
      error = "cannot write '" + tmp + "': " + ec.message();
      return failure();
    }
    os << contents;
    os.close();
    if (os.has_error()) {
      error = "cannot write '" + tmp + "': " + os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return failure();
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    error = "cannot rename '" + tmp + "' to '" + path.str() + "': " + ec.message();
    llvm::sys::fs::remove(tmp);
    return failure();
  }
  return success();
}
