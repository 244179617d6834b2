//===- collectives_util.h - Shared by the collectives' sources -*- C++ -*-===//
//
// Internal to the runtime: what collectives.cpp (blocking) and
// collectives_async.cpp (started collectives) both need.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_SRC_COLLECTIVES_UTIL_H
#define MERAK_RT_SRC_COLLECTIVES_UTIL_H

#include "merak_rt/collectives.h"
#include "merak_rt/comm.h"

namespace merak::rt::cpu::detail {

/// The communicator axis of a mesh group as the compiler names it.
inline Axis axisOf(Group g) {
  switch (g) {
  case Group::DP:
    return Axis::DP;
  case Group::TP:
    return Axis::TP;
  case Group::PP:
    return Axis::PP;
  }
  return Axis::World;
}

} // namespace merak::rt::cpu::detail

#endif
