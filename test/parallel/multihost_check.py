"""A --dp 2 --pp 2 program run across several (simulated) hosts over TCP.

    /usr/bin/python3 test/parallel/multihost_check.py --bin BUILD/bin --workdir DIR [CHECK...]

Each "host" is a network namespace with its own veth interface, address
and hostname (netns_hosts.py); mpirun (Open MPI) runs in a further
namespace on the hosts' bridge and starts its daemons through an rsh agent
that enters the target host's namespace instead of ssh, with a hostfile,
`--mca btl tcp,self`, and `btl_tcp_if_include` / `oob_tcp_if_include` on the
namespaces' subnet; OMP_NUM_THREADS, MERAK_COMM_TIMEOUT and the OPENBLAS_*
variables (OPENBLAS_CORETYPE, where set, picks OpenBLAS's kernels and so
the rounding) reach the ranks only through `-x`: the agent clears the
environment. The program is pipeline_check.py's GPT (4 layers), AdamW,
compiled with --dp 2 --pp 2 --microbatches 2 --schedule 1f1b.
  dp2-pp2-hosts2   2 hosts, 2 ranks each (ranks 0, 1 = pp stage 0 on host 0:
                   the dp all-reduces stay on a host, the stage messages
                   cross);
  dp2-pp2-hosts4   4 hosts, 1 rank each (every group crosses hosts);
each trains 20 steps and passes when the job map puts the ranks on the
hosts as asked, every host's bridge port carried traffic, and the per-step
losses and the final checkpoint (written by the ranks of every host) match
the same program run by plain `mpirun -np 4` on this machine within 1e-7
relative (the message says whether they are bitwise equal).
  teardown-on-kill  a child process sets up 2 hosts and runs `sleep` on 4
                   ranks across them; once the ranks run it is SIGKILLed:
                   within 30 s its namespaces and /tmp/<prefix> (the
                   hosts' TMPDIR) are gone, every process that ran in them
                   has ended, and the root namespace has the links it had
                   before.
Exits 77 (a ctest skip) when network namespaces cannot be created (not
root, no CAP_NET_ADMIN, no `ip`), except in CI (CI=true), where CI's machine
can create them and a skip would hide a regression: there it fails.
Ends with "N passed, M failed".

    /usr/bin/python3 test/parallel/multihost_check.py hold DIR   (teardown-on-kill's child)
"""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns_hosts  # noqa: E402
import numpy as np  # noqa: E402
import pipeline_check as pc  # noqa: E402
from program_check import param_rel_err  # noqa: E402
from merak_checkpoint import read_checkpoint  # noqa: E402

CHECKS = ["dp2-pp2-hosts2", "dp2-pp2-hosts4", "teardown-on-kill"]
TOL = 1e-7
# The mesh: (opt, layers, pp, micro-batches, schedule, dp) of pipeline_check.Env.
MESH = ("adamw", 4, 2, 2, "1f1b", 2)
RANKS = 4
JOB_TIMEOUT = 240  # seconds for one multi-host training job


def mpirun(hosts, slots, env, cmd):
    """mpirun in the head namespace over `hosts`, `slots` ranks per host,
    passing on OMP_NUM_THREADS, MERAK_COMM_TIMEOUT and every OPENBLAS_*
    variable of `env` (the kernels OpenBLAS picks, e.g. by
    OPENBLAS_CORETYPE, decide the rounding)."""
    names = ["OMP_NUM_THREADS", "MERAK_COMM_TIMEOUT"] + sorted(
        k for k in env if k.startswith("OPENBLAS_"))
    # --bind-to none: the hosts share this machine's cores.
    return (hosts.head_exec() +
            ["mpirun", "--allow-run-as-root", "-np", str(RANKS), "--bind-to", "none",
             "--display-map"] + hosts.mpirun_args(slots) +
            [a for k in names if k in env for a in ("-x", k)] + cmd)


def job_map(out):
    """{node: number of procs} from mpirun's --display-map."""
    return {node: int(n) for node, n in
            re.findall(r"Data for node: (\S+)\s+Num slots: \d+\s+Max slots: \d+\s+Num procs: (\d+)",
                       out)}


def rel_err(a, b):
    return abs(a - b) / abs(b) if b else abs(a - b)


