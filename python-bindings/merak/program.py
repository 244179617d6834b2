"""A compiled training program: its report, its runs, its parameters.

Training runs the generated executable as a separate process, as it would on
a cluster: `./train ...` for one rank, `mpirun -np dp*tp*pp ./train ...` for
several. Each rank's stderr goes to its own file, so that a failed run
raises TrainError with the message of the rank that failed.
"""
import copy
import json
import os
import re
import shlex
import subprocess
import sys
import threading

from . import _config
from . import checkpoint as _checkpoint


# What a rank of several prints after its error, before MPI_Abort
# (runtime/src/train_main.cpp): not the cause.
_ABORT_NOTICE = "stopping every rank of the job"


class TrainError(RuntimeError):
    """A run of the executable failed. The message is the failing rank's
    last `train: error: ...` line (or the last line it printed) and the exit
    status; `rank` is the failing rank (None if unknown), `returncode` the
    exit status (of mpirun for several ranks; negative: killed by that
    signal), `stderr` every rank's error output."""

    def __init__(self, message, rank=None, returncode=None, stderr=""):
        super().__init__(message)
        self.rank, self.returncode, self.stderr = rank, returncode, stderr


def _is_array(x):
    return hasattr(x, "__array__") or type(x).__module__.startswith("torch")


def _as_numpy(x):
    import numpy as np
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)


