#!/usr/bin/python3
"""Runs merak_comm_test (test/comm_test_main.cpp) under mpirun.

Usage: comm_test.py MPIRUN MERAK_COMM_TEST CHECK
CHECK: layout | chunked | singleton | mismatch | dead_rank | timeout |
       repeatability | zero | experts
"""
import os
import re
import signal
import subprocess
import sys
import time

MPIRUN, BINARY, CHECK = sys.argv[1], sys.argv[2], sys.argv[3]

# Every rank on this machine; root (CI containers) needs the override.
BASE_ENV = dict(os.environ)
BASE_ENV.update({
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    # Ranks of the job may outnumber the cores.
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
})
for var in ("MERAK_COMM_TIMEOUT", "MERAK_COMM_TEST_CHUNK_ELEMS"):
    BASE_ENV.pop(var, None)


def run(args, np=None, env=None, limit=90):
    """Returns (exit status, stdout + stderr, seconds)."""
    cmd = [BINARY] + args
    if np is not None:
        cmd = [MPIRUN, "--oversubscribe", "-np", str(np)] + cmd
    full_env = dict(BASE_ENV)
    full_env.update(env or {})
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=full_env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        fail(f"{' '.join(cmd)} did not end within {limit} s:\n"
             + out.decode(errors="replace"))
    return proc.returncode, out.decode(errors="replace"), \
        time.monotonic() - start


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def expect_ok(args, np=None, env=None):
    rc, out, secs = run(args, np, env)
    print(f"$ np={np} {' '.join(args)}  ({secs:.2f} s, exit {rc})")
    print(out.rstrip())
    if rc != 0:
        fail(f"exit status {rc}")
    return out


MESHES = [(1, 1, 1), (2, 1, 1), (1, 2, 2), (2, 2, 1), (2, 1, 2), (1, 4, 1),
          (2, 2, 2)]


def check_layout():
    for pp, dp, tp in MESHES:
        out = expect_ok(["layout", str(pp), str(dp), str(tp)], np=pp * dp * tp)
        if f"layout pp={pp} dp={dp} tp={tp}: ok" not in out:
            fail("no 'ok' line")


def check_chunked():
    # 3 elements (bytes, for send/recv) per MPI call: counts 5 and 37 are
    # split into several chunks with a remainder.
    for pp, dp, tp in [(1, 1, 1), (1, 2, 2), (2, 2, 2)]:
        out = expect_ok(["layout", str(pp), str(dp), str(tp)],
                        np=pp * dp * tp,
                        env={"MERAK_COMM_TEST_CHUNK_ELEMS": "3"})
        if f"layout pp={pp} dp={dp} tp={tp}: ok" not in out:
            fail("no 'ok' line")


def check_singleton():
    # No mpirun: MPI's singleton init, world size 1.
    out = expect_ok(["layout", "1", "1", "1"])
    if "layout pp=1 dp=1 tp=1: ok" not in out:
        fail("no 'ok' line")


def check_mismatch():
    rc, out, secs = run(["mismatch"], np=2)
    print(f"$ np=2 mismatch  ({secs:.2f} s, exit {rc})\n{out.rstrip()}")
    want = ("train: error: launched with 2 processes, but this program was "
            "compiled for dp=2 x tp=2 x pp=1 = 4 processes: run "
            "`mpirun -np 4 ...`")
    if rc == 0:
        fail("exit status 0")
    if out.count(want) != 1:
        fail(f"expected exactly one line {want!r}")
    if "unexpectedly" in out:
        fail("init succeeded")
    # And without mpirun (world size 1).
    rc, out, secs = run(["mismatch"])
    print(f"$ mismatch  ({secs:.2f} s, exit {rc})\n{out.rstrip()}")
    if rc != 1 or "launched with 1 processes" not in out:
        fail("singleton mismatch: expected exit 1 and the message")


