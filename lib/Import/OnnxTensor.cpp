//===- OnnxTensor.cpp - ONNX TensorProto decoding -------------------------===//
#include "ImporterImpl.h"

#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <cstring>

using namespace mlir;
using namespace mlir::merak;
using namespace mlir::merak::onnx_import;

Type onnx_import::convertDataType(MLIRContext *ctx, int32_t t) {
  Builder b(ctx);
  switch (t) {
  case onnx::TensorProto::FLOAT: return b.getF32Type();
  case onnx::TensorProto::DOUBLE: return b.getF64Type();
  case onnx::TensorProto::FLOAT16: return b.getF16Type();
  case onnx::TensorProto::BFLOAT16: return b.getBF16Type();
  case onnx::TensorProto::INT64: return b.getI64Type();
  case onnx::TensorProto::INT32: return b.getI32Type();
  case onnx::TensorProto::INT16: return b.getIntegerType(16);
  case onnx::TensorProto::INT8: return b.getIntegerType(8);
  case onnx::TensorProto::UINT64: return IntegerType::get(ctx, 64, IntegerType::Unsigned);
  case onnx::TensorProto::UINT32: return IntegerType::get(ctx, 32, IntegerType::Unsigned);
  case onnx::TensorProto::UINT16: return IntegerType::get(ctx, 16, IntegerType::Unsigned);
  case onnx::TensorProto::UINT8: return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case onnx::TensorProto::BOOL: return b.getI1Type();
  default: return {};
  }
}

std::string onnx_import::dataTypeName(int32_t t) {
  if (onnx::TensorProto::DataType_IsValid(t))
    return onnx::TensorProto::DataType_Name((onnx::TensorProto::DataType)t);
  return "type #" + std::to_string(t);
}

/// Reads external data, refusing locations that leave `baseDir` (absolute
/// paths, `..`, symlinks), as onnx's CVE-2022-25882 / CVE-2024-27318 fixes.
/// Maps the external data of `t` into `out` (the file stays mapped in
/// out.file, out.bytes views the tensor's range of it).
static LogicalResult readExternal(RawTensor &out, const onnx::TensorProto &t,
                                           StringRef baseDir, int64_t expected,
                                           std::string &error) {
  std::string location;
  // The whole value, in decimal, or the key's name when it is malformed.
  std::string malformed;
  int64_t offset = 0, length = -1;
  auto parse = [&](const std::string &key, const std::string &text, int64_t &into) {
    StringRef digits(text);
    if (digits.empty() || digits.getAsInteger(10, into))
      malformed = key + " '" + text + "'";
  };
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      parse("offset", kv.value(), offset);
    else if (kv.key() == "length")
      parse("length", kv.value(), length);
  }
  auto refuse = [&](const Twine &why) -> LogicalResult {
    error = ("tensor '" + t.name() + "': external data location '" + location +
             "' " + why).str();
    return failure();
  };
  if (!malformed.empty())
    return refuse("has a malformed " + malformed + " (expected a byte count in decimal)");
  bool lengthGiven = llvm::any_of(t.external_data(),
                                  [](const auto &kv) { return kv.key() == "length"; });
  if (lengthGiven && length < 0)
    return refuse("has a negative length " + Twine(length));
  if (baseDir.empty())
    return refuse("cannot be resolved (no model directory)");
  if (location.empty())
    return refuse("is missing");
  if (llvm::sys::path::is_absolute(location) || location.find('\\') != std::string::npos)
    return refuse("is an absolute path; refusing to read outside the model directory");
  for (auto it = llvm::sys::path::begin(location), e = llvm::sys::path::end(location);
       it != e; ++it)
    if (*it == "..")
      return refuse("contains '..'; refusing to read outside the model directory");
  SmallString<256> full(baseDir);
  llvm::sys::path::append(full, location);
  // Every component below baseDir must be a real directory/file, not a link.
  SmallString<256> walk(baseDir);
  for (auto it = llvm::sys::path::begin(location), e = llvm::sys::path::end(location);
       it != e; ++it) {
    llvm::sys::path::append(walk, *it);
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(walk, st, /*follow=*/false))
      return refuse("does not exist");
    if (st.type() == llvm::sys::fs::file_type::symlink_file)
      return refuse("is or passes through a symbolic link; refusing to follow it");
  }
  if (offset < 0)
    return refuse("has a negative offset");
  uint64_t fileSize = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(full, fileSize))
    return refuse("cannot be read: " + ec.message());
  int64_t size = (int64_t)fileSize;
  if (length < 0)
    length = size - offset;
  if (offset > size || length > size - offset)
    return refuse("offset " + Twine(offset) + " + length " + Twine(length) +
                  " exceeds the file size " + Twine(size));
  if (length != expected)
    return refuse("holds " + Twine(length) + " bytes, expected " + Twine(expected));
  // Only the tensor's range is mapped; the parameter's resource keeps the
  // mapping (GraphImporter::makeResource) instead of copying it.
  auto buf = llvm::MemoryBuffer::getFileSlice(full, length, offset);
  if (!buf)
    return refuse("cannot be read: " + buf.getError().message());
  out.bytes = ArrayRef<char>((*buf)->getBufferStart(), length);
  out.file = std::move(*buf);
  return success();
}