class Program:
    """What merak.compile returns. Attributes: `executable` (path),
    `ranks` (= dp * tp * pp), `dp`, `tp`, `pp`, `workdir`, `checkpoint_dir`,
    `metrics_path`, `diagnostics` (the compiler's summary lines),
    `parameter_names` ({program name: [module names]}), `torch_names`
    ({module name: program name}) and `exporter` (which torch.onnx exporter
    wrote the module's ONNX file: "dynamo" or "torchscript"; None when an
    ONNX file was given)."""

    def __init__(self, executable, dp, tp, pp, workdir, report_json, names, diagnostics="",
                 source=None, exporter=None):
        self.executable = executable
        self.exporter = exporter
        self.dp, self.tp, self.pp = dp, tp, pp
        self.ranks = dp * tp * pp
        self.workdir = workdir
        self.source = source
        self.diagnostics = diagnostics
        self.checkpoint_dir = os.path.join(workdir, "checkpoints")
        self.metrics_path = os.path.join(workdir, "metrics.jsonl")
        self._report = json.loads(report_json) if report_json else {}
        # merak.compile(devices=N): the planner's choice, runners-up and
        # search time (None when the mesh was given).
        self.plan = copy.deepcopy(self._report.get("planner"))
        self.parameter_names = names
        self.torch_names = {t: n for n, ts in names.items() for t in ts}

    def __repr__(self):
        return "<merak.Program %s: dp %d x tp %d x pp %d = %d rank(s)>" % (
            self.executable, self.dp, self.tp, self.pp, self.ranks)

    def report(self):
        """The parallel plan as a dict: what merak-compile --report=json
        prints (mesh, stages with their parameters, memory, FLOPs and
        communication; tensor- and data-parallel details)."""
        return copy.deepcopy(self._report)

    # --- running ------------------------------------------------------------

    def _data_path(self, data):
        """A path for --data: a token file or a directory of .npy arrays,
        written from arrays when `data` is one (1-D integer tokens) or a
        dict {input name or "labels": array}."""
        import numpy as np
        if isinstance(data, (str, os.PathLike)):
            return os.path.abspath(os.fspath(data))
        if isinstance(data, dict):
            d = os.path.join(self.workdir, "data-arrays")
            os.makedirs(d, exist_ok=True)
            for name, arr in data.items():
                np.save(os.path.join(d, name + ".npy"), _as_numpy(arr))
            return d
        if _is_array(data):
            tokens = _as_numpy(data).reshape(-1)
            if tokens.dtype.kind not in "iu" or (tokens.size and (
                    tokens.min() < 0 or tokens.max() > 65535)):
                raise ValueError("merak: token data must be integers in [0, 65535]")
            path = os.path.join(self.workdir, "tokens.bin")
            tokens.astype(np.uint16).tofile(path)
            return path
        raise TypeError("merak: data must be a path, a 1-D array of tokens or a dict of arrays")

    def command(self, data, steps, sampler=None, lr=None, seed=None, resume=False,
                checkpoint_every=None, log_every=None, trace=None, metrics=None,
                checkpoint_dir=None, launcher=None, checkpoint_keep=None):
        """The command line train() runs (a list), for running it elsewhere.
        `launcher` replaces ["mpirun", "-np", ranks, ...] for several ranks."""
        argv = [self.executable, "--data", self._data_path(data), "--steps", str(int(steps)),
                "--checkpoint-dir", checkpoint_dir or self.checkpoint_dir,
                "--metrics", metrics or self.metrics_path]
        for flag, value in (("--sampler", sampler), ("--lr", lr), ("--seed", seed),
                            ("--checkpoint-every", checkpoint_every),
                            ("--checkpoint-keep", checkpoint_keep),
                            ("--log-every", log_every), ("--trace", trace)):
            if value is not None:
                argv += [flag, repr(value) if isinstance(value, float) else str(value)]
        if resume:
            argv.append("--resume")
        if self.ranks == 1 and launcher is None:
            return argv
        if launcher is None:
            launcher = [_config.MPIRUN, "-np", str(self.ranks), "--oversubscribe"]
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                launcher.append("--allow-run-as-root")
        return list(launcher) + argv

    def train(self, data, steps, sampler=None, lr=None, seed=None, resume=False,
              checkpoint_every=None, log_every=None, trace=None, progress=True,
              timeout=None, launcher=None, env=None, checkpoint_keep=None):
        """Runs the executable for `steps` steps and returns the per-step
        losses (the metrics file, `metrics_path`, keeps every field).

        `data`: a token file (uint16, nanoGPT .bin), a directory of .npy
        arrays, a 1-D integer array of tokens or a dict of arrays (written to
        the work directory). A run starts from the compiled (initial)
        parameters, or with resume=True from the latest checkpoint, to
        `steps` steps in total; it checkpoints to `checkpoint_dir` at the end
        (and every `checkpoint_every` steps, keeping the newest
        `checkpoint_keep`, default all), which load_into() reads.
        `progress` shows the executable's progress bar (lines when stdout is
        not a terminal). Raises TrainError naming the failing rank.
        """
        argv = self.command(data, steps, sampler=sampler, lr=lr, seed=seed, resume=resume,
                            checkpoint_every=checkpoint_every, log_every=log_every,
                            trace=trace, launcher=launcher, checkpoint_keep=checkpoint_keep)
        logs = os.path.join(self.workdir, "logs")
        os.makedirs(logs, exist_ok=True)
        for f in os.listdir(logs):
            os.remove(os.path.join(logs, f))
        exe_at = argv.index(self.executable)
        if exe_at > 0:
            # Each rank's stderr to its own file (Open MPI, MPICH and PMIx
            # name the rank differently).
            rank = "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-x}}}"
            script = 'exec "$0" "$@" 2>%s/rank-%s.txt' % (shlex.quote(logs), rank)
            argv = argv[:exe_at] + ["/bin/sh", "-c", script] + argv[exe_at:]
        run_env = dict(os.environ if env is None else env)
        if self.ranks > 1 and "OMP_NUM_THREADS" not in run_env:
            # Several ranks on one machine: do not oversubscribe the cores.
            run_env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // self.ranks))
        rc, launcher_err = self._run(argv, logs, exe_at, run_env, progress, timeout)
        if rc != 0:
            raise self._failure(rc, logs, launcher_err)
        for name in sorted(os.listdir(logs)):  # warnings of a successful run
            with open(os.path.join(logs, name), errors="replace") as f:
                text = f.read().strip()
            if text:
                sys.stderr.write("".join("[%s] %s\n" % (name[:-4], l)
                                         for l in text.splitlines()))
        return [m["loss"] for m in self.metrics()]

    def _run(self, argv, logs, exe_at, env, progress, timeout):
        """Runs `argv`; returns (exit status, the launcher's stderr). The
        executable's stdout (rank 0's progress) goes to the terminal, or is
        copied to sys.stdout line by line (a notebook, a pipe)."""
        stderr_path = os.path.join(logs, "rank-0.txt" if exe_at == 0 else "launcher.log")
        tty = progress and _isatty(sys.stdout)
        with open(stderr_path, "wb") as err:
            p = subprocess.Popen(argv, stdout=None if tty else subprocess.PIPE, stderr=err,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=True)
            copier = None
            if not tty:
                copier = threading.Thread(target=_copy_output, args=(p.stdout, progress),
                                          daemon=True)
                copier.start()
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(p)
                raise TrainError("merak: the run did not end within %s s (killed)" % timeout)
            except BaseException:  # KeyboardInterrupt: take the ranks down too
                _kill_group(p)
                raise
            finally:
                if copier:
                    copier.join(timeout=5)
        with open(stderr_path, errors="replace") as f:
            launcher_err = f.read() if exe_at > 0 else ""
        return p.returncode, launcher_err

    def _failure(self, rc, logs, launcher_err):
        """TrainError with the failing rank's last error line (not the
        notice that it stops the job, which follows the cause): the rank
        that reports an error other than a peer's death, else the lowest
        with an error; without any `error:` line (a crash, the runtime's own
        fatal message), the last line a rank printed, or the launcher's word
        on which rank died. The message ends with the exit status."""
        errors, last_lines, everything = {}, {}, []
        for name in sorted(os.listdir(logs), key=lambda n: (len(n), n)):
            m = re.match(r"rank-(\d+|x)\.txt$", name)  # x: a launcher that names no rank
            if not m:
                continue
            rank = int(m.group(1)) if m.group(1) != "x" else None
            with open(os.path.join(logs, name), errors="replace") as f:
                text = f.read()
            if text.strip():
                everything.append("rank %s:\n%s" % (m.group(1), text.rstrip()))
            lines = [l.strip() for l in text.splitlines() if l.strip()]
            marked = [l for l in lines if "error:" in l]
            causes = [l for l in marked if not l.endswith(_ABORT_NOTICE)]
            if marked:
                errors[rank] = (causes or marked)[-1]
            elif lines:
                last_lines[rank] = lines[-1]
        stderr = "\n".join(everything + ([launcher_err.rstrip()] if launcher_err.strip() else []))

        def ranks(found):
            return sorted(found, key=lambda r: (r is None, r or 0))
        primary = [r for r in ranks(errors) if "peer rank may have died" not in errors[r]]
        died = re.search(r"process rank (\d+).*", launcher_err)
        if errors:
            rank = (primary or ranks(errors))[0]
            msg = errors[rank]
        elif last_lines:
            rank = ranks(last_lines)[0]
            msg = last_lines[rank]
        elif died:
            rank, msg = int(died.group(1)), died.group(0)
        else:
            launcher_lines = launcher_err.strip().splitlines()
            rank, msg = None, launcher_lines[-1] if launcher_lines else ""
        if rank is None and self.ranks == 1:
            rank = 0
        where = " on rank %d of %d" % (rank, self.ranks) if rank is not None else ""
        status = _exit_status(rc)
        return TrainError("merak: training failed%s: %s" % (
            where, "%s (%s)" % (msg, status) if msg else status), rank, rc, stderr)

    # --- results ------------------------------------------------------------

    def metrics(self):
        """The metrics of the last run, one dict per step (step, loss, lr, ...)."""
        if not os.path.exists(self.metrics_path):
            return []
        records = []
        with open(self.metrics_path) as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except ValueError:  # the last line of a killed run
                    break
        return records

    def checkpoint(self, step=None):
        """{program name: numpy array} of a checkpoint (default: the latest),
        whole tensors whatever the mesh; optimizer state under optimizer.*."""
        return _checkpoint.read_checkpoint(self.checkpoint_dir, step)

    def load_into(self, model, step=None):
        """Copies the trained parameters (and the frozen buffers) of the
        latest checkpoint (or `step`) into `model` in place, under every
        name of each tensor (tied weights included); returns the names set."""
        import torch
        saved = self.checkpoint(step)
        state = model.state_dict(keep_vars=True)
        loaded = []
        with torch.no_grad():
            for tname, tensor in state.items():
                pname = self.torch_names.get(tname, tname)
                if pname not in saved:
                    continue
                value = torch.from_numpy(saved[pname].copy())
                if tuple(value.shape) != tuple(tensor.shape):
                    raise ValueError("merak: checkpoint tensor %s has shape %s, the module's "
                                     "%s has %s" % (pname, tuple(value.shape), tname,
                                                    tuple(tensor.shape)))
                tensor.copy_(value.to(tensor.dtype))
                loaded.append(tname)
        missing = [n for n, p in model.named_parameters()
                   if p.requires_grad and n not in loaded and n in self.torch_names]
        if missing:
            raise ValueError("merak: the checkpoint lacks parameters %s" % ", ".join(missing))
        return loaded


def _exit_status(rc):
    """'exit status N', or the signal that ended the process."""
    if rc >= 0:
        return "exit status %d" % rc
    import signal
    try:
        return "killed by %s" % signal.Signals(-rc).name
    except ValueError:
        return "killed by signal %d" % -rc


def _isatty(stream):
    try:
        return stream.isatty() and stream.fileno() >= 0
    except (AttributeError, ValueError, OSError):  # a notebook's stream
        return False


def _copy_output(pipe, show):
    """Copies the executable's stdout as it comes (a progress bar redraws
    its line with carriage returns: no waiting for newlines)."""
    with pipe:
        while True:
            chunk = os.read(pipe.fileno(), 4096)
            if not chunk:
                return
            if show:
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()


def _kill_group(p):
    """Stops a run: SIGTERM first (mpirun forwards it to the ranks, which it
    starts in process groups of their own), then SIGKILL to what is left of
    the launcher's group."""
    import signal
    try:
        p.terminate()
        p.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    p.wait()
