#!/usr/bin/python3
"""Reads merak checkpoints: whole tensors from the shards of any (dp, tp, pp).

A checkpoint directory (./train --checkpoint-dir DIR) holds `latest`, naming
the newest complete step, and one directory per saved step:

    DIR/step_<S>/shard-<R>-of-<W>.safetensors

Each process R of W stores the tensors, or the pieces of tensors, that it
alone holds. A tensor stored whole has its full shape; the piece of a
tensor-parallel or ZeRO-sharded tensor is described in the shard's
metadata "merak.pieces" (JSON: name -> {"global_shape", "axis", "slabs":
[[start, length], ...], "flat": [begin, count]}): the full tensor cut to the
slabs along `axis` (concatenated), then optionally flattened and cut to
[begin, begin + count). This script puts the pieces back together.

    merak_checkpoint.py info  DIR [--step S]
    merak_checkpoint.py merge DIR [--step S] -o model.safetensors [--params-only]

`merge` writes one ordinary safetensors file of whole tensors (what
`safetensors.torch.load_file` or `torch.load_state_dict` takes);
`--params-only` leaves out the optimizer state (`optimizer.*`).
As a module: read_checkpoint(DIR, step=None) -> {name: numpy array}.
Only numpy is needed.
"""
import argparse
import json
import os
import sys

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
          "I64": np.int64, "I32": np.int32, "U16": np.uint16, "BOOL": np.bool_}


def read_safetensors(path):
    """(tensors {name: array}, metadata {key: str}, dtypes {name: str})."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None) or {}
    tensors, dtypes = {}, {}
    for name, info in header.items():
        lo, hi = info["data_offsets"]
        tensors[name] = np.frombuffer(data[lo:hi], dtype=DTYPES[info["dtype"]]).reshape(
            info["shape"])
        dtypes[name] = info["dtype"]
    return tensors, meta, dtypes


def shard_files(ckpt_dir, step=None):
    """The shard files of step `step` (default: the one `latest` names)."""
    if step is None:
        with open(os.path.join(ckpt_dir, "latest")) as f:
            name = f.read().strip()
    else:
        name = "step_%d" % step
    path = os.path.join(ckpt_dir, name)
    if os.path.isfile(path):  # the first format: one file of whole tensors
        return [path]
    shards = {}
    for entry in os.listdir(path):
        if entry.startswith("shard-") and entry.endswith(".safetensors"):
            rank, world = entry[len("shard-"):-len(".safetensors")].split("-of-")
            shards[int(rank)] = (int(world), os.path.join(path, entry))
    worlds = {w for w, _ in shards.values()}
    if len(worlds) != 1 or sorted(shards) != list(range(worlds.pop())):
        raise ValueError("%s: incomplete or mixed shards: %s" % (path, sorted(shards)))
    return [shards[r][1] for r in sorted(shards)]


def _piece_indices(piece):
    """Flat indices, into the full tensor, of the piece's elements in order."""
    shape = piece["global_shape"]
    idx = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    if "slabs" in piece:
        axis = piece["axis"]
        idx = np.concatenate([np.take(idx, np.arange(s, s + n), axis=axis)
                              for s, n in piece["slabs"]], axis=axis)
    idx = idx.reshape(-1)
    if "flat" in piece:
        begin, count = piece["flat"]
        idx = idx[begin:begin + count]
    return idx


def read_checkpoint(ckpt_dir, step=None, dtypes=None):
    """{name: whole numpy array} of a checkpoint saved under any mesh;
    `dtypes`, when given, receives each tensor's safetensors dtype name."""
    full, filled = {}, {}
    for path in shard_files(ckpt_dir, step):
        tensors, meta, names = read_safetensors(path)
        if dtypes is not None:
            dtypes.update(names)
        pieces = json.loads(meta.get("merak.pieces", "{}"))
        for name, data in tensors.items():
            piece = pieces.get(name)
            if piece is None:  # whole
                full[name], filled[name] = data.copy(), data.size
                continue
            shape = tuple(piece["global_shape"])
            if name not in full:
                full[name] = np.zeros(shape, dtype=data.dtype)
                filled[name] = 0
            full[name].reshape(-1)[_piece_indices(piece)] = data.reshape(-1)
            filled[name] += data.size
    for name, arr in full.items():
        if filled[name] != arr.size:
            raise ValueError("tensor %s: the shards hold %d of its %d elements"
                             % (name, filled[name], arr.size))
    return full


def write_safetensors(path, tensors, metadata=None, dtypes=None):
    header, offset, blobs = {}, 0, []
    names = {np.dtype(v).name: k for k, v in DTYPES.items() if k not in ("BF16",)}
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr).reshape(np.shape(arr))  # (0-d stays 0-d)
        blob = arr.tobytes()
        dtype = (dtypes or {}).get(name) or names[arr.dtype.name]
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["info", "merge"])
    ap.add_argument("dir", help="the --checkpoint-dir of ./train")
    ap.add_argument("--step", type=int, help="a saved step (default: latest)")
    ap.add_argument("-o", "--output", help="merge: the safetensors file to write")
    ap.add_argument("--params-only", action="store_true",
                    help="merge: leave out optimizer state (optimizer.*)")
    args = ap.parse_args(argv)
    try:
        files = shard_files(args.dir, args.step)
        dtypes = {}
        tensors = read_checkpoint(args.dir, args.step, dtypes)
    except (OSError, ValueError, KeyError) as e:
        print("merak_checkpoint: error: %s" % e, file=sys.stderr)
        return 1
    if args.command == "info":
        print("%d shard file(s), %d tensors" % (len(files), len(tensors)))
        for name, arr in sorted(tensors.items()):
            print("  %-60s %-5s %s" % (name, dtypes[name], list(arr.shape)))
        return 0
    if not args.output:
        print("merak_checkpoint: error: merge needs -o FILE", file=sys.stderr)
        return 2
    if args.params_only:
        tensors = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    _, meta, _ = read_safetensors(files[0])
    meta = {k: v for k, v in meta.items() if not k.startswith("merak.")}
    write_safetensors(args.output, tensors, meta, dtypes)
    print("wrote %s: %d tensors" % (args.output, len(tensors)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
