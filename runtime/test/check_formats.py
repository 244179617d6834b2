"""Checks files written by the runtime with Python alone (stdlib + numpy).

Usage: check_formats.py WRITER OUTDIR {safetensors,trace,metrics,data}
Runs WRITER OUTDIR, then checks one format. The safetensors reader below is
written from the format description (the `safetensors` package is not used).
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
          "I64": "<i8", "I32": "<i4", "U16": "<u2", "BOOL": "?"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert (8 + n) % 8 == 0, "header not padded to a multiple of 8"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors, end = {}, 0
    for name, info in header.items():  # file order == storage order
        begin, stop = info["data_offsets"]
        assert begin == end, (name, begin, end)
        end = stop
        arr = np.frombuffer(body[begin:stop], dtype=DTYPES[info["dtype"]])
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = (info["dtype"], arr.reshape(info["shape"]))
    assert end == len(body), "trailing bytes"
    return tensors, meta


def check_safetensors(out):
    for path in [os.path.join(out, "sample.safetensors"),
                 os.path.join(out, "ckpt", "step_5", "shard-0-of-1.safetensors")]:
        t, meta = read_safetensors(path)
        expect_meta = {"format": "pt", "note": 'quote" backslash\\'}
        if "ckpt" in path:
            expect_meta.update({"step": "5", "merak.rank": "0", "merak.world": "1"})
        assert meta == expect_meta, meta
        names = list(t)
        assert names[0] == "transformer.h.0.attn.c_attn.weight", names
        w = t["transformer.h.0.attn.c_attn.weight"]
        assert w[0] == "F32" and w[1].shape == (3, 4)
        assert np.array_equal(w[1].ravel(),
                              np.arange(12, dtype=np.float32) * 0.25 - 1)
        assert np.array_equal(t["f16"][1],
                              np.array([0, 1, -2, 0.5, 65504], np.float16))
        assert np.array_equal(t["bf16"][1], np.array([[1, -2], [0.5, 3]]))
        assert t["f64"][1].shape == () and t["f64"][1] == math.pi
        m = t["optimizer.adamw.m.transformer.wte.weight"]
        assert m[0] == "I64" and np.array_equal(
            m[1], np.array([[-3, -2, -1], [0, 1, 1 << 40]]))
        assert np.array_equal(t["i32"][1], [0, -1000, -2000, -3000])
        assert t["mask"][1].dtype == np.bool_
        assert np.array_equal(t["mask"][1], [[True, False], [False, True]])
        assert np.array_equal(t["u16"][1], [0, 1, 65535])
        assert t['日本.ü "q"'][1][0] == 42.0
        assert t["empty"][1].shape == (0, 4)
    with open(os.path.join(out, "ckpt", "latest")) as f:
        assert f.read() == "step_5\n"
    leftovers = [f for f in os.listdir(os.path.join(out, "ckpt"))
                 if ".tmp." in f or ".partial" in f]
    leftovers += [f for f in os.listdir(os.path.join(out, "ckpt", "step_5"))
                  if ".tmp." in f]
    assert not leftovers, leftovers


def check_trace(out):
    with open(os.path.join(out, "trace.json")) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    complete = [e for e in events if e["ph"] == "X"]
    assert {(e["name"], e["tid"], e["args"]["name"]) for e in meta} == {
        ("process_name", 0, "rank 1"), ("thread_name", 0, "compute"),
        ("thread_name", 1, "comm")}, meta
    assert [e["name"] for e in complete] == [
        "forward", "matmul", "allreduce", "backward"]
    for e in events:
        assert e["pid"] == 1
    for e in complete:
        assert set(e) >= {"name", "cat", "ph", "ts", "dur", "pid", "tid"}
        assert e["dur"] >= 0 and e["ts"] >= 0
    mm = complete[1]
    assert (mm["cat"], mm["ts"], mm["dur"], mm["tid"]) == (
        "kernel", 10, 20.5, 0)
    assert mm["args"] == {"m": 64, "n": 128}
    assert complete[2]["tid"] == 1


def check_metrics(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        lines = f.read().splitlines()
    assert len(lines) == 3
    rows = [json.loads(line) for line in lines]
    for step, row in enumerate(rows):
        assert list(row)[:6] == ["step", "loss", "lr", "grad_norm",
                                 "tokens_per_s", "time_ms"], row
        assert row["step"] == step and row["lr"] == 6e-4
        assert row["val_loss"] == 3.5 and row["time_ms"] == 100.25
    assert rows[0]["loss"] == 10.0 and rows[1]["loss"] == 5.0
    assert rows[2]["loss"] is None and rows[2]["nonfinite"] is True
    assert "nonfinite" not in rows[0]


def splitmix64(z):
    mask = (1 << 64) - 1
    z = (z + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def check_data(out):
    tokens = np.fromfile(os.path.join(out, "tokens.bin"), dtype="<u2")
    n, t, b, seed = len(tokens), 16, 4, 7
    m = n - t - 1
    seen = 0
    with open(os.path.join(out, "windows.txt")) as f:
        for line in f:
            left, labels = line.split("|")
            sampler, s, r, *inputs = left.split()
            s, r = int(s), int(r)
            if sampler == "sequential":
                start = ((s * b + r) * t) % m
            else:
                h = splitmix64(splitmix64(splitmix64(seed) ^ s) ^ r)
                limit = (1 << 64) - (1 << 64) % m
                while h >= limit:
                    h = splitmix64(h)
                start = h % m
            assert [int(x) for x in inputs] == list(tokens[start:start + t])
            assert [int(x) for x in labels.split()] == list(
                tokens[start + 1:start + t + 1])
            seen += 1
    assert seen == 2 * 5 * b, seen


def main():
    writer, out, what = sys.argv[1:4]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    subprocess.run([writer, out], check=True)
    {"safetensors": check_safetensors, "trace": check_trace,
     "metrics": check_metrics, "data": check_data}[what](out)
    print(f"{what}: ok")


if __name__ == "__main__":
    main()
