"""Simulated hosts for multi-host MPI tests: network namespaces on a bridge.

    with Hosts(2, workdir) as hosts:
        subprocess.run(hosts.head_exec() + ["mpirun", ...] + hosts.mpirun_args(slots=2) + ...)

`Hosts(n, work)` creates, under a prefix unique to the process and the call
(`merak-mh<pid>-<k>`), the network namespaces
  <prefix>-head  a bridge br0 at 10.213.20.1/24 and lo: mpirun runs here;
  <prefix>-h<i>  host i: eth0 at 10.213.20.<10+i>/24 (a veth pair whose other
                 end, v<i>, is a port of br0) and lo.
Every link is created inside these namespaces (`ip link add ... netns`), so
nothing is added to the root namespace and the subnet exists only on the
bridge: no traffic can reach any other address.

mpirun starts its daemons through `agent.sh` (written into `work`, passed as
`--mca plm_rsh_agent`), which Open MPI calls like ssh (`agent HOST COMMAND...`)
and which runs COMMAND with /bin/sh in HOST's namespace, in a UTS namespace of
its own with hostname `<prefix>-h<i>`, and with a clean environment
(`env -i PATH=... HOME=... TMPDIR=...`), as a fresh ssh login would: only
what mpirun passes with `-x` reaches the ranks. The namespaces share this
machine's filesystem, so the program, data and output paths are the same on
every "host" (as a shared filesystem gives on a real cluster). TMPDIR, where
Open MPI puts its session directories, is `/tmp/<prefix>/<namespace>` for
mpirun (`head_exec()`) and each host.

Teardown (on exit of the `with`, and by `teardown()`) kills every process left
in the namespaces (mpirun, orted, ranks: `ip netns pids`) by pid, deletes
the namespaces, which destroys their links, and removes `/tmp/<prefix>`
(session directories that killed daemons leave behind). A guardian process, started
detached (its own session, re-parented to init, so a process-tree kill does
not reach it) with a pipe from this process as its stdin, does the same
teardown when that pipe closes: when this process ends in any way, SIGKILL
included.

    /usr/bin/python3 netns_hosts.py guard TMP NS...   (the guardian; internal)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

SUBNET = "10.213.20"
PREFIX = "merak-mh"
_count = [0]


def ip(*args, check=True):
    """Runs `ip ARGS...`; returns stdout (raises with stderr when check)."""
    p = subprocess.run(["ip"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    if check and p.returncode:
        raise RuntimeError("ip %s: %s" % (" ".join(args), p.stderr.decode().strip()))
    return p.stdout.decode()


def namespaces(prefix):
    """The namespaces whose name starts with `prefix`."""
    out = ip("netns", "list", check=False)
    return [l.split()[0] for l in out.splitlines() if l.split() and l.split()[0].startswith(prefix)]


def teardown(names, tmp):
    """Kills the processes in the namespaces `names`, deletes them and
    removes the directory `tmp` (idempotent: what is missing is skipped)."""
    deadline = time.time() + 20
    while True:
        alive = False
        for ns in names:
            for pid in ip("netns", "pids", ns, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                    alive = True
                except ProcessLookupError:
                    pass
        if not alive or time.time() > deadline:
            break
        time.sleep(0.1)
    for ns in names:
        ip("netns", "del", ns, check=False)
    shutil.rmtree(tmp, ignore_errors=True)


def unavailable():
    """Why namespaces cannot be used here, or None: creates and removes a
    head namespace with a bridge, one host with its veth, and runs a command
    in it."""
    for tool in ("ip", "unshare", "mpirun"):
        if not shutil.which(tool):
            return "no `%s` on PATH" % tool
    try:
        with Hosts(1) as hosts:
            subprocess.run(hosts.host_exec(0) + ["true"], check=True, timeout=30,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        msg = getattr(e, "stderr", None) or str(e)
        return "cannot create network namespaces (needs root / CAP_NET_ADMIN): %s" % (
            msg.decode().strip() if isinstance(msg, bytes) else msg)
    return None


class Hosts:
    def __init__(self, n, work=None):
        assert 1 <= n <= 200
        self.n, self.work = n, work
        self.prefix = "%s%d-%d" % (PREFIX, os.getpid(), _count[0])
        _count[0] += 1
        self.head = self.prefix + "-head"
        self.ns = ["%s-h%d" % (self.prefix, i) for i in range(n)]
        self.addrs = ["%s.%d" % (SUBNET, 10 + i) for i in range(n)]
        self.tmp = os.path.join("/tmp", self.prefix)
        self.agent = None
        self._guard = None

    def __enter__(self):
        # The guardian first, so that a kill during setup is cleaned up too.
        self._guard = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "guard", self.tmp, self.head] + self.ns,
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        try:
            self._setup()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        teardown([self.head] + self.ns, self.tmp)
        if self._guard:
            self._guard.stdin.close()  # the guardian tears down again (nothing left) and ends
            self._guard.wait()         # the intermediate process; it exits at once
            self._guard = None
        return False

    def _setup(self):
        # Namespaces of these names can only be left over from an earlier
        # process with this pid whose guardian was killed too.
        teardown([self.head] + self.ns, self.tmp)
        for ns in [self.head] + self.ns:
            os.makedirs(os.path.join(self.tmp, ns))
        ip("netns", "add", self.head)
        for ns in self.ns:
            ip("netns", "add", ns)
        ip("-n", self.head, "link", "set", "lo", "up")
        ip("-n", self.head, "link", "add", "br0", "type", "bridge")
        ip("-n", self.head, "addr", "add", SUBNET + ".1/24", "dev", "br0")
        ip("-n", self.head, "link", "set", "br0", "up")
        for i, (ns, addr) in enumerate(zip(self.ns, self.addrs)):
            ip("-n", self.head, "link", "add", "v%d" % i, "type", "veth",
               "peer", "name", "eth0", "netns", ns)
            ip("-n", self.head, "link", "set", "v%d" % i, "master", "br0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "addr", "add", addr + "/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
        if self.work:
            self.agent = os.path.join(self.work, self.prefix + "-agent.sh")
            cases = "".join("  %s) ns=%s tmp=%s;;\n" % (a, ns, os.path.join(self.tmp, ns))
                            for a, ns in zip(self.addrs, self.ns))
            with open(self.agent, "w") as f:
                f.write(AGENT % {"cases": cases})
            os.chmod(self.agent, 0o755)

    def head_exec(self):
        """The command prefix that runs a command in the head namespace."""
        return ["ip", "netns", "exec", self.head,
                "env", "TMPDIR=" + os.path.join(self.tmp, self.head)]

    def host_exec(self, i):
        return ["ip", "netns", "exec", self.ns[i]]

    def hostfile(self, slots):
        path = os.path.join(self.work, self.prefix + "-hosts")
        with open(path, "w") as f:
            f.writelines("%s slots=%d\n" % (a, slots) for a in self.addrs)
        return path

    def mpirun_args(self, slots):
        """mpirun's options for a job over these hosts, `slots` ranks each:
        the hostfile, the agent, and TCP on the namespaces' subnet only."""
        net = SUBNET + ".0/24"
        return ["--hostfile", self.hostfile(slots), "--mca", "plm_rsh_agent", self.agent,
                "--mca", "plm_rsh_no_tree_spawn", "1",
                "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", net, "--mca", "oob_tcp_if_include", net]

    def link_bytes(self, i):
        """Bytes received plus sent by host i's port on the bridge."""
        link = json.loads(ip("-j", "-s", "-n", self.head, "link", "show", "dev", "v%d" % i))[0]
        stats = link["stats64"]
        return stats["rx"]["bytes"] + stats["tx"]["bytes"]


# Open MPI calls the agent as `agent [ssh options] HOST COMMAND...`, COMMAND
# being words for a remote shell (ssh joins them with spaces).
AGENT = r"""#!/bin/sh
# plm_rsh_agent of test/parallel/netns_hosts.py: runs COMMAND in HOST's
# network namespace, with its own hostname and a clean environment.
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
host=$1; shift
case "$host" in
%(cases)s  *) echo "agent: unknown host $host" >&2; exit 255;;
esac
exec ip netns exec "$ns" unshare --uts /bin/sh -c \
  'hostname "$1" && t=$2 && shift 2 && exec env -i PATH=/usr/local/bin:/usr/bin:/bin \
     HOME="$HOME" TMPDIR="$t" /bin/sh -c "$*"' \
  sh "$ns" "$tmp" "$@"
"""


def guard(tmp, names):
    """The guardian: detaches (forks; the parent exits, so the child is
    re-parented to init), waits for EOF on stdin, then tears down."""
    if os.fork():
        os._exit(0)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    teardown(names, tmp)


if __name__ == "__main__":
    if sys.argv[1:2] == ["guard"]:
        guard(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
