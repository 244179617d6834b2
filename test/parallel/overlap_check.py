"""Communication/computation overlap (merak-overlap) against the serial program.

    /usr/bin/python3 test/parallel/overlap_check.py --bin BUILD/bin --workdir DIR [CHECK...]

The GPT of pipeline_check.py (4 layers, 4 heads, d 64, vocabulary 97,
batch 4 x 16) is compiled serially and with a mesh and overlap flags, and
each program trains 20 steps on the bundled corpus (--sampler sequential).
A check named `<opt>[-pp<P>-m<M>-<schedule>]-dp<D>-tp<T>-<mode>[-zero]`,
mode one of
  on   --dp-overlap on  --tp-overlap none (the default flags),
  off  --dp-overlap off --tp-overlap none (every collective blocking),
  sub  --dp-overlap on  --tp-overlap sub-pipeline,
passes when
  - the program's IR at --compile-to=overlap holds started collectives and
    waits exactly where the flags ask for them ("dp" starts with dp-overlap
    on and dp > 1, none with off; "tp" all-reduce starts only with sub, and
    then matmuls split in halves: a merak.concat of two waits' results),
  - its per-step losses are within 1e-5 relative of the serial program's
    and its final parameters and optimizer state within 1e-5 (SGD with
    momentum) / 1e-4 (AdamW) (program_check.compare_with_serial).
Ends with "N passed, M failed".
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pipeline_check as pc  # noqa: E402

CHECKS = ["sgd-dp2-tp1-on", "adamw-dp2-tp1-on", "adamw-dp2-tp1-off", "adamw-dp2-tp1-on-zero",
          "sgd-dp1-tp2-sub", "adamw-dp1-tp2-sub",
          "sgd-dp2-tp2-sub", "adamw-dp2-tp2-sub", "adamw-dp2-tp2-off",
          "sgd-pp2-m2-1f1b-dp2-tp2-sub", "adamw-pp2-m2-1f1b-dp2-tp2-sub",
          "adamw-pp2-m2-gpipe-dp2-tp2-on", "adamw-pp2-m2-1f1b-dp2-tp2-off",
          # With the schedules that split the backward or interleave chunks.
          "adamw-pp2-m2-zbh1-dp2-tp2-sub", "sgd-pp2-m2-int2-dp2-tp2-sub",
          "adamw-pp2-m2-zbh2-dp2-tp1-on-zero"]
LOSS_TOL = 1e-5
MODES = {"on": ["--dp-overlap", "on", "--tp-overlap", "none"],
         "off": ["--dp-overlap", "off", "--tp-overlap", "none"],
         "sub": ["--dp-overlap", "on", "--tp-overlap", "sub-pipeline"]}


class Env(pc.Env):
    """pipeline_check's environment with the overlap flags of `self.mode`."""
    mode = None

    def compile_cmd(self, *args, **kwargs):
        # Buckets of 20 KB: the test model's gradients form several.
        return super().compile_cmd(*args, **kwargs) + (
            MODES[self.mode] + ["--bucket-mb", "0.02"] if self.mode else [])

    def program(self, opt, layers, pp=1, m=1, schedule="1f1b", dp=1, tp=1, zero=False,
                vocab_off=False, rc=None, bf16=False):
        name = "%s-pp%d-m%d-%s-dp%d-tp%d%s%s%s-%s" % (opt, pp, m, schedule, dp, tp,
                                                      "-zero" if zero else "",
                                                      "-rc" + "-".join(rc) if rc else "",
                                                      "-bf16" if bf16 else "",
                                                      self.mode or "serial")
        exe = os.path.join(self.work, "train-" + name)
        if name not in self.programs:
            pc.run(self.compile_cmd(opt, layers, pp, m, schedule, dp, tp, zero, vocab_off, rc,
                                    bf16) + ["--compile-to=binary", "-o", exe])
            self.programs[name] = exe
        return name, exe


def joined_halves(ir):
    """merak.concat ops joining two merak.wait results (sub-pipelined halves)."""
    waited = set(re.findall(r"(%\d+) = merak\.wait ", ir))
    return sum(1 for a, b in re.findall(r"= merak\.concat (%\d+), (%\d+) axis", ir)
               if a in waited and b in waited)


def started(ir, group):
    """Started collectives of `group` in the IR text."""
    return len(re.findall(r'merak\.(?:all_reduce|reduce_scatter|all_gather)_start [^\n]*'
                          r'group = "%s"' % group, ir))


def check(env, name):
    m = re.fullmatch(r"(sgd|adamw)(?:-pp(\d+)-m(\d+)-" + pc.SCHED + r")?-dp(\d+)-tp(\d+)-"
                     r"(on|off|sub)(-zero)?", name)
    if not m:
        raise ValueError("unknown check " + name)
    opt, mode = m.group(1), m.group(7)
    pp, mb, schedule = int(m.group(2) or 1), int(m.group(3) or 1), m.group(4) or "1f1b"
    dp, tp, zero = int(m.group(5)), int(m.group(6)), bool(m.group(8))
    env.mode = None
    serial, serial_params = env.train(opt, 4)
    env.mode = mode
    ir = pc.run(env.compile_cmd(opt, 4, pp, mb, schedule, dp, tp, zero) +
                ["--compile-to=overlap"])
    dp_starts, tp_starts = started(ir, "dp"), started(ir, "tp")
    waits = len(re.findall(r"= merak\.wait ", ir))
    want_dp = dp > 1 and mode != "off"
    want_tp = tp > 1 and mode == "sub"
    halves = joined_halves(ir)
    placed = ((dp_starts > 0) == want_dp and (tp_starts > 0) == want_tp and
              (halves > 0) == want_tp and waits == dp_starts + tp_starts + started(ir, "pp"))
    got, params = env.train(opt, 4, pp, mb, schedule, dp, tp, zero=zero)
    ok, msg = pc.compare(got, params, serial, serial_params, pc.OPTS[opt][1])
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(got, serial))
    ok = ok and placed and loss_err <= LOSS_TOL
    return ok, ("%s; started: %d dp, %d tp, %d waits, %d split matmuls (%s); loss rel err "
                "%.2e (tol %g)" % (msg, dp_starts, tp_starts, waits, halves,
                                   "as asked" if placed else "NOT as asked", loss_err, LOSS_TOL))


def main():
    return pc.run_checks(Env, check, CHECKS)


if __name__ == "__main__":
    sys.exit(main())
