//===- safetensors.cpp - safetensors files and checkpoints ----------------===//
#include "merak_rt/safetensors.h"

#include "file_util.h"
#include "json_util.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the runtime writes tensors in host order and assumes it is "
              "little-endian");

namespace merak::rt {

using detail::errnoMessage;

namespace {
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20; // 100 MiB
constexpr const char *kMetadataKey = "__metadata__";

struct DTypeInfo {
  DType dtype;
  const char *name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
    {DType::U16, "U16", 2}, {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},
};

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
} // namespace

size_t dtypeSize(DType dtype) {
  for (const auto &info : kDTypes)
    if (info.dtype == dtype)
      return info.size;
  return 1;
}

const char *dtypeName(DType dtype) {
  for (const auto &info : kDTypes)
    if (info.dtype == dtype)
      return info.name;
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (const auto &info : kDTypes)
    if (name == info.name)
      return info.dtype;
  return std::nullopt;
}

std::optional<uint64_t> elementCount(const std::vector<int64_t> &shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    if (dim != 0 && count > UINT64_MAX / static_cast<uint64_t>(dim))
      return std::nullopt;
    count *= static_cast<uint64_t>(dim);
  }
  return count;
}

const Tensor *SafetensorsFile::find(const std::string &name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

Status SafetensorsFile::copyTensor(const std::string &name, DType dtype,
                                   const std::vector<int64_t> &shape,
                                   void *dst) const {
  const Tensor *t = find(name);
  if (!t)
    return Status::error("'" + path + "' has no tensor named '" + name + "'");
  if (t->dtype != dtype)
    return Status::error("'" + path + "': tensor '" + name + "' has dtype " +
                         dtypeName(t->dtype) + ", expected " +
                         dtypeName(dtype));
  if (t->shape != shape)
    return Status::error("'" + path + "': tensor '" + name + "' has shape " +
                         shapeString(t->shape) + ", expected " +
                         shapeString(shape));
  return readData(*t, dst);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

static Status writeSafetensorsImpl(const std::string &path,
                                   const std::vector<TensorRef> &tensors,
                                   const Metadata &metadata) {
  auto fail = [&](const std::string &cause) {
    return Status::error("cannot write safetensors file '" + path +
                         "': " + cause);
  };
  std::unordered_map<std::string, size_t> seen;
  std::vector<uint64_t> sizes;
  sizes.reserve(tensors.size());
  for (const TensorRef &t : tensors) {
    if (t.name == kMetadataKey)
      return fail("the tensor name \"__metadata__\" is reserved");
    if (!isValidUtf8(t.name))
      return fail("tensor name '" + t.name + "' is not valid UTF-8");
    if (!seen.emplace(t.name, sizes.size()).second)
      return fail("duplicate tensor name '" + t.name + "'");
    std::optional<uint64_t> count = elementCount(t.shape);
    if (!count)
      return fail("tensor '" + t.name + "' has an invalid shape " +
                  shapeString(t.shape));
    uint64_t bytes = *count * dtypeSize(t.dtype);
    if (bytes > 0 && !t.data)
      return fail("tensor '" + t.name + "' has no data");
    sizes.push_back(bytes);
  }
  for (const auto &[key, value] : metadata)
    if (!isValidUtf8(key) || !isValidUtf8(value))
      return fail("metadata entry '" + key + "' is not valid UTF-8");

  // Members in the order written: the tensors as given, then the metadata.
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef &t = tensors[i];
    nlohmann::ordered_json &entry = root[t.name];
    entry["dtype"] = dtypeName(t.dtype);
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + sizes[i]};
    offset += sizes[i];
  }
  if (!metadata.empty())
    root[kMetadataKey] = metadata;
  std::string header = root.dump();
  while ((8 + header.size()) % 8 != 0)
    header += ' ';

  return detail::writeFileAtomically(
      path, "safetensors file", [&](std::FILE *file) -> Status {
        uint64_t n = header.size();
        unsigned char length[8];
        for (int k = 0; k < 8; ++k)
          length[k] = static_cast<unsigned char>(n >> (8 * k));
        if (Status s = detail::writeAll(file, length, 8, path); !s.ok())
          return s;
        if (Status s = detail::writeAll(file, header.data(), header.size(),
                                        path);
            !s.ok())
          return s;
        for (size_t i = 0; i < tensors.size(); ++i)
          if (sizes[i] > 0)
            if (Status s = detail::writeAll(file, tensors[i].data, sizes[i],
                                            path);
                !s.ok())
              return s;
        return Status::success();
      });
}

Status writeSafetensors(const std::string &path,
                        const std::vector<TensorRef> &tensors,
                        const Metadata &metadata) {
  try {
    return writeSafetensorsImpl(path, tensors, metadata);
  } catch (const std::exception &e) {
    return Status::error("cannot write safetensors file '" + path +
                         "': " + e.what());
  }
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {
/// Closes a file descriptor on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0)
      ::close(fd);
  }
};

