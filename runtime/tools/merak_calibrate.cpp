// merak-calibrate: measures this machine and writes a device profile JSON
// (docs/user-guide.md, "Device profiles") for merak-compile --simulate
// --device-profile.
//
// A device is one rank running one thread (the CPU programs run with
// OMP_NUM_THREADS=1), so devices_per_node is the number of cores and
// memory_bytes the machine's memory divided by them. Measured:
//   flops.f32        best single-threaded rate of the runtime's float GEMM
//                    (cpu::gemm: oneDNN's or OpenBLAS's sgemm), 512..1024
//   memory_bandwidth best single-threaded STREAM triad (a = b + s c)
//   intra_node       MPI ping-pong between ranks 0 and 1 (run under
//                    mpirun -np 2); with one rank, memcpy bandwidth and a
//                    nominal 1 us latency stand in (the "comment" says so)
//   inter_node       not measurable on one machine: a copy of intra_node
// bf16/f16 are left out (the reader takes f32 for them).
#include "merak_rt/kernels.h"

#include <mpi.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double gemmRate() {
#ifdef _OPENMP
  omp_set_num_threads(1); // a device is one single-threaded rank
#endif
  double best = 0;
  for (int n : {512, 768, 1024}) {
    std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n);
    for (int rep = 0; rep < 3; ++rep) {
      double t = now();
      merak::rt::cpu::gemm(false, false, n, n, n, 1.0f, a.data(), b.data(), 0.0f, c.data());
      t = now() - t;
      best = std::max(best, 2.0 * n * n * n / t);
    }
  }
  return best;
}

/// Bytes per second of the triad a = b + s c over three 64 MiB arrays.
double triadBandwidth() {
  const size_t n = size_t(8) << 20;
  std::vector<double> a(n), b(n, 1.0), c(n, 2.0);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double t = now();
    for (size_t i = 0; i < n; ++i)
      a[i] = b[i] + 3.0 * c[i];
    t = now() - t;
    best = std::max(best, 3.0 * n * sizeof(double) / t);
  }
  if (a[n / 2] != 7.0)
    std::fprintf(stderr, "merak-calibrate: triad check failed\n");
  return best;
}

double copyBandwidth() {
  const size_t n = size_t(64) << 20;
  std::vector<char> a(n, 1), b(n);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double t = now();
    std::memcpy(b.data(), a.data(), n);
    // Keep the copy: the compiler must assume the asm reads b.
    asm volatile("" : : "r"(b.data()) : "memory");
    t = now() - t;
    best = std::max(best, n / t);
  }
  return best;
}

/// Ranks 0 and 1 ping-pong: the one-way latency of 8 bytes and the
/// bandwidth of 16 MiB messages.
void pingPong(int rank, double &bandwidth, double &latency) {
  std::vector<char> buf(size_t(16) << 20);
  auto run = [&](int bytes, int reps) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = now();
    for (int i = 0; i < reps; ++i) {
      if (rank == 0) {
        MPI_Send(buf.data(), bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf.data(), bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(buf.data(), bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf.data(), bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    return (now() - t) / (2.0 * reps);
  };
  run(8, 100); // warm up
  latency = run(8, 1000);
  double t = run((int)buf.size(), 20);
  bandwidth = buf.size() / std::max(t - latency, 1e-9);
}

int usage() {
  std::fprintf(stderr, "usage: merak-calibrate [-o FILE] [--name NAME]\n"
                       "  Measures this machine and writes a device profile JSON (default: "
                       "stdout). Run under mpirun -np 2 to measure the link.\n");
  return 2;
}
} // namespace

int main(int argc, char **argv) {
  std::string out = "-", name = "cpu";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-o" || a == "--name") && i + 1 < argc)
      (a == "-o" ? out : name) = argv[++i];
    else if (a == "-h" || a == "--help")
      return usage(), 0;
    else
      return usage();
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Rank 0 measures compute and memory first, while the others wait.
  double flops = 0, mem = 0, linkBw = 0, linkLat = 1e-6;
  if (rank == 0) {
    flops = gemmRate();
    mem = triadBandwidth();
  }
  bool measured = size >= 2;
  if (measured)
    pingPong(rank, linkBw, linkLat);
  else
    linkBw = copyBandwidth();
  if (rank != 0) {
    MPI_Finalize();
    return 0;
  }
  long cores = std::max(1u, std::thread::hardware_concurrency());
  double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE)) / cores;
  std::string comment =
      std::string("measured by merak-calibrate on this machine; one device = one "
                  "single-threaded rank; flops.f32: best runtime sgemm 512..1024; "
                  "memory_bandwidth: STREAM triad; intra_node: ") +
      (measured ? "MPI ping-pong between two ranks"
                : "memcpy bandwidth and a nominal 1 us latency (stand-in: run under mpirun "
                  "-np 2 to measure)") +
      "; inter_node: a copy of intra_node (not measurable on one machine)";
  FILE *f = out == "-" ? stdout : std::fopen(out.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "merak-calibrate: cannot write %s\n", out.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::fprintf(f,
               "{\n  \"name\": \"%s\",\n  \"comment\": \"%s\",\n"
               "  \"flops\": { \"f32\": %.6g },\n  \"efficiency\": 1,\n"
               "  \"memory_bandwidth\": %.6g,\n  \"memory_bytes\": %.6g,\n"
               "  \"devices_per_node\": %ld,\n"
               "  \"intra_node\": { \"bandwidth\": %.6g, \"latency\": %.6g },\n"
               "  \"inter_node\": { \"bandwidth\": %.6g, \"latency\": %.6g }\n}\n",
               name.c_str(), comment.c_str(), flops, mem, memory, cores, linkBw, linkLat, linkBw,
               linkLat);
  if (f != stdout)
    std::fclose(f);
  MPI_Finalize();
  return 0;
}
