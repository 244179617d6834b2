"""Tests ./train's behaviour (merak_train_main) through the fake program.

Usage: train_test.py FAKE_TRAIN FAKE_TRAIN_BAD_MANIFEST OUTDIR CHECK

FAKE_TRAIN is test/fake_program.cpp linked with the runtime: a bigram model
over 16 tokens, batch [4, 8], trained with SGD + momentum, whose extra
outputs "batch_checksum" and "step_seen" tell which batch it was fed. CHECK
is one of the functions named check_* below. Needs Python 3 and numpy.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

FAKE, FAKE_BAD, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
B, T, V = 4, 8, 16
PARAMS = [  # name, dtype, shape: the fake manifest's params, in order
    ("hparam.lr", "F32", []),
    ("temperature", "F32", []),
    ("optimizer.step", "I64", []),
    ("bigram.weight", "F32", [16, 16]),
    ("bigram.bias", "F32", [16]),
    ("optimizer.sgd.momentum.bigram.weight", "F32", [16, 16]),
    ("optimizer.sgd.momentum.bigram.bias", "F32", [16]),
]
DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8",
          "I32": "<i4", "U16": "<u2", "BOOL": "?"}
MASK = (1 << 64) - 1


def path(*names):
    return os.path.join(OUT, *names)


def ckpt_file(run_dir, step):
    """A single process's checkpoint of `step`: one plain safetensors file."""
    return path(run_dir, "step_%d" % step, "shard-0-of-1.safetensors")


def make_tokens(name="tokens.bin", n=4096):
    """A token file with a learnable bigram structure."""
    rng = np.random.default_rng(0)
    toks = np.empty(n, dtype=np.uint16)
    cur = 0
    for i in range(n):
        toks[i] = cur
        cur = (5 * cur + 3) % V if rng.random() < 0.85 else rng.integers(V)
    toks.tofile(path(name))
    return path(name), toks


