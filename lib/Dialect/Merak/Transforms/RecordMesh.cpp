//===- RecordMesh.cpp - merak-record-mesh ---------------------------------===//
//
// Records the device mesh on the module (#merak.mesh) so that every later
// phase and the program writer read it from the IR, not from options.
//
//===----------------------------------------------------------------------===//
#include "merak/Dialect/Merak/IR/MerakOps.h"
#include "merak/Dialect/Merak/Transforms/Passes.h"

namespace mlir::merak {
#define GEN_PASS_DEF_MERAKRECORDMESH
#include "merak/Dialect/Merak/Transforms/Passes.h.inc"
} // namespace mlir::merak

#define DEBUG_TYPE "merak-record-mesh"

using namespace mlir;
using namespace mlir::merak;

namespace {
struct MerakRecordMeshPass : merak::impl::MerakRecordMeshBase<MerakRecordMeshPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dp < 1 || tp < 1 || pp < 1) {
      module.emitError("merak-record-mesh: dp, tp and pp must be at least 1");
      return signalPassFailure();
    }
    if (ep < 1 || dp % ep != 0) {
      module.emitError("merak-record-mesh: ep (") << (int64_t)ep << ") must divide dp ("
                                                  << (int64_t)dp << ")";
      return signalPassFailure();
    }
    if (dp * tp * pp == 1)
      return; // serial: no mesh
    module->setAttr(kMeshAttr, MeshAttr::get(module.getContext(), dp, tp, pp, ep));
  }
};
} // namespace