def check_hosts(env, n):
    opt, layers, pp, m, schedule, dp = MESH
    ref, ref_params = env.train(opt, layers, pp, m, schedule, dp)
    name, exe = env.program(opt, layers, pp, m, schedule, dp)
    slots = RANKS // n
    metrics = os.path.join(env.work, "%s-hosts%d.jsonl" % (name, n))
    ckpt = os.path.join(env.work, "%s-hosts%d-ckpt" % (name, n))
    if os.path.exists(metrics):
        os.remove(metrics)
    penv = dict(env.env, MERAK_COMM_TIMEOUT="60")
    t0 = time.time()
    with netns_hosts.Hosts(n, env.work) as hosts:
        out = pc.run(mpirun(hosts, slots, penv,
                            [exe, "--data", env.data, "--steps", str(pc.STEPS), "--sampler",
                             "sequential", "--metrics", metrics, "--checkpoint-dir", ckpt]),
                     env=penv, timeout=JOB_TIMEOUT)
        traffic = [hosts.link_bytes(i) for i in range(n)]
        placed = job_map(out)
        want = {a: slots for a in hosts.addrs}
    secs = time.time() - t0
    with open(metrics) as f:
        got = [json.loads(line)["loss"] for line in f]
    params = read_checkpoint(ckpt, pc.STEPS)
    if len(got) != len(ref):
        return False, "%d losses, %d in the single-host run" % (len(got), len(ref))
    loss_err = max(rel_err(a, b) for a, b in zip(got, ref))
    if sorted(params) != sorted(ref_params):
        return False, "checkpoint tensors differ: %s" % sorted(set(params) ^ set(ref_params))
    # Integer tensors (the step) must be equal.
    param_err = max(param_rel_err(k, params[k], ref_params[k]) if params[k].dtype.kind == "f"
                    else float(not np.array_equal(params[k], ref_params[k]))
                    for k in ref_params)
    bitwise = got == ref and all(np.array_equal(params[k], ref_params[k]) for k in ref_params)
    # At least the stage messages of 20 steps: 2 micro-batches x 2 dp ranks
    # x (activation + gradient) of 1 x 16 x 64 floats each.
    least = pc.STEPS * 2 * 2 * 2 * 16 * 64 * 4
    ok = (placed == want and loss_err <= TOL and param_err <= TOL and
          all(b >= least for b in traffic))
    return ok, ("%d hosts x %d ranks (job map %s), %.1f s; losses %.4f -> %.4f, max rel err "
                "%.1e, %d checkpoint tensors max rel err %.1e: %s; bytes through each host's "
                "bridge port %s" % (n, slots, placed, secs, got[0], got[-1], loss_err,
                                    len(params), param_err,
                                    "bitwise equal" if bitwise else "NOT bitwise equal",
                                    traffic))


def root_links():
    return sorted(l.split(":")[1].strip().split("@")[0]
                  for l in netns_hosts.ip("-o", "link", "show").splitlines())


def hold(work):
    """teardown-on-kill's child: 2 hosts, `sleep` on 4 ranks across them;
    prints the namespaces' prefix once mpirun is started."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MERAK_COMM_TIMEOUT="60")
    with netns_hosts.Hosts(2, work) as hosts:
        print(hosts.prefix, flush=True)
        subprocess.run(mpirun(hosts, 2, env, ["sleep", "120"]), env=env, timeout=150,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def check_teardown_on_kill(env):
    before = root_links()
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "hold", env.work],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 60)
        prefix = child.stdout.readline().decode().strip() if ready else ""
        if not prefix.startswith(netns_hosts.PREFIX):
            return False, "the child printed no prefix: %r" % prefix
        # Wait until every host runs its daemon and its 2 ranks.
        deadline, pids = time.time() + 60, []
        while time.time() < deadline:
            per_host = [netns_hosts.ip("netns", "pids", "%s-h%d" % (prefix, i),
                                       check=False).split() for i in range(2)]
            pids = [int(p) for ps in per_host for p in ps]
            if all(len(ps) >= 3 for ps in per_host):
                break
            time.sleep(0.2)
        else:
            return False, "the ranks did not start within 60 s (pids %s)" % pids
        pids += [int(p) for p in netns_hosts.ip("netns", "pids", prefix + "-head",
                                                check=False).split()]
        t0 = time.time()
        child.kill()
        child.wait()
        while time.time() < t0 + 30:
            left = netns_hosts.namespaces(prefix + "-")
            alive = [p for p in pids if os.path.exists("/proc/%d" % p)]
            tmp = os.path.exists(os.path.join("/tmp", prefix))
            if not left and not alive and not tmp:
                break
            time.sleep(0.2)
        secs = time.time() - t0
        after = root_links()
        ok = not left and not alive and not tmp and after == before
        return ok, ("%d processes in the namespaces; %.1f s after SIGKILL: namespaces left %s, "
                    "processes alive %s, /tmp/%s %s, root namespace links %s" %
                    (len(pids), secs, left, alive, prefix, "LEFT" if tmp else "removed",
                     "unchanged" if after == before else "%s -> %s" % (before, after)))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def check(env, name):
    if name == "teardown-on-kill":
        return check_teardown_on_kill(env)
    m = re.fullmatch(r"dp2-pp2-hosts(2|4)", name)
    if not m:
        raise ValueError("unknown check " + name)
    return check_hosts(env, int(m.group(1)))


def main():
    if sys.argv[1:2] == ["hold"]:
        hold(sys.argv[2])
        return 0
    why = netns_hosts.unavailable()
    if why:
        if os.environ.get("CI") == "true":
            print("FAIL: %s (CI runs as root and must run this check)" % why)
            return 1
        print("SKIP: " + why)
        return 77
    return pc.run_checks(pc.Env, check, CHECKS)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
