//===- array_data.cpp - Sample arrays for non-token models ----------------===//
#include "merak_rt/array_data.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

namespace merak::rt {
namespace {

const char *npyDescr(DType t) {
  switch (t) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::BOOL:
    return "|b1";
  default:
    return nullptr;
  }
}

std::string shapeText(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Parses a version 1/2/3 .npy file: returns its descr, shape and the byte
/// offset of the data.
Status parseNpy(const std::string &path, const std::vector<char> &file,
                std::string &descr, std::vector<int64_t> &shape,
                size_t &dataOffset) {
  auto bad = [&](const std::string &why) {
    return Status::error(path + ": not a readable .npy file (" + why + ")");
  };
  if (file.size() < 10 || std::memcmp(file.data(), "\x93NUMPY", 6) != 0)
    return bad("no NUMPY magic");
  int major = static_cast<unsigned char>(file[6]);
  size_t headerLen, start;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(file[8]) |
                (static_cast<unsigned char>(file[9]) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12)
      return bad("truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<unsigned char>(file[8 + i]))
                   << (8 * i);
    start = 12;
  } else {
    return bad("version " + std::to_string(major));
  }
  if (start + headerLen > file.size())
    return bad("truncated header");
  std::string header(file.data() + start, headerLen);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']*)'")))
    return bad("no descr");
  descr = m[1];
  if (std::regex_search(header, std::regex("'fortran_order':\\s*True")))
    return bad("Fortran order; save it C-contiguous");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    return bad("no shape");
  shape.clear();
  std::stringstream dims(m[1].str());
  std::string tok;
  while (std::getline(dims, tok, ',')) {
    tok.erase(0, tok.find_first_not_of(" \t"));
    if (tok.empty())
      continue;
    char *end = nullptr;
    long long v = std::strtoll(tok.c_str(), &end, 10);
    if (v < 0 || (end && *end && *end != ' ' && *end != 'L'))
      return bad("bad shape");
    shape.push_back(v);
  }
  dataOffset = start + headerLen;
  return Status::success();
}

/// An integer array's values against spec.indexLimit: the first value
/// outside [0, limit), by sample and element.
template <class T>
Status checkIndexValues(const std::string &path, const ArraySpec &spec, const T *v, int64_t n,
                        int64_t perSample) {
  for (int64_t i = 0; i < n; ++i)
    if ((v[i] < 0 || static_cast<int64_t>(v[i]) >= spec.indexLimit) &&
        (!spec.ignoreIndex || static_cast<int64_t>(v[i]) != *spec.ignoreIndex))
      return Status::error(path + ": value " + std::to_string(v[i]) + " at sample " +
                           std::to_string(i / perSample) + " (element " +
                           std::to_string(i % perSample) + ") of input '" + spec.name +
                           "' is outside [0, " + std::to_string(spec.indexLimit) +
                           "), the range the model indexes with it");
  return Status::success();
}

Status checkIndices(const ArrayDataset::Array &a, const ArraySpec &spec) {
  if (spec.indexLimit <= 0)
    return Status::success();
  int64_t perSample = 1;
  for (int64_t d : spec.sampleShape)
    perSample *= d;
  if (spec.dtype == DType::I64)
    return checkIndexValues(a.path, spec, reinterpret_cast<const int64_t *>(a.data.data()),
                            static_cast<int64_t>(a.data.size() / 8), perSample);
  if (spec.dtype == DType::I32)
    return checkIndexValues(a.path, spec, reinterpret_cast<const int32_t *>(a.data.data()),
                            static_cast<int64_t>(a.data.size() / 4), perSample);
  return Status::success();
}

} // namespace

Result<ArrayDataset> ArrayDataset::open(const std::string &dir,
                                        const std::vector<ArraySpec> &specs,
                                        Sampler sampler, uint64_t seed) {
  ArrayDataset ds;
  ds.sampler_ = sampler;
  ds.seed_ = seed;
  for (const ArraySpec &spec : specs) {
    Array a;
    a.path = dir + "/" + spec.name + ".npy";
    std::ifstream in(a.path, std::ios::binary);
    if (!in)
      return Status::error(a.path + ": cannot open (--data names a directory "
                           "with one .npy file per input of this model: " +
                           spec.name + ".npy)");
    std::vector<char> file((std::istreambuf_iterator<char>(in)),
                           std::istreambuf_iterator<char>());
    std::string descr;
    std::vector<int64_t> shape;
    size_t offset = 0;
    if (Status s = parseNpy(a.path, file, descr, shape, offset); !s.ok())
      return s;
    const char *want = npyDescr(spec.dtype);
    if (!want || descr != want)
      return Status::error(a.path + ": dtype '" + descr + "', but input '" +
                           spec.name + "' is " + dtypeName(spec.dtype) +
                           " ('" + (want ? want : "?") + "')");
    std::vector<int64_t> sample(shape.begin() + (shape.empty() ? 0 : 1),
                                shape.end());
    if (shape.empty() || sample != spec.sampleShape)
      return Status::error(a.path + ": shape " + shapeText(shape) +
                           ", expected [N] + " + shapeText(spec.sampleShape) +
                           " for input '" + spec.name + "'");
    if (shape[0] < 1)
      return Status::error(a.path + ": no samples");
    if (ds.samples_ && shape[0] != ds.samples_)
      return Status::error(a.path + ": " + std::to_string(shape[0]) +
                           " samples, but " + ds.arrays_[0].path + " has " +
                           std::to_string(ds.samples_));
    ds.samples_ = shape[0];
    a.dtype = spec.dtype;
    a.rowBytes = static_cast<int64_t>(dtypeSize(spec.dtype));
    for (int64_t d : spec.sampleShape)
      a.rowBytes *= d;
    if (file.size() - offset < static_cast<size_t>(a.rowBytes * shape[0]))
      return Status::error(a.path + ": truncated data");
    a.data.assign(file.begin() + offset,
                  file.begin() + offset + a.rowBytes * shape[0]);
    if (Status s = checkIndices(a, spec); !s.ok())
      return s;
    ds.arrays_.push_back(std::move(a));
  }
  return ds;
}

int64_t ArrayDataset::sampleOf(int64_t step, int64_t globalBatch,
                               int64_t row) const {
  uint64_t n = static_cast<uint64_t>(samples_);
  if (sampler_ == Sampler::Sequential) {
    unsigned __int128 i = static_cast<unsigned __int128>(step) *
                              static_cast<uint64_t>(globalBatch) +
                          static_cast<uint64_t>(row);
    return static_cast<int64_t>(i % n);
  }
  uint64_t h = splitmix64(splitmix64(splitmix64(seed_) ^ static_cast<uint64_t>(step)) ^
                          static_cast<uint64_t>(row));
  uint64_t limit = UINT64_MAX - (UINT64_MAX % n + 1) % n; // largest multiple - 1
  while (h > limit)
    h = splitmix64(h);
  return static_cast<int64_t>(h % n);
}

Status ArrayDataset::fill(size_t i, int64_t step, int64_t globalBatch,
                          int64_t rowBegin, int64_t rowEnd, void *dst) const {
  if (i >= arrays_.size() || step < 0 || rowBegin < 0 || rowEnd > globalBatch ||
      rowBegin > rowEnd)
    return Status::error("internal: bad array fill request");
  const Array &a = arrays_[i];
  char *out = static_cast<char *>(dst);
  for (int64_t r = rowBegin; r < rowEnd; ++r, out += a.rowBytes)
    std::memcpy(out, a.data.data() + sampleOf(step, globalBatch, r) * a.rowBytes,
                a.rowBytes);
  return Status::success();
}

namespace {
template <class I> int64_t countNot(const char *row, int64_t n, int64_t value) {
  int64_t k = 0;
  for (int64_t e = 0; e < n; ++e) {
    I v;
    std::memcpy(&v, row + e * static_cast<int64_t>(sizeof(I)), sizeof(I));
    k += static_cast<int64_t>(v) != value;
  }
  return k;
}
} // namespace

Result<int64_t> ArrayDataset::countOther(size_t i, int64_t step, int64_t globalBatch,
                                         int64_t value) const {
  if (i >= arrays_.size() || step < 0 || globalBatch < 1 ||
      (arrays_[i].dtype != DType::I64 && arrays_[i].dtype != DType::I32))
    return Status::error("internal: bad array count request");
  const Array &a = arrays_[i];
  const bool wide = a.dtype == DType::I64;
  const int64_t n = a.rowBytes / (wide ? 8 : 4);
  int64_t k = 0;
  for (int64_t r = 0; r < globalBatch; ++r) {
    const char *row = a.data.data() + sampleOf(step, globalBatch, r) * a.rowBytes;
    k += wide ? countNot<int64_t>(row, n, value) : countNot<int32_t>(row, n, value);
  }
  return k;
}

} // namespace merak::rt
