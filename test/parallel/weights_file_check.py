"""The weights file next to the executable (train + train.safetensors).

    /usr/bin/python3 test/parallel/weights_file_check.py --bin BUILD/bin --workdir DIR [CHECK...]

merak-compile writes a program's initial data into `<out>.safetensors`
(lib/Target/WeightsFile.cpp) and the executable holds code and the manifest
only; every rank maps the file and copies what it uses
(runtime/src/weights_file.h). The model: the test suite's GPT-2 (4 layers,
width 128, vocabulary 97; 0.9M parameters, 3.6 MB of weights).
  layout     every ONNX initializer is in the weights file, bitwise, under its
             name; the executable holds none of them (no initializer of 1
             KiB or more appears in it byte for byte), the metadata names
             this compilation;
  tp2        a --tp 2 --pp 2 program's file holds each sharded weight whole
             (global shape) and trains equal to the serial program (1e-5);
  moved      the executable renamed and moved together with its weights file
             trains the same losses (the manifest names the file, looked up
             next to the executable);
  missing    without the file: exit 1, the error names the file and says to
             keep the two together, no crash;
  truncated  a short file: exit 1, "unreadable";
  stale      another compilation's file: exit 1, "belongs to another
             compilation".
Ends with "N passed, M failed".
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
from check_runner import run_checks  # noqa: E402
from program_check import corpus_tokens, export_gpt2  # noqa: E402

VOCAB, BATCH, SEQ, STEPS = 97, 4, 16, 4
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
CHECKS = ["layout", "tp2", "moved", "missing", "truncated", "stale"]


def run(cmd, env=None, ok=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=600)
    if ok and p.returncode:
        raise RuntimeError("%s failed (%d):\n%s" % (os.path.basename(cmd[0]), p.returncode,
                                                  p.stdout.decode()[-3000:]))
    return p.returncode, p.stdout.decode()


def read_safetensors(path):
    """({name: array}, metadata) of a safetensors file (numpy only)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
             "BOOL": np.bool_, "U8": np.uint8}
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + end], kinds[e["dtype"]]).reshape(e["shape"])
    return out, meta, 8 + n


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        _, self.data = corpus_tokens(work, VOCAB)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.onnx = os.path.join(work, "gpt.onnx")
        export_gpt2(self.onnx, VOCAB, BATCH, SEQ)
        self.exe = self.compile("serial", [])
        self.serial = self.train(self.exe)

    def compile(self, name, flags):
        d = os.path.join(self.work, name)
        os.makedirs(d, exist_ok=True)
        exe = os.path.join(d, "train")
        run([os.path.join(self.bin_dir, "merak-compile"), self.onnx, "--frozen", "*.attn.bias",
             "--optimizer", "adamw", "-o", exe] + flags)
        return exe

    def train(self, exe, ranks=1, ok=True):
        metrics = exe + ".jsonl"
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = [exe, "--data", self.data, "--steps", str(STEPS), "--sampler", "sequential",
               "--metrics", metrics]
        if ranks > 1:
            cmd = MPIRUN + ["-np", str(ranks)] + cmd
        rc, out = run(cmd, env=self.env, ok=ok)
        if not ok:
            return rc, out
        with open(metrics) as f:
            return [json.loads(line)["loss"] for line in f]


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def check_layout(env):
    tensors, meta, data_start = read_safetensors(env.exe + ".safetensors")
    want = initializers(env.onnx)
    missing = [n for n in want if n not in tensors]
    differ = [n for n in want if n in tensors and
              (tensors[n].shape != want[n].shape or
               tensors[n].tobytes() != want[n].astype(tensors[n].dtype).tobytes())]
    weights = os.path.getsize(env.exe + ".safetensors")
    exe = os.path.getsize(env.exe)
    with open(env.exe, "rb") as f:
        body = f.read()
    # Every initializer of 1 KiB or more is absent from the executable (its
    # first KiB, which would be there byte for byte if it were embedded);
    # the size alone says little, since the runtime is about as large as
    # this small model's weights.
    big = max(want, key=lambda n: want[n].nbytes)
    held = [n for n in want if want[n].nbytes >= 1024 and
            want[n].astype(tensors[n].dtype if n in tensors else want[n].dtype)
            .tobytes()[:1024] in body]
    embedded = bool(held)
    ok = (not missing and not differ and not embedded and
          meta.get("format") == "merak-weights" and len(meta.get("merak.program", "")) == 32
          and data_start % 64 == 0)
    return ok, ("%d initializers, missing %s, differing %s; executable %d bytes, weights %d "
                "bytes (largest '%s'), embedded in the executable: %s; metadata %s" % (
                    len(want), missing[:3], differ[:3], exe, weights, big, held[:3], meta))


def check_tp2(env):
    exe = env.compile("tp2", ["--tp", "2", "--pp", "2", "--microbatches", "2"])
    tensors, _, _ = read_safetensors(exe + ".safetensors")
    want = initializers(env.onnx)
    whole = all(n in tensors and tensors[n].shape == want[n].shape for n in want)
    got = env.train(exe, ranks=4)
    err = max(abs(a - b) / abs(b) for a, b in zip(got, env.serial))
    return whole and len(got) == STEPS and err <= 1e-5, (
        "every initializer whole: %s; losses max rel err %.2e vs serial" % (whole, err))


def check_moved(env):
    d = os.path.join(env.work, "moved")
    os.makedirs(d, exist_ok=True)
    shutil.copy(env.exe, os.path.join(d, "renamed"))
    shutil.copy(env.exe + ".safetensors", os.path.join(d, "train.safetensors"))
    got = env.train(os.path.join(d, "renamed"))
    return got == env.serial, "losses %s vs %s" % (got, env.serial)


def failing_copy(env, name, prepare):
    """Runs a copy of the serial program whose weights file `prepare` spoils."""
    d = os.path.join(env.work, name)
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "train")
    shutil.copy(env.exe, exe)
    prepare(exe + ".safetensors")
    return env.train(exe, ok=False)


def expect_error(env, name, prepare, words):
    rc, out = failing_copy(env, name, prepare)
    ok = rc == 1 and all(w in out for w in words) and "Traceback" not in out and \
        "Segmentation" not in out
    return ok, "exit %d: %s" % (rc, out.strip().splitlines()[-1] if out.strip() else "")


def check_missing(env):
    return expect_error(env, "missing", lambda path: None,
                        ["train.safetensors", "is missing", "keep the two together"])


def check_truncated(env):
    def cut(path):
        with open(env.exe + ".safetensors", "rb") as f:
            raw = f.read()
        with open(path, "wb") as f:
            f.write(raw[:len(raw) // 2])
    return expect_error(env, "truncated", cut, ["train.safetensors", "unreadable"])


def check_stale(env):
    other = env.compile("other", [])
    return expect_error(env, "stale",
                        lambda path: shutil.copy(other + ".safetensors", path),
                        ["belongs to another compilation"])


CHECK_FUNCS = {"layout": check_layout, "tp2": check_tp2, "moved": check_moved,
               "missing": check_missing, "truncated": check_truncated, "stale": check_stale}


def main():
    return run_checks(Env, lambda env, name: CHECK_FUNCS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
