//===- WeightsFile.cpp - a program's initial data as safetensors ----------===//
//
// merak-compile writes the initial data of a program next to the
// executable (`train` + `train.safetensors`), so that the executable holds
// code and the manifest only, and each rank maps the file and reads the
// tensors it uses (runtime/src/weights_file.h). The file is the Hugging
// Face safetensors layout, readable by PyTorch tools:
//
//   "merak.constants"  U8 [consts_bytes]   first: 64-byte aligned in the file
//   "<param>"          its dtype, shape    each parameter with initial data
//                                          (a tensor-parallel one: the full
//                                          tensor, global_shape)
//   __metadata__       {"format": "merak-weights", "merak.program": <id>}
//
// The tensors are copied from the build's data file in chunks, so that the
// compiler never holds the weights a second time.
//
//===----------------------------------------------------------------------===//
#include "merak/Target/Program.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct Piece {
  std::string name, dtype;
  std::vector<int64_t> shape;
  uint64_t from = 0, bytes = 0; // in the data file
};

std::optional<std::vector<int64_t>> shapeOf(const llvm::json::Array *a) {
  if (!a)
    return std::nullopt;
  std::vector<int64_t> s;
  for (const llvm::json::Value &d : *a) {
    std::optional<int64_t> n = d.getAsInteger();
    if (!n || *n < 0)
      return std::nullopt;
    s.push_back(*n);
  }
  return s;
}

/// The pieces of the weights file, from the manifest.
llvm::Expected<std::vector<Piece>> piecesOf(const llvm::json::Object &m) {
  auto bad = [](const llvm::Twine &why) {
    return llvm::createStringError("the manifest " + why);
  };
  std::optional<int64_t> constsOffset = m.getInteger("consts_offset"),
                         constsBytes = m.getInteger("consts_bytes"),
                         paramsBytes = m.getInteger("params_bytes");
  std::optional<int64_t> initBytes = m.getInteger("params_init_bytes");
  const llvm::json::Array *params = m.getArray("params");
  if (!constsOffset || !constsBytes || !paramsBytes || !params)
    return bad("lacks consts_offset, consts_bytes, params_bytes or params");
  int64_t init = initBytes ? *initBytes : *paramsBytes;
  std::vector<Piece> pieces;
  if (*constsBytes > 0)
    pieces.push_back({"merak.constants", "U8", {*constsBytes}, (uint64_t)*constsOffset,
                      (uint64_t)*constsBytes});
  for (const llvm::json::Value &v : *params) {
    const llvm::json::Object *p = v.getAsObject();
    if (!p)
      return bad("has a parameter that is not an object");
    std::optional<llvm::StringRef> name = p->getString("name"), dtype = p->getString("dtype");
    std::optional<int64_t> offset = p->getInteger("offset"), bytes = p->getInteger("bytes");
    std::optional<std::vector<int64_t>> shape = shapeOf(p->getArray("shape"));
    if (!name || !dtype || !offset || !bytes || !shape)
      return bad("has a parameter without name, dtype, shape, offset or bytes");
    if (p->getObject("shard")) {
      std::optional<int64_t> at = p->getInteger("data_offset"), n = p->getInteger("data_bytes");
      std::optional<std::vector<int64_t>> global = shapeOf(p->getArray("global_shape"));
      if (!at || !n) // zero-initialised state: no data
        continue;
      if (!global)
        return bad("has a shard '" + *name + "' without global_shape");
      pieces.push_back({name->str(), dtype->str(), *global, (uint64_t)*at, (uint64_t)*n});
    } else if (*offset < init) {
      uint64_t n = std::min<uint64_t>(*bytes, init - *offset);
      if (n != (uint64_t)*bytes)
        return bad("has a parameter '" + *name + "' that straddles params_init_bytes");
      pieces.push_back({name->str(), dtype->str(), *shape, (uint64_t)*offset, n});
    }
  }
  return pieces;
}
} // namespace

std::string mlir::merak::writeWeightsFile(StringRef manifestPath, StringRef dataPath,
                                          StringRef outPath, StringRef id) {
  auto manifestText = llvm::MemoryBuffer::getFile(manifestPath);
  if (!manifestText)
    return "cannot read " + manifestPath.str();
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*manifestText)->getBuffer());
  if (!parsed)
    return "the manifest is not JSON: " + llvm::toString(parsed.takeError());
  const llvm::json::Object *manifest = parsed->getAsObject();
  if (!manifest)
    return "the manifest is not a JSON object";
  llvm::Expected<std::vector<Piece>> pieces = piecesOf(*manifest);
  if (!pieces)
    return llvm::toString(pieces.takeError());
  uint64_t dataSize = 0;
  if (llvm::sys::fs::file_size(dataPath, dataSize))
    return "cannot read " + dataPath.str();

  llvm::json::Object header;
  uint64_t at = 0;
  for (const Piece &p : *pieces) {
    if (p.from + p.bytes > dataSize)
      return "the data file ends before tensor '" + p.name + "'";
    llvm::json::Array shape;
    for (int64_t d : p.shape)
      shape.push_back(d);
    header[p.name] = llvm::json::Object{{"dtype", p.dtype},
                                        {"shape", std::move(shape)},
                                        {"data_offsets", llvm::json::Array{at, at + p.bytes}}};
    at += p.bytes;
  }
  header["__metadata__"] =
      llvm::json::Object{{"format", "merak-weights"}, {"merak.program", id.str()}};
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(header));
  // Spaces after the JSON put the data section (and the constants, its
  // first tensor) at a multiple of 64 bytes.
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');

  std::error_code ec;
  llvm::raw_fd_ostream os(outPath, ec);
  if (ec)
    return "cannot write " + outPath.str() + ": " + ec.message();
  uint64_t n = text.size();
  char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = char((n >> (8 * i)) & 0xff);
  os.write(length, 8);
  os << text;
  llvm::Expected<llvm::sys::fs::file_t> in = llvm::sys::fs::openNativeFileForRead(dataPath);
  if (!in)
    return "cannot read " + dataPath.str() + ": " + llvm::toString(in.takeError());
  std::vector<char> chunk(size_t(4) << 20);
  std::string readError;
  for (const Piece &p : *pieces)
    for (uint64_t done = 0; done < p.bytes && readError.empty();) {
      size_t want = std::min<uint64_t>(chunk.size(), p.bytes - done);
      llvm::Expected<size_t> got = llvm::sys::fs::readNativeFileSlice(
          *in, llvm::MutableArrayRef<char>(chunk.data(), want), p.from + done);
      if (!got || *got != want) {
        readError = got ? "short read" : llvm::toString(got.takeError());
        break;
      }
      os.write(chunk.data(), want);
      done += want;
    }
  llvm::sys::fs::closeFile(*in);
  if (!readError.empty())
    return "cannot read " + dataPath.str() + ": " + readError;
  os.close();
  if (os.has_error())
    return "cannot write " + outPath.str() + ": " + os.error().message();
  return "";
}
