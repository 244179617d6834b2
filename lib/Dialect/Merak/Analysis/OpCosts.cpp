//===- OpCosts.cpp - Measured op costs (profile-guided cost model) --------===//
#include "merak/Dialect/Merak/Analysis/OpCosts.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::merak;
namespace json = llvm::json;

std::string mlir::merak::opCostKey(Operation *op) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << op->getName().getStringRef() << "(";
  llvm::interleaveComma(op->getOperandTypes(), os);
  os << ") -> (";
  llvm::interleaveComma(op->getResultTypes(), os);
  os << ")";
  // Inherent attributes only: discardable ones are dialect-prefixed
  // ("merak.offset") and say where a value lives, not what the op costs.
  bool first = true;
  for (NamedAttribute a : op->getAttrs()) {
    if (a.getName().getValue().contains('.'))
      continue;
    os << (first ? " {" : ", ") << a.getName().getValue() << " = ";
    // A large dense constant by its type and a hash of its bytes: the key
    // stays short and the same from run to run.
    auto dense = dyn_cast<DenseElementsAttr>(a.getValue());
    if (dense && !dense.isSplat() && dense.getNumElements() > 16)
    {
      ArrayRef<char> raw = dense.getRawData();
      uint64_t hash = llvm::xxh3_64bits(
          ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(raw.data()), raw.size()));
      os << "dense<" << llvm::format_hex(hash, 18) << "> : " << dense.getType();
    }
    else
      os << a.getValue();
    first = false;
  }
  if (!first)
    os << "}";
  return key;
}

std::optional<double> MeasuredOpCosts::lookup(Operation *op) const {
  auto it = seconds.find(opCostKey(op));
  if (it == seconds.end())
    return std::nullopt;
  return it->second;
}

llvm::Expected<MeasuredOpCosts> mlir::merak::readMeasuredOpCosts(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &msg) -> llvm::Error {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + msg);
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("cannot read: " + buffer.getError().message());
  llvm::Expected<json::Value> parsed = json::parse((*buffer)->getBuffer());
  if (!parsed)
    return fail(llvm::toString(parsed.takeError()));
  const json::Object *root = parsed->getAsObject();
  if (!root || root->getString("format") != "merak-op-costs")
    return fail("not an op-cost file (written by a training program's --profile-ops): "
                "expected \"format\": \"merak-op-costs\"");
  if (root->getInteger("version") != 1)
    return fail("version: expected 1");
  MeasuredOpCosts costs;
  costs.path = path.str();
  if (std::optional<llvm::StringRef> t = root->getString("target"))
    costs.target = t->str();
  costs.threads = root->getInteger("threads").value_or(0);
  const json::Object *ops = root->getObject("ops");
  if (!ops)
    return fail("ops: expected an object");
  for (const auto &[key, value] : *ops) {
    const json::Object *entry = value.getAsObject();
    std::optional<double> s = entry ? entry->getNumber("seconds") : std::nullopt;
    if (!s || !(*s >= 0))
      return fail("ops[\"" + key.str() + "\"].seconds: expected a number >= 0");
    costs.seconds[key.str()] = *s;
  }
  return costs;
}
