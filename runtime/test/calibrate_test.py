"""runtime.calibrate: merak-calibrate writes a plausible device profile,
alone (memcpy stand-in for the link) and under mpirun -np 2 (ping-pong)."""
import json
import os
import subprocess
import sys

exe, mpiexec, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out_dir, exist_ok=True)
env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")


def check(path, measured_link):
    with open(path) as f:
        p = json.load(f)
    assert p["name"] == "cpu", p
    # A core does between 0.1 and 1000 GFLOP/s of sgemm, moves 0.1..1000 GB/s.
    assert 1e8 < p["flops"]["f32"] < 1e12, p
    assert 1e8 < p["memory_bandwidth"] < 1e12, p
    assert p["memory_bytes"] > 1e7, p
    assert p["devices_per_node"] >= 1, p
    for link in ("intra_node", "inter_node"):
        assert 1e6 < p[link]["bandwidth"] < 1e12, p
        assert 0 < p[link]["latency"] < 1e-2, p
    assert ("ping-pong" in p["comment"]) == measured_link, p["comment"]
    print(path, json.dumps(p["flops"]), p["memory_bandwidth"], p["intra_node"])


single = os.path.join(out_dir, "single.json")
subprocess.run([exe, "-o", single], check=True, env=env, timeout=60)
check(single, False)
if mpiexec:
    pair = os.path.join(out_dir, "pair.json")
    subprocess.run([mpiexec, "--allow-run-as-root", "--oversubscribe", "-np", "2", exe, "-o",
                    pair], check=True, env=env, timeout=60)
    check(pair, True)