def check_dead_rank():
    # Rank 1 SIGKILLs itself while ranks 0 and 2 wait in an all-reduce.
    # mpirun notices the death and ends the job by itself (measured: ~1.5 s);
    # the comm timeout (20 s here) is only the backstop.
    rc, out, secs = run(["dead"], np=3, env={"MERAK_COMM_TIMEOUT": "20"})
    print(f"$ np=3 dead  ({secs:.2f} s, exit {rc})\n{out.rstrip()}")
    print(f"dead rank: job ended in {secs:.2f} s")
    if rc == 0:
        fail("exit status 0")
    if secs > 60:
        fail(f"took {secs:.1f} s (> 60 s)")
    # mpirun 4.1.4: "mpirun noticed that process rank 1 with PID ... on
    # node ... exited on signal 9 (Killed)."
    if not re.search(r"process rank 1 .*exited on signal 9", out):
        fail("output does not name the dead rank 1")
    if "completed?" in out:
        fail("an all-reduce completed without the dead rank")


def check_timeout():
    # Rank 2 sleeps instead of joining: ranks 0 and 1 time out after 3 s
    # and abort the job (MPI_Abort), which also ends rank 2.
    rc, out, secs = run(["hang"], np=3, env={"MERAK_COMM_TIMEOUT": "3"})
    print(f"$ np=3 hang  ({secs:.2f} s, exit {rc})\n{out.rstrip()}")
    print(f"timeout: job ended in {secs:.2f} s")
    if rc == 0:
        fail("exit status 0")
    # The node's heartbeat names the rank that does not join (heartbeat.h).
    pat = (r"train: error: rank [01]: all-reduce of gradient bucket 1 on the "
           r"dp group did not complete within 3 s; the rank it waits for: rank 2 "
           r"\(pid \d+, this host\) is not waiting on any communication")
    if not re.search(pat, out):
        fail("no timeout message naming the all-reduce")
    if secs < 3 or secs > 30:
        fail(f"took {secs:.1f} s (expected 3 s + shutdown)")


def check_repeatability():
    for np in (4, 3):
        outs = []
        for _ in range(2):
            out = expect_ok(["repeat"], np=np)
            hashes = [l for l in out.splitlines() if l.startswith("hash ")]
            if len(hashes) != 3:
                fail("expected 3 hash lines")
            outs.append(hashes)
        if outs[0] != outs[1]:
            fail(f"np={np}: two runs differ:\n{outs[0]}\n{outs[1]}")


def check_zero():
    # ZeRO's bucketed reduce-scatter / all-gather / local shard, on groups of
    # 1 (no communication), 2, 3 and 4 ranks.
    for np in (1, 2, 3, 4):
        out = expect_ok(["zero"], np=np)
        if f"zero dp={np}: ok" not in out:
            fail(f"np={np}: no 'ok' line")


def check_experts():
    # Expert parallelism's all-to-all dispatch and combine, mixed and fully
    # skewed routing, on 1 (no communication), 2, 3 and 4 ranks.
    for np in (1, 2, 3, 4):
        out = expect_ok(["experts"], np=np)
        if f"experts ep={np} (1 nodes of {np}): ok" not in out:
            fail(f"np={np}: no 'ok' line")
    # The two-level (hierarchical) all-to-all, with nodes faked by
    # MERAK_RANKS_PER_NODE: 2 nodes of 2, 4 nodes of 1, and 3 ranks over
    # nodes of 2 and 1 (unequal: the flat exchange).
    for np, per, want in ((4, 2, "2 nodes of 2"), (4, 1, "4 nodes of 1"),
                          (3, 2, "nodes of unequal sizes")):
        out = expect_ok(["experts"], np=np,
                        env={"MERAK_RANKS_PER_NODE": str(per)})
        if f"experts ep={np} ({want}): ok" not in out:
            fail(f"np={np} with {per} ranks per node: no 'ok' line with {want!r}")


CHECKS = {
    "zero": check_zero,
    "experts": check_experts,
    "layout": check_layout,
    "chunked": check_chunked,
    "singleton": check_singleton,
    "mismatch": check_mismatch,
    "dead_rank": check_dead_rank,
    "timeout": check_timeout,
    "repeatability": check_repeatability,
}

if CHECK not in CHECKS:
    fail(f"unknown check {CHECK!r}")
CHECKS[CHECK]()
print("PASS")