def run(args, rc=0):
    p = subprocess.run([FAKE] + args, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == rc, (args, p.returncode, p.stdout, p.stderr)
    return p


def read_metrics(name):
    with open(path(name)) as f:
        return [json.loads(line) for line in f]


def read_safetensors(file):
    with open(file, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(body[begin:end], dtype=DTYPES[info["dtype"]])
        tensors[name] = (info["dtype"], arr.reshape(info["shape"]))
    return tensors, meta


def write_safetensors(file, tensors, meta):
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr, dtype=DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = meta
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def same_run(a, b, keys=("step", "loss", "lr", "grad_norm", "batch_checksum",
                         "step_seen")):
    assert len(a) == len(b), (len(a), len(b))
    for x, y in zip(a, b):
        for k in keys:
            assert x[k] == y[k], (k, x, y)


# --- the sampler, exactly as data.h defines it --------------------------------

def mix(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def window_start(sampler, seed, step, row, n_tokens):
    m = n_tokens - T - 1
    if sampler == "sequential":
        return ((step * B + row) * T) % m
    h = mix(mix(mix(seed) ^ step) ^ row)
    limit = (1 << 64) - ((1 << 64) % m)
    while h >= limit:
        h = mix(h)
    return h % m


def expected_checksum(toks, sampler, seed, step):
    total = 0.0
    for r in range(B):
        s = window_start(sampler, seed, step, r, len(toks))
        for t in range(T):
            n = r * T + t
            total += (int(toks[s + t]) + 17.0 * int(toks[s + t + 1])) * (n + 1)
    return total


# --- checks -------------------------------------------------------------------

def check_metrics():
    data, _ = make_tokens()
    p = run(["--data", data, "--steps", "30", "--metrics", path("m.jsonl"),
             "--log-every", "10"])
    m = read_metrics("m.jsonl")
    assert [x["step"] for x in m] == list(range(30)), m
    for x in m:
        assert list(x)[:6] == ["step", "loss", "lr", "grad_norm",
                               "tokens_per_s", "time_ms"], x
        assert "nonfinite" not in x, x
        assert x["tokens_per_s"] > 0 and x["time_ms"] >= 0, x
        assert x["step_seen"] == x["step"], x
        # the manifest's default lr 0.1, with the fake's 4-step warm-up
        warm = np.float32(0.1) * np.float32(min(1.0, (x["step"] + 1) / 4.0))
        assert x["lr"] == float(np.float32(warm)), x
    assert m[0]["loss"] == float(np.float32(math.log(16))), m[0]
    first = sum(x["loss"] for x in m[:5]) / 5
    last = sum(x["loss"] for x in m[-5:]) / 5
    assert last < first * 0.8, (first, last)
    lines = p.stdout.splitlines()
    assert lines[-1].startswith("train: done: 30 steps (0..29) | final loss"), \
        lines
    assert any(l.startswith("step 10/30 |") for l in lines), lines
    assert any(l.startswith("step 30/30 |") for l in lines), lines


def check_sampler():
    data, toks = make_tokens()
    for sampler in ["sequential", "random"]:
        for seed in [0, 7]:
            name = "%s_%d.jsonl" % (sampler, seed)
            run(["--data", data, "--steps", "6", "--sampler", sampler,
                 "--seed", str(seed), "--metrics", path(name)])
            for x in read_metrics(name):
                want = expected_checksum(toks, sampler, seed, x["step"])
                assert x["batch_checksum"] == want, (sampler, seed, x, want)


def check_deterministic():
    data, _ = make_tokens()
    for run_name in ["a", "b"]:
        run(["--data", data, "--steps", "15", "--seed", "3",
             "--metrics", path(run_name + ".jsonl"),
             "--checkpoint-dir", path(run_name)])
    same_run(read_metrics("a.jsonl"), read_metrics("b.jsonl"))
    with open(ckpt_file("a", 15), "rb") as f:
        a = f.read()
    with open(ckpt_file("b", 15), "rb") as f:
        b = f.read()
    assert a == b, "checkpoints differ"


def check_resume():
    data, _ = make_tokens()
    common = ["--data", data, "--seed", "5"]
    run(common + ["--steps", "20", "--metrics", path("full.jsonl"),
                  "--checkpoint-dir", path("full")])
    run(common + ["--steps", "10", "--metrics", path("part.jsonl"),
                  "--checkpoint-dir", path("part"), "--checkpoint-every", "5"])
    assert sorted(os.listdir(path("part"))) == [
        "latest", "step_10", "step_5"]
    p = run(common + ["--steps", "20", "--metrics", path("part.jsonl"),
                      "--checkpoint-dir", path("part"), "--resume"])
    assert "train: done: 10 steps (10..19)" in p.stdout, p.stdout
    full, part = read_metrics("full.jsonl"), read_metrics("part.jsonl")
    same_run(full, part)
    a, _ = read_safetensors(ckpt_file("full", 20))
    b, meta = read_safetensors(ckpt_file("part", 20))
    for name in a:
        assert a[name][1].tobytes() == b[name][1].tobytes(), name
    assert meta["step"] == "20", meta

    # A run that went past its last checkpoint and died mid-line: the resumed
    # run rewrites the steps after the checkpoint, each exactly once.
    run(common + ["--steps", "15", "--metrics", path("crash.jsonl"),
                  "--checkpoint-dir", path("crash"), "--checkpoint-every",
                  "10"])
    with open(path("crash", "latest"), "w") as f:
        f.write("step_10\n")
    with open(path("crash.jsonl"), "a") as f:
        f.write('{"step":15,"loss":1.')
    run(common + ["--steps", "20", "--metrics", path("crash.jsonl"),
                  "--checkpoint-dir", path("crash"), "--resume"])
    same_run(full, read_metrics("crash.jsonl"))

    # Nothing left to do; a checkpoint past --steps is an error.
    p = run(common + ["--steps", "20", "--checkpoint-dir", path("part"),
                      "--resume"])
    assert "nothing to do" in p.stdout, p.stdout
    p = run(common + ["--steps", "12", "--checkpoint-dir", path("part"),
                      "--resume"], rc=1)
    assert "train: error: --resume:" in p.stderr, p.stderr
    assert "more than --steps 12" in p.stderr, p.stderr

    # Resuming with another seed still works but warns.
    p = run(["--data", data, "--seed", "6", "--steps", "21",
             "--checkpoint-dir", path("part"), "--resume"])
    assert "train: warning:" in p.stderr and "--seed" in p.stderr, p.stderr


def check_resume_errors():
    data, _ = make_tokens()
    os.makedirs(path("empty"))
    p = run(["--data", data, "--steps", "5", "--checkpoint-dir",
             path("empty"), "--resume"], rc=1)
    assert p.stderr.startswith("train: error: --resume: no checkpoint"), \
        p.stderr
    assert path("empty") in p.stderr, p.stderr

    run(["--data", data, "--steps", "3", "--checkpoint-dir", path("good")])
    good, meta = read_safetensors(ckpt_file("good", 3))

    def broken(name, tensors, expect):
        d = path(name)
        os.makedirs(d)
        write_safetensors(os.path.join(d, "step_3.safetensors"), tensors,
                          meta)
        with open(os.path.join(d, "latest"), "w") as f:
            f.write("step_3.safetensors\n")
        p = run(["--data", data, "--steps", "5", "--checkpoint-dir", d,
                 "--resume"], rc=1)
        assert p.stderr.startswith("train: error: --resume:"), p.stderr
        assert p.stderr.count("\n") == 1, p.stderr
        for text in expect + [os.path.join(d, "step_3.safetensors")]:
            assert text in p.stderr, (text, p.stderr)

    shape = dict(good)
    shape["bigram.weight"] = ("F32", np.zeros((8, 32), np.float32))
    broken("shape", shape, ["bigram.weight", "[8, 32]", "[16, 16]"])
    dtype = dict(good)
    dtype["optimizer.step"] = ("F32", np.zeros((), np.float32))
    broken("dtype", dtype, ["optimizer.step", "I64"])
    missing = dict(good)
    del missing["optimizer.sgd.momentum.bigram.bias"]
    broken("missing", missing, ["optimizer.sgd.momentum.bigram.bias"])

    os.makedirs(path("truncated"))
    with open(ckpt_file("good", 3), "rb") as f:
        raw = f.read()
    with open(path("truncated", "step_3.safetensors"), "wb") as f:
        f.write(raw[:-10])
    with open(path("truncated", "latest"), "w") as f:
        f.write("step_3.safetensors\n")
    p = run(["--data", data, "--steps", "5", "--checkpoint-dir",
             path("truncated"), "--resume"], rc=1)
    assert path("truncated", "step_3.safetensors") in p.stderr, p.stderr


def check_hparams():
    data, _ = make_tokens()
    # --lr reaches the hparam in P: lr 0 learns nothing.
    run(["--data", data, "--steps", "6", "--lr", "0", "--metrics",
         path("zero.jsonl")])
    for x in read_metrics("zero.jsonl"):
        assert x["loss"] == float(np.float32(math.log(16))), x
        assert x["lr"] == 0, x
    # The flag wins over the checkpointed value on resume.
    run(["--data", data, "--steps", "4", "--lr", "0.25", "--checkpoint-dir",
         path("ck")])
    t, _ = read_safetensors(ckpt_file("ck", 4))
    assert t["hparam.lr"][1] == np.float32(0.25), t["hparam.lr"]
    run(["--data", data, "--steps", "8", "--lr", "0", "--checkpoint-dir",
         path("ck"), "--resume", "--metrics", path("resumed.jsonl")])
    m = read_metrics("resumed.jsonl")
    assert [x["step"] for x in m] == [4, 5, 6, 7], m
    assert all(x["lr"] == 0 for x in m), m
    t2, _ = read_safetensors(ckpt_file("ck", 8))
    assert np.array_equal(t["bigram.weight"][1], t2["bigram.weight"][1])
    assert t2["hparam.lr"][1] == 0
    assert t2["optimizer.step"][1] == 8


def check_nonfinite():
    data, _ = make_tokens()
    p = run(["--data", data, "--steps", "10", "--lr", "1000", "--metrics",
             path("m.jsonl"), "--checkpoint-dir", path("ck")], rc=1)
    assert p.stderr.startswith("train: error: the loss is NaN at step 2"), \
        p.stderr
    m = read_metrics("m.jsonl")
    assert [x["step"] for x in m] == [0, 1, 2], m
    assert m[2]["loss"] is None and m[2]["nonfinite"] is True, m[2]
    assert not os.path.exists(path("ck", "latest"))


def check_errors():
    data, _ = make_tokens()
    p = run(["--data", data, "--steps", "3", "--bogus"], rc=2)
    assert p.stderr.startswith("train: error: unknown flag '--bogus'"), \
        p.stderr
    assert "usage:" in p.stderr and p.stdout == "", p.stderr
    p = run(["--data", data], rc=2)
    assert "--steps" in p.stderr.splitlines()[0], p.stderr
    p = run(["--data", data, "--steps", "3", "--checkpoint-every", "2"], rc=2)
    assert "--checkpoint-dir" in p.stderr.splitlines()[0], p.stderr
    p = run(["--data", data, "--steps", "x"], rc=2)
    assert "--steps" in p.stderr.splitlines()[0], p.stderr

    missing = path("no_such_tokens.bin")
    p = run(["--data", missing, "--steps", "3"], rc=1)
    assert p.stderr.startswith("train: error: token file '%s'" % missing), \
        p.stderr
    short = path("short.bin")
    np.arange(5, dtype=np.uint16).tofile(short)
    p = run(["--data", short, "--steps", "3"], rc=1)
    assert p.stderr.startswith("train: error: token file '%s'" % short), \
        p.stderr
    assert "needs at least 10" in p.stderr, p.stderr

    p = run(["--data", data, "--steps", "3", "--metrics",
             path("no_dir", "m.jsonl")], rc=1)
    assert "metrics file" in p.stderr and "no_dir" in p.stderr, p.stderr
    with open(path("a_file"), "w") as f:
        f.write("x")
    p = run(["--data", data, "--steps", "3", "--checkpoint-dir",
             path("a_file", "ck")], rc=1)
    assert p.stderr.startswith("train: error:"), p.stderr
    assert path("a_file", "ck") in p.stderr, p.stderr
    p = run(["--data", data, "--steps", "0"])
    assert "nothing to do" in p.stdout, p.stdout


def check_checkpoint_dir():
    """An unusable --checkpoint-dir fails at start-up, before step 0."""
    data, _ = make_tokens()
    with open(path("a_file"), "w") as f:
        f.write("x")
    # A regular file, and a path under one (as root, permission bits would
    # not stop the writes a read-only directory is meant to refuse).
    for bad in [path("a_file"), path("a_file", "sub"), path("a_file", "sub", "deeper")]:
        p = run(["--data", data, "--steps", "3", "--metrics", path("m.jsonl"),
                 "--checkpoint-dir", bad], rc=1)
        assert p.stderr.startswith(
            "train: error: cannot create checkpoint directory '%s': " % bad), p.stderr
        assert "Not a directory" in p.stderr, p.stderr
        assert "step" not in p.stdout and not os.path.exists(path("m.jsonl")), p.stdout

    # A valid nested path is created (parents too) before step 0: here the
    # run fails on its data afterwards, and leaves the directory empty.
    nested = path("runs", "a", "ck")
    p = run(["--data", path("no_such_tokens.bin"), "--steps", "3",
             "--checkpoint-dir", nested], rc=1)
    assert p.stderr.startswith("train: error: token file"), p.stderr
    assert os.listdir(nested) == [], os.listdir(nested)
    run(["--data", data, "--steps", "3", "--checkpoint-dir", path("new", "ck")])
    assert sorted(os.listdir(path("new", "ck"))) == ["latest", "step_3"]


def check_help():
    p = run(["--help"])
    assert p.stdout.startswith("usage: "), p.stdout
    assert "--lr X" in p.stdout and "[default: 0.1]" in p.stdout, p.stdout
    assert p.stderr == "", p.stderr
    p = run(["-h", "--bogus"])
    assert p.stdout.startswith("usage: "), p.stdout


def check_bad_manifest():
    data, _ = make_tokens()
    for args in [["--data", data, "--steps", "3"], ["--help"]]:
        p = subprocess.run([FAKE_BAD] + args, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 3, (p.returncode, p.stderr)
        assert p.stderr.startswith(
            "train: error: internal error: the embedded manifest is invalid: "
            "params[5] ('optimizer.sgd.momentum.bigram.weight'): offset 1280 "
            "+ 1024 bytes exceeds params_bytes 2000"), p.stderr


def check_trace():
    data, _ = make_tokens()
    ops = ["embedding", "cross_entropy", "embedding_backward", "grad_norm",
           "sgd_momentum"]
    for steps, traced in [(5, 1), (1, 0)]:
        name = "t%d.json" % steps
        run(["--data", data, "--steps", str(steps), "--trace", path(name),
             "--checkpoint-dir", path("ck%d" % steps), "--checkpoint-every",
             "2"])
        with open(path(name)) as f:
            trace = json.load(f)
        events = trace["traceEvents"]
        meta = [e for e in events if e["ph"] == "M"]
        assert {e["name"] for e in meta} == {"process_name", "thread_name"}
        x = [e for e in events if e["ph"] == "X"]
        for e in x:
            assert e["dur"] >= 0 and e["ts"] >= 0, e
        step = [e for e in x if e["name"] == "step"]
        assert len(step) == 1 and step[0]["args"]["step"] == traced, step
        assert len([e for e in x if e["name"] == "data"]) == 1, x
        op_events = [e for e in x if e["cat"] == "op"]
        assert [e["name"] for e in op_events] == ops, op_events
        assert [e["args"]["index"] for e in op_events] == list(range(5))
        s0, s1 = step[0]["ts"], step[0]["ts"] + step[0]["dur"]
        for e in op_events:
            assert s0 <= e["ts"] and e["ts"] + e["dur"] <= s1 + 0.002, (e, s0)
        ckpt = [e for e in x if e["name"] == "checkpoint"]
        want = [2, 4, 5] if steps == 5 else [1]
        assert [e["args"]["step"] for e in ckpt] == want, ckpt


def check_profile_ops():
    """--profile-ops: every op of the steps after the first is timed; the
    medians by op key (the manifest's op_keys; ops 0 and 2 share one) are
    merged into the op-cost file, weighted by their sample counts."""
    data, _ = make_tokens()
    costs = path("costs.json")
    run(["--data", data, "--steps", "5", "--profile-ops", costs])
    with open(costs) as f:
        first = json.load(f)
    assert first["format"] == "merak-op-costs" and first["version"] == 1, first
    assert first["target"] == "cpu" and first["threads"] >= 1, first
    ops = first["ops"]
    # Four timed steps (1..4); the shared key pools both ops' samples.
    assert sorted(ops) == sorted(["fake.gather(tensor<16x16xf32>)",
                                  "fake.cross_entropy(tensor<4x8x16xf32>)",
                                  "fake.grad_norm(tensor<16x16xf32>)",
                                  "fake.sgd(tensor<16x16xf32>)"]), ops
    assert ops["fake.gather(tensor<16x16xf32>)"]["samples"] == 8, ops
    for key in ops:
        assert ops[key]["seconds"] >= 0 and ops[key]["seconds"] < 1, ops
        if key != "fake.gather(tensor<16x16xf32>)":
            assert ops[key]["samples"] == 4, ops
    # A second run merges: the old median weighted by its 4 samples with the
    # new one by its 2 (steps 1..2); a key the program lacks would stay.
    ops["other.op()"] = {"seconds": 0.25, "samples": 3}
    with open(costs, "w") as f:
        json.dump(first, f)
    run(["--data", data, "--steps", "3", "--profile-ops", costs])
    with open(costs) as f:
        second = json.load(f)["ops"]
    assert second["other.op()"] == {"seconds": 0.25, "samples": 3}, second
    key = "fake.sgd(tensor<16x16xf32>)"
    assert second[key]["samples"] == 6, second
    new = (second[key]["seconds"] * 6 - ops[key]["seconds"] * 4) / 2
    assert new >= -1e-12, (second[key], ops[key])
    # One run's first step only: nothing is timed, the file keeps its ops.
    run(["--data", data, "--steps", "1", "--profile-ops", costs])
    with open(costs) as f:
        assert json.load(f)["ops"] == second
    # Errors: another file is never overwritten; --trace is exclusive.
    other = path("other.json")
    for text, why in [('{"a": 1}', "not an op-cost file"),
                      ("not json", "not JSON"),
                      (json.dumps({"format": "merak-op-costs", "version": 1,
                                   "target": "cuda", "threads": 1, "ops": {}}),
                       "holds costs measured for target 'cuda'")]:
        with open(other, "w") as f:
            f.write(text)
        p = run(["--data", data, "--steps", "3", "--profile-ops", other], rc=1)
        assert "--profile-ops: " + other + ": " + why in p.stderr, p.stderr
        with open(other) as f:
            assert f.read() == text
    p = run(["--data", data, "--steps", "3", "--profile-ops", costs, "--trace",
             path("t.json")], rc=2)
    assert "--trace and --profile-ops cannot be combined" in p.stderr, p.stderr


def check_checkpoint_python():
    data, _ = make_tokens()
    run(["--data", data, "--steps", "12", "--checkpoint-dir", path("ck"),
         "--checkpoint-every", "5"])
    assert sorted(os.listdir(path("ck"))) == [
        "latest", "step_10", "step_12", "step_5"]
    with open(path("ck", "latest")) as f:
        assert f.read() == "step_12\n"
    t, meta = read_safetensors(ckpt_file("ck", 12))
    assert [(n, d, list(a.shape)) for n, (d, a) in t.items()] == \
        [(n, d, s) for n, d, s in PARAMS], list(t)
    assert meta["step"] == "12" and meta["model"] == "bigram.onnx", meta
    assert meta["optimizer"] == "sgd" and meta["format"] == "pt", meta
    assert t["optimizer.step"][1] == 12
    assert t["temperature"][1] == 1.0
    assert t["hparam.lr"][1] == np.float32(0.1)
    w = t["bigram.weight"][1]
    assert np.all(np.isfinite(w)) and np.abs(w).max() > 0
    # The model learnt the data's rule next = (5 * cur + 3) % 16.
    pred = np.argmax(w + t["bigram.bias"][1], axis=1)
    assert np.mean(pred == (5 * np.arange(16) + 3) % 16) >= 0.75, pred
    t5, meta5 = read_safetensors(ckpt_file("ck", 5))
    assert meta5["step"] == "5" and t5["optimizer.step"][1] == 5


def main():
    check = sys.argv[4]
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    globals()["check_" + check]()
    print("ok:", check)


if __name__ == "__main__":
    main()