FailureOr<RawTensor> onnx_import::decodeTensorRaw(MLIRContext *ctx,
                                                 const onnx::TensorProto &t,
                                                 StringRef baseDir,
                                                 std::string &error) {
  Type et = convertDataType(ctx, t.data_type());
  if (!et) {
    error = "tensor '" + t.name() + "' has unsupported dtype " +
            dataTypeName(t.data_type());
    return failure();
  }
  SmallVector<int64_t> dims(t.dims().begin(), t.dims().end());
  auto n = checkedNumElements(dims);
  if (failed(n) || *n > kMaxElements) {
    error = "tensor '" + t.name() + "' has absurd dimensions (element count overflows)";
    return failure();
  }
  auto type = RankedTensorType::get(dims, et);
  int64_t eb = HostTensor::elementBytes(et);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    RawTensor out;
    out.type = type;
    if (failed(readExternal(out, t, baseDir, eb * *n, error)))
      return failure();
    return out;
  }
  if (t.has_raw_data()) {
    const std::string &raw = t.raw_data();
    if ((int64_t)raw.size() != eb * *n) {
      error = "tensor '" + t.name() + "' has " + std::to_string(raw.size()) +
              " bytes of data, expected " + std::to_string(eb * *n);
      return failure();
    }
    RawTensor out; // a view of the proto's bytes: no copy
    out.type = type;
    out.bytes = ArrayRef<char>(raw.data(), raw.size());
    return out;
  }
  // Typed data: the count the proto holds must match before anything of
  // the declared size is allocated (the dims alone may ask for terabytes).
  int64_t given;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT: given = t.float_data_size(); break;
  case onnx::TensorProto::DOUBLE: given = t.double_data_size(); break;
  case onnx::TensorProto::INT64: given = t.int64_data_size(); break;
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64: given = t.uint64_data_size(); break;
  // INT32, (U)INT16, (U)INT8, BOOL, FLOAT16, BFLOAT16 live in int32_data
  // (16-bit floats as bits).
  default: given = t.int32_data_size(); break;
  }
  if (given != *n) {
    error = "tensor '" + t.name() + "' has " + std::to_string(given) +
            " values, expected " + std::to_string(*n);
    return failure();
  }
  HostTensor h(type);
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    for (int64_t k = 0; k < *n; ++k)
      h.f()[k] = t.float_data(k);
    break;
  case onnx::TensorProto::DOUBLE:
    for (int64_t k = 0; k < *n; ++k)
      h.f()[k] = t.double_data(k);
    break;
  case onnx::TensorProto::INT64:
    for (int64_t k = 0; k < *n; ++k)
      h.i()[k] = t.int64_data(k);
    break;
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
    for (int64_t k = 0; k < *n; ++k)
      h.setFromInt(k, (int64_t)t.uint64_data(k));
    break;
  default: {
    if (h.isFloat()) {
      std::vector<char> bytes(2 * *n);
      for (int64_t k = 0; k < *n; ++k) {
        uint16_t bits = (uint16_t)t.int32_data(k);
        std::memcpy(&bytes[2 * k], &bits, 2);
      }
      return RawTensor::owning(type, std::move(bytes));
    }
    for (int64_t k = 0; k < *n; ++k)
      h.setFromInt(k, t.int32_data(k));
  }
  }
  return RawTensor::owning(type, h.toBytes());
}

FailureOr<HostTensor> onnx_import::decodeTensor(MLIRContext *ctx,
                                                const onnx::TensorProto &t,
                                                StringRef baseDir,
                                                std::string &error) {
  auto raw = decodeTensorRaw(ctx, t, baseDir, error);
  if (failed(raw))
    return failure();
  return HostTensor::fromBytes(raw->type, raw->bytes);
}