bool preadAll(int fd, void *dst, uint64_t size, uint64_t offset) {
  char *out = static_cast<char *>(dst);
  while (size > 0) {
    size_t chunk = size < (uint64_t(1) << 30) ? size : (size_t(1) << 30);
    ssize_t n = ::pread(fd, out, chunk, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    out += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

struct Entry {
  size_t tensor; // position in file.tensors
  uint64_t begin, end;
};
} // namespace

Status SafetensorsFile::readData(const Tensor &t, void *dst) const {
  if (t.byteSize == 0)
    return Status::success();
  if (t.data.size() == t.byteSize) {
    std::memcpy(dst, t.data.data(), t.byteSize);
    return Status::success();
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error("cannot open '" + path + "': " + errnoMessage(errno));
  FdCloser closer{fd};
  if (!preadAll(fd, dst, t.byteSize, t.fileOffset))
    return Status::error("cannot read tensor '" + t.name + "' from '" + path +
                         "' (was the file changed after it was opened?)");
  return Status::success();
}

/// The header's JSON object; an error when it is not one or gives a key twice.
static Result<nlohmann::json> parseHeader(const std::string &header) {
  ParsedJson parsed;
  try {
    parsed = parseJson(header);
  } catch (const nlohmann::json::parse_error &e) {
    return Result<nlohmann::json>::error("malformed header JSON: " + jsonErrorText(e));
  }
  if (!parsed.value.is_object())
    return Result<nlohmann::json>::error("malformed header: not a JSON object");
  const std::vector<std::string> &dup = parsed.duplicate;
  if (dup.empty())
    return std::move(parsed.value);
  std::string why = "tensor '" + dup[0] + "': duplicate key '" + dup.back() + "'";
  if (dup.size() == 1)
    why = dup[0] == kMetadataKey ? "duplicate \"__metadata__\""
                                 : "tensor '" + dup[0] + "': duplicate tensor name";
  else if (dup.size() == 2 && dup[0] == kMetadataKey)
    why = "duplicate metadata key '" + dup[1] + "'";
  return Result<nlohmann::json>::error(why);
}

/// One header entry's tensor (dtype, shape; not its name) and the byte
/// range [first, second) of its data; errors name the cause only.
static Result<Tensor> parseTensorEntry(const nlohmann::json &value,
                                       std::pair<uint64_t, uint64_t> &range) {
  using R = Result<Tensor>;
  if (!value.is_object())
    return R::error("header entry is not an object");
  auto dtype = value.find("dtype"), shape = value.find("shape"),
       offsets = value.find("data_offsets");
  if (dtype == value.end() || !dtype->is_string())
    return R::error("missing or non-string \"dtype\"");
  std::optional<DType> dt = parseDType(dtype->get<std::string>());
  if (!dt)
    return R::error("unknown dtype '" + dtype->get<std::string>() + "'");
  if (shape == value.end() || !shape->is_array())
    return R::error("missing or non-array \"shape\"");
  Tensor tensor;
  tensor.dtype = *dt;
  for (const nlohmann::json &d : *shape) {
    std::optional<int64_t> dim = nonNegativeInteger(d);
    if (!dim)
      return R::error("shape entries must be non-negative integers");
    tensor.shape.push_back(*dim);
  }
  std::optional<int64_t> first, last;
  if (offsets != value.end() && offsets->is_array() && offsets->size() == 2)
    first = nonNegativeInteger((*offsets)[0]), last = nonNegativeInteger((*offsets)[1]);
  if (!first || !last || *last < *first)
    return R::error("\"data_offsets\" must be [BEGIN, END] with "
                    "0 <= BEGIN <= END");
  uint64_t begin = static_cast<uint64_t>(*first);
  uint64_t end = static_cast<uint64_t>(*last);
  std::optional<uint64_t> count = elementCount(tensor.shape);
  if (!count || *count > UINT64_MAX / dtypeSize(tensor.dtype))
    return R::error("shape " + shapeString(tensor.shape) + " is too large");
  uint64_t expected = *count * dtypeSize(tensor.dtype);
  if (end - begin != expected)
    return R::error("shape " + shapeString(tensor.shape) + " of " + dtypeName(tensor.dtype) +
                    " needs " + std::to_string(expected) + " bytes but data_offsets [" +
                    std::to_string(begin) + ", " + std::to_string(end) + "] span " +
                    std::to_string(end - begin));
  range = {begin, end};
  return tensor;
}

/// The entries, sorted by offset, cover the data section of `dataSize`
/// bytes exactly: no overlap, no gap, nothing past its end, no excess.
static Status checkCoverage(const std::vector<Entry> &sorted, const std::vector<Tensor> &tensors,
                            uint64_t dataSize) {
  uint64_t cursor = 0;
  const Entry *previous = nullptr;
  for (const Entry &e : sorted) {
    const std::string &name = tensors[e.tensor].name;
    if (e.begin < cursor)
      return Status::error("data of tensors '" + tensors[previous->tensor].name + "' and '" + name +
                           "' overlap");
    if (e.begin > cursor)
      return Status::error("gap of " + std::to_string(e.begin - cursor) +
                           " bytes in the data section before tensor '" + name + "'");
    if (e.end > dataSize)
      return Status::error("truncated: tensor '" + name + "' ends at data offset " +
                           std::to_string(e.end) + " but the data section has only " +
                           std::to_string(dataSize) + " bytes");
    cursor = e.end;
    previous = &e;
  }
  if (cursor != dataSize)
    return Status::error("corrupt: " + std::to_string(dataSize - cursor) +
                         " trailing bytes after the last tensor");
  return Status::success();
}

static Result<SafetensorsFile> readSafetensorsImpl(const std::string &path,
                                                   bool withData) {
  auto fail = [&](const std::string &cause) {
    return Result<SafetensorsFile>::error("safetensors file '" + path +
                                          "': " + cause);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail("cannot open: " + errnoMessage(errno));
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return fail("cannot stat: " + errnoMessage(errno));
  if (!S_ISREG(st.st_mode))
    return fail("not a regular file");
  uint64_t fileSize = static_cast<uint64_t>(st.st_size);
  if (fileSize < 8)
    return fail("truncated: " + std::to_string(fileSize) +
                " bytes, too short for the 8-byte header length");
  unsigned char lengthBytes[8];
  if (!preadAll(fd, lengthBytes, 8, 0))
    return fail("cannot read the header length");
  uint64_t headerSize = 0;
  for (int k = 7; k >= 0; --k)
    headerSize = (headerSize << 8) | lengthBytes[k];
  if (headerSize > kMaxHeaderBytes)
    return fail("corrupt: header length " + std::to_string(headerSize) +
                " is larger than the 100 MiB limit");
  if (headerSize > fileSize - 8)
    return fail("truncated: header length " + std::to_string(headerSize) +
                " exceeds the " + std::to_string(fileSize - 8) +
                " bytes after the length field");
  std::string header(headerSize, '\0');
  if (!preadAll(fd, header.data(), headerSize, 8))
    return fail("cannot read the header");

  Result<nlohmann::json> parsed = parseHeader(header);
  if (!parsed.ok())
    return fail(parsed.message());
  const nlohmann::json &root = *parsed;

  SafetensorsFile file;
  file.path = path;
  std::vector<Entry> entries;
  std::pair<uint64_t, uint64_t> range; // of the tensor's data
  for (const auto &[name, value] : root.items()) {
    if (name == kMetadataKey) {
      if (value.is_null())
        continue;
      if (!value.is_object())
        return fail("\"__metadata__\" is not an object");
      for (const auto &[key, v] : value.items()) {
        if (!v.is_string())
          return fail("metadata value for '" + key + "' is not a string");
        file.metadata.emplace(key, v.get<std::string>());
      }
      continue;
    }
    Result<Tensor> tensor = parseTensorEntry(value, range);
    if (!tensor.ok())
      return fail("tensor '" + name + "': " + tensor.message());
    tensor->name = name;
    if (file.index.count(name))
      return fail("tensor '" + name + "': duplicate tensor name");
    file.index.emplace(name, file.tensors.size());
    entries.push_back({file.tensors.size(), range.first, range.second});
    file.tensors.push_back(std::move(*tensor));
  }

  // The data section must be covered exactly: no overlap, no gap, no excess.
  uint64_t dataSize = fileSize - 8 - headerSize;
  std::vector<Entry> sorted = entries;
  std::sort(sorted.begin(), sorted.end(), [](const Entry &a, const Entry &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  if (Status covered = checkCoverage(sorted, file.tensors, dataSize); !covered.ok())
    return fail(covered.message());

  for (const Entry &e : sorted) {
    Tensor &t = file.tensors[e.tensor];
    t.fileOffset = 8 + headerSize + e.begin;
    t.byteSize = e.end - e.begin;
    if (!withData)
      continue;
    t.data.resize(e.end - e.begin);
    if (!t.data.empty() &&
        !preadAll(fd, t.data.data(), t.data.size(), 8 + headerSize + e.begin))
      return fail("cannot read the data of tensor '" + t.name + "'");
  }
  // Present tensors in data order.
  std::vector<Tensor> ordered;
  ordered.reserve(sorted.size());
  file.index.clear();
  for (const Entry &e : sorted) {
    file.index.emplace(file.tensors[e.tensor].name, ordered.size());
    ordered.push_back(std::move(file.tensors[e.tensor]));
  }
  file.tensors = std::move(ordered);
  return file;
}

Result<SafetensorsFile> readSafetensors(const std::string &path) {
  try {
    return readSafetensorsImpl(path, /*withData=*/true);
  } catch (const std::exception &e) {
    return Result<SafetensorsFile>::error("safetensors file '" + path +
                                          "': " + e.what());
  }
}

Result<SafetensorsFile> readSafetensorsHeader(const std::string &path) {
  try {
    return readSafetensorsImpl(path, /*withData=*/false);
  } catch (const std::exception &e) {
    return Result<SafetensorsFile>::error("safetensors file '" + path +
                                          "': " + e.what());
  }
}

} // namespace merak::rt
