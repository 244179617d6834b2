//===- host_device_fake.h - What the fake CUDA runtime recorded -*- C++ -*-===//
//
// host_device_fake.cpp's record of the CUDA runtime calls it served, and
// switches that make them fail, for the tests linked with it.
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_CUDA_TEST_HOST_DEVICE_FAKE_H
#define MERAK_RT_CUDA_TEST_HOST_DEVICE_FAKE_H

struct FakeCalls {
  int memcpys = 0, streamSyncs = 0, mallocs = 0, frees = 0, mallocHosts = 0, freeHosts = 0;
  int lastKind = -1;          ///< the last cudaMemcpyAsync's cudaMemcpyKind
  void *lastStream = nullptr; ///< the last stream a copy or memset used
  bool failMemcpy = false, failAlloc = false;
};
extern FakeCalls gFakeCalls;

#endif // MERAK_RT_CUDA_TEST_HOST_DEVICE_FAKE_H
