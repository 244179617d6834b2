//===- mesh.cpp - The device mesh's coordinates and names ------------------===//
//
// Rank <-> (pp, dp, tp) coordinates, axis names and element sizes of
// merak_rt/comm.h: plain arithmetic, apart from comm.cpp's MPI.
//
//===----------------------------------------------------------------------===//
#include "merak_rt/comm.h"

namespace merak::rt {

const char *axisName(Axis a) {
  switch (a) {
  case Axis::World:
    return "world";
  case Axis::PP:
    return "pp";
  case Axis::DP:
    return "dp";
  case Axis::TP:
    return "tp";
  case Axis::EP:
    return "ep";
  case Axis::EDP:
    return "edp";
  }
  return "?";
}

MeshCoord meshCoordOf(const MeshShape &m, int rank) {
  MeshCoord c;
  c.tp = rank % m.tp;
  c.dp = (rank / m.tp) % m.dp;
  c.pp = rank / (m.tp * m.dp);
  return c;
}

int meshRankOf(const MeshShape &m, const MeshCoord &c) {
  return (c.pp * m.dp + c.dp) * m.tp + c.tp;
}

int commTypeSize(CommType t) {
  switch (t) {
  case CommType::BF16:
    return 2;
  case CommType::F32:
    return 4;
  case CommType::F64:
  case CommType::I64:
    return 8;
  }
  return 0;
}

} // namespace merak::rt
