//===- DeviceProfile.cpp - Device profiles for the cost model -------------===//
#include "merak/Dialect/Merak/Analysis/DeviceProfile.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::merak;
namespace json = llvm::json;

double DeviceProfile::flops(llvm::StringRef dtype) const {
  if (dtype == "bf16")
    return flopsBF16;
  if (dtype == "f16")
    return flopsF16;
  return flopsF32;
}

namespace {
/// Reads fields of one JSON object, recording the first error.
struct FieldReader {
  llvm::StringRef file;
  std::string error;

  llvm::Error fail(const llvm::Twine &field, const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   file + ": " + field + ": " + msg);
  }
  /// A required number; `positive`: > 0, otherwise >= 0.
  llvm::Error number(const json::Object &o, llvm::StringRef key, const llvm::Twine &path,
                     double &out, bool positive = true) {
    const json::Value *v = o.get(key);
    if (!v)
      return fail(path, "missing");
    std::optional<double> d = v->getAsNumber();
    if (!d)
      return fail(path, "expected a number");
    if (positive ? !(*d > 0) : !(*d >= 0))
      return fail(path, positive ? "must be positive" : "must not be negative");
    out = *d;
    return llvm::Error::success();
  }
  llvm::Error link(const json::Object &o, llvm::StringRef key, LinkProfile &out) {
    const json::Object *l = o.getObject(key);
    if (!l)
      return fail(key, o.get(key) ? "expected an object" : "missing");
    if (llvm::Error e = number(*l, "bandwidth", key + ".bandwidth", out.bandwidth))
      return e;
    return number(*l, "latency", key + ".latency", out.latency, /*positive=*/false);
  }
};
} // namespace

llvm::Expected<DeviceProfile> mlir::merak::parseDeviceProfile(llvm::StringRef text,
                                                              llvm::StringRef file) {
  FieldReader r{file, {}};
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   file + ": " + llvm::toString(parsed.takeError()));
  const json::Object *o = parsed->getAsObject();
  if (!o)
    return r.fail("(top level)", "expected an object");
  DeviceProfile p;
  std::optional<llvm::StringRef> name = o->getString("name");
  if (!name)
    return r.fail("name", o->get("name") ? "expected a string" : "missing");
  p.name = name->str();
  const json::Object *flops = o->getObject("flops");
  if (!flops)
    return r.fail("flops", o->get("flops") ? "expected an object" : "missing");
  if (llvm::Error e = r.number(*flops, "f32", "flops.f32", p.flopsF32))
    return std::move(e);
  // bf16 / f16 default to f32 when absent (a CPU without them).
  p.flopsBF16 = p.flopsF16 = p.flopsF32;
  for (auto [key, out] : {std::pair{"bf16", &p.flopsBF16}, std::pair{"f16", &p.flopsF16}})
    if (flops->get(key))
      if (llvm::Error e = r.number(*flops, key, "flops." + llvm::Twine(key), *out))
        return std::move(e);
  if (llvm::Error e = r.number(*o, "memory_bandwidth", "memory_bandwidth", p.memoryBandwidth))
    return std::move(e);
  if (llvm::Error e = r.number(*o, "memory_bytes", "memory_bytes", p.memoryBytes))
    return std::move(e);
  double perNode = 0;
  if (llvm::Error e = r.number(*o, "devices_per_node", "devices_per_node", perNode))
    return std::move(e);
  if (perNode != (double)(int64_t)perNode)
    return r.fail("devices_per_node", "expected an integer");
  p.devicesPerNode = (int64_t)perNode;
  if (llvm::Error e = r.link(*o, "intra_node", p.intraNode))
    return std::move(e);
  if (llvm::Error e = r.link(*o, "inter_node", p.interNode))
    return std::move(e);
  if (o->get("efficiency")) {
    if (llvm::Error e = r.number(*o, "efficiency", "efficiency", p.efficiency))
      return std::move(e);
    if (p.efficiency > 1)
      return r.fail("efficiency", "must be at most 1");
  }
  return p;
}

llvm::Expected<DeviceProfile> mlir::merak::readDeviceProfile(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return llvm::createStringError(buf.getError(),
                                   "cannot read " + path + ": " + buf.getError().message());
  return parseDeviceProfile((*buf)->getBuffer(), path);
}

double mlir::merak::ringAllReduceSeconds(double bytes, int64_t n, const LinkProfile &link) {
  return 2 * ringGatherSeconds(bytes, n, link);
}

double mlir::merak::ringGatherSeconds(double bytes, int64_t n, const LinkProfile &link) {
  if (n <= 1)
    return 0.0;
  return (double)(n - 1) / n * bytes / link.bandwidth + (n - 1) * link.latency;
}

double mlir::merak::allToAllSeconds(double bytes, int64_t n, int64_t perNode,
                                    const DeviceProfile &p, bool twoLevel) {
  if (n <= 1)
    return 0.0;
  const int64_t L = std::clamp<int64_t>(perNode, 1, n), nodes = (n + L - 1) / L;
  const LinkProfile &in = p.intraNode, &out = p.interNode;
  if (twoLevel && nodes > 1)
    return (L - 1) * in.latency + bytes * (L - 1) / L / in.bandwidth +
           (nodes - 1) * out.latency + bytes * (nodes - 1) / nodes / out.bandwidth;
  return (L - 1) * in.latency + (n - L) * out.latency +
         std::max(bytes * (L - 1) / n / in.bandwidth, bytes * (n - L) / n / out.bandwidth);
}

std::optional<int64_t> mlir::merak::parseByteSize(llvm::StringRef text) {
  text = text.trim();
  if (text.empty())
    return 0;
  size_t digits = 0;
  while (digits < text.size() && isdigit((unsigned char)text[digits]))
    ++digits;
  uint64_t n = 0;
  if (digits == 0 || text.take_front(digits).getAsInteger(10, n))
    return std::nullopt;
  StringRef suffix = text.drop_front(digits).trim();
  uint64_t scale = 1;
  std::pair<StringRef, uint64_t> units[] = {
      {"", 1},          {"B", 1},           {"KB", 1000ull},          {"MB", 1000000ull},
      {"GB", 1000000000ull}, {"TB", 1000000000000ull}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20},
      {"GiB", 1ull << 30},   {"TiB", 1ull << 40}};
  bool known = false;
  for (auto &[u, f] : units)
    if (suffix.equals_insensitive(u))
      scale = f, known = true;
  if (!known || n > (uint64_t)INT64_MAX / scale)
    return std::nullopt;
  return (int64_t)(n * scale);
}

