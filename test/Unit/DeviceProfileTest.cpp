//===- DeviceProfileTest.cpp - The device profile reader and collectives --===//
#include "merak/Dialect/Merak/Analysis/DeviceProfile.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/JSON.h"
#include <gtest/gtest.h>

using namespace mlir::merak;

namespace {
const char *kGood = R"({
  "name": "test-node",
  "comment": "ignored",
  "flops": {"f32": 1e12, "bf16": 4e12},
  "efficiency": 0.5,
  "memory_bandwidth": 2e12,
  "memory_bytes": 8e10,
  "devices_per_node": 8,
  "intra_node": {"bandwidth": 4e11, "latency": 2e-6},
  "inter_node": {"bandwidth": 5e10, "latency": 1e-5}
})";

/// The error of parsing kGood with `edit` applied to its JSON object.
std::string errorAfter(llvm::function_ref<void(llvm::json::Object &)> edit) {
  llvm::json::Value v = cantFail(llvm::json::parse(kGood));
  edit(*v.getAsObject());
  std::string text;
  llvm::raw_string_ostream os(text);
  os << v;
  llvm::Expected<DeviceProfile> p = parseDeviceProfile(text, "p.json");
  if (p)
    return "";
  return llvm::toString(p.takeError());
}
} // namespace

TEST(DeviceProfile, ReadsEveryField) {
  llvm::Expected<DeviceProfile> p = parseDeviceProfile(kGood, "p.json");
  ASSERT_TRUE((bool)p) << llvm::toString(p.takeError());
  EXPECT_EQ(p->name, "test-node");
  EXPECT_DOUBLE_EQ(p->flops("f32"), 1e12);
  EXPECT_DOUBLE_EQ(p->flops("bf16"), 4e12);
  EXPECT_DOUBLE_EQ(p->flops("f16"), 1e12); // absent: f32's
  EXPECT_DOUBLE_EQ(p->achievedFlops("bf16"), 2e12);
  EXPECT_DOUBLE_EQ(p->memoryBandwidth, 2e12);
  EXPECT_DOUBLE_EQ(p->memoryBytes, 8e10);
  EXPECT_EQ(p->devicesPerNode, 8);
  EXPECT_DOUBLE_EQ(p->intraNode.bandwidth, 4e11);
  EXPECT_DOUBLE_EQ(p->intraNode.latency, 2e-6);
  EXPECT_DOUBLE_EQ(p->interNode.bandwidth, 5e10);
  EXPECT_DOUBLE_EQ(p->interNode.latency, 1e-5);
  EXPECT_DOUBLE_EQ(p->intraNode.seconds(4e5), 2e-6 + 1e-6);
}

TEST(DeviceProfile, EfficiencyDefaultsToOne) {
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) { o.erase("efficiency"); }), "");
}

TEST(DeviceProfile, MissingFieldsAreNamed) {
  for (const char *field : {"name", "flops", "memory_bandwidth", "memory_bytes",
                            "devices_per_node", "intra_node", "inter_node"}) {
    SCOPED_TRACE(field);
    EXPECT_EQ(errorAfter([&](llvm::json::Object &o) { o.erase(field); }),
              std::string("p.json: ") + field + ": missing");
  }
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) { o.getObject("flops")->erase("f32"); }),
            "p.json: flops.f32: missing");
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) {
              o.getObject("intra_node")->erase("bandwidth");
            }),
            "p.json: intra_node.bandwidth: missing");
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) { o.getObject("inter_node")->erase("latency"); }),
            "p.json: inter_node.latency: missing");
}

TEST(DeviceProfile, BadValuesAreNamed) {
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) { o["memory_bandwidth"] = -1.0; }),
            "p.json: memory_bandwidth: must be positive");
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) { o["memory_bytes"] = "lots"; }),
            "p.json: memory_bytes: expected a number");
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) { (*o.getObject("flops"))["bf16"] = 0.0; }),
            "p.json: flops.bf16: must be positive");
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) {
              (*o.getObject("inter_node"))["latency"] = -1e-6;
            }),
            "p.json: inter_node.latency: must not be negative");
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) { o["devices_per_node"] = 2.5; }),
            "p.json: devices_per_node: expected an integer");
  EXPECT_EQ(errorAfter([](llvm::json::Object &o) { o["efficiency"] = 1.5; }),
            "p.json: efficiency: must be at most 1");
  llvm::Expected<DeviceProfile> p = parseDeviceProfile("{", "p.json");
  ASSERT_FALSE((bool)p);
  EXPECT_EQ(llvm::toString(p.takeError()).rfind("p.json: ", 0), 0u);
}

TEST(DeviceProfile, RingAllReduce) {
  LinkProfile link{1e9, 1e-6};
  // 2 (n - 1) / n * bytes / bw + 2 (n - 1) * latency.
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(8e6, 4, link), 2.0 * 3 / 4 * 8e6 / 1e9 + 6e-6);
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(8e6, 2, link), 8e6 / 1e9 + 2e-6);
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(8e6, 1, link), 0.0);
  EXPECT_DOUBLE_EQ(ringGatherSeconds(8e6, 4, link), 3.0 / 4 * 8e6 / 1e9 + 3e-6);
}

TEST(DeviceProfile, AllToAll) {
  DeviceProfile p;
  p.intraNode = {4e11, 2e-6};
  p.interNode = {5e10, 1e-5};
  // 16 ranks on 2 nodes of 8, 16 MB per rank. Flat: 7 intra-node and 8
  // inter-node messages; 7/16 of the bytes over NVLink, 8/16 over the
  // network at once (the network's half is slower).
  const double b = 16e6;
  EXPECT_DOUBLE_EQ(allToAllSeconds(b, 16, 8, p, false),
                   7 * 2e-6 + 8 * 1e-5 + b * 8 / 16 / 5e10);
  // Two-level: 7/8 of the bytes within the node, then 1/2 across in one
  // message.
  EXPECT_DOUBLE_EQ(allToAllSeconds(b, 16, 8, p, true),
                   7 * 2e-6 + b * 7 / 8 / 4e11 + 1e-5 + b / 2 / 5e10);
  // Small parts: the latencies decide, and two levels win.
  EXPECT_LT(allToAllSeconds(1e3, 64, 8, p, true), allToAllSeconds(1e3, 64, 8, p, false));
  // Large ones: the extra pass within the node costs more than 56 saved latencies.
  EXPECT_GT(allToAllSeconds(1e9, 64, 8, p, true), allToAllSeconds(1e9, 64, 8, p, false));
  // One node: both are the intra-node exchange.
  EXPECT_DOUBLE_EQ(allToAllSeconds(b, 8, 8, p, true), 7 * 2e-6 + b * 7 / 8 / 4e11);
  EXPECT_DOUBLE_EQ(allToAllSeconds(b, 8, 8, p, false), 7 * 2e-6 + b * 7 / 8 / 4e11);
  EXPECT_EQ(allToAllSeconds(b, 1, 8, p, false), 0.0);
}
