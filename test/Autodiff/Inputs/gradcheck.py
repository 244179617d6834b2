#!/usr/bin/env python3
"""Finite-difference gradient checker for merak-autodiff.

    gradcheck.py FILE.mlir [--zero NAME]... [--step H] [--case N] [--verbose]

FILE holds one or more cases separated by lines `// -----` (as with
`merak-opt -split-input-file`). Every case is a module with

  * parameters declared inline, `merak.param @NAME : tensor<...xf64> =
    dense<...> : tensor<...xf64>` (nested lists or a splat);
  * `func.func @forward(...)` whose first result is a scalar f64 loss.

For every case the script

  (a) runs `merak-opt --merak-autodiff` and `merak-run --entry forward_grad`
      (the function arguments are saved as .npy files) to get the loss and
      the analytic gradient of every parameter;
  (b) for every element of every f64 parameter rewrites the parameter's
      dense value with +h and -h and runs `merak-run --entry forward` on
      each copy; numeric = (L(+h) - L(-h)) / ((v+h) - (v-h)) with
      h = max(1e-6, 1e-6 * |v|) (or the case's `--step`);
  (c) passes a parameter iff

          max |analytic - numeric| <= ATOL + RTOL * max |numeric|

      with ATOL = 1e-6 and RTOL = 1e-5 (all maxima over the parameter's
      elements). This is far below the size of a wrong factor or sign on
      any gradient that is not tiny; a parameter whose numeric gradient is
      (nearly) zero everywhere fails as "trivial" unless it is declared
      zero, so that a case cannot pass without exercising its rule;
  (d) for a parameter declared zero (`--zero NAME`, or a line
      `// gradcheck-zero: NAME` in the case) additionally requires every
      element of the analytic gradient to be exactly 0.0 (and the numeric
      one to be within ATOL of 0).

It also checks that @forward_grad returns exactly @forward's loss.

Directives, as comment lines inside a case:
  // gradcheck-arg: %x = <python literal>   value of the argument %x (it is
                                            broadcast to the argument's
                                            shape); float arguments without
                                            one get seeded values in [-1, 1]
  // gradcheck-zero: NAME [NAME...]         see (d)
  // gradcheck-step: H                      absolute step for every element
                                            (e.g. a power of two so that
                                            v +- h stays exact in f32)

Output: one line per parameter, `case K: PASS` / `case K: FAIL` per case,
and a last line `gradcheck: all N cases passed` (exit 0) or
`gradcheck: M of N cases FAILED` (exit 1).
"""

import argparse
import ast
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

# The tolerance of (c): max|analytic - numeric| <= ATOL + RTOL * max|numeric|.
ATOL = 1e-6
RTOL = 1e-5
# Relative step (and its floor) of the central differences.
REL_STEP = 1e-6
MIN_STEP = 1e-6
# A parameter whose numeric gradient stays below this everywhere is
# "trivial" unless declared zero.
TRIVIAL = 1e-8
WORKERS = 2
TIMEOUT_S = 120

DTYPES = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16,
    "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
    "ui8": np.uint8, "i1": np.bool_,
}


class CaseError(Exception):
    pass


def find_tool(name, tools_dir):
    if tools_dir:
        return os.path.join(tools_dir, name)
    found = shutil.which(name)
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    guess = os.path.normpath(os.path.join(here, "..", "..", "..", "build", "bin", name))
    if os.path.exists(guess):
        return guess
    sys.exit("gradcheck: cannot find " + name + " (put it on PATH or use --tools-dir)")


def parse_tensor_type(text):
    """'2x3xf64' -> ((2, 3), 'f64'); 'f64' -> ((), 'f64')."""
    parts = text.strip().split("x")
    elem = parts[-1]
    try:
        shape = tuple(int(p) for p in parts[:-1])
    except ValueError:
        raise CaseError("unsupported tensor type tensor<%s>" % text)
    if elem not in DTYPES:
        raise CaseError("unsupported element type in tensor<%s>" % text)
    return shape, elem


def fmt_float(v):
    # Always with a '.', which MLIR's float literal syntax needs, and 17
    # significant digits, which round-trips every double.
    return "%.17e" % float(v)


def dense_literal(values):
    if values.ndim == 0:
        return fmt_float(values)
    return "[" + ", ".join(dense_literal(v) for v in values) + "]"


PARAM_RE = re.compile(
    r'merak\.param\s+@("(?:[^"\\]|\\.)*"|[A-Za-z_$.][\w$.\-]*)\s*:\s*tensor<([^>]*)>\s*=\s*')


class Param:
    def __init__(self, name, shape, elem, value, span):
        self.name, self.shape, self.elem = name, shape, elem
        self.value, self.span = value, span  # span: the text inside dense<...>


def parse_params(text):
    params = []
    for m in PARAM_RE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if "//" in text[line_start:m.start()]:
            continue  # in a comment
        raw = m.group(1)
        name = raw[1:-1] if raw.startswith('"') else raw
        shape, elem = parse_tensor_type(m.group(2))
        rest = text[m.end():]
        if not rest.startswith("dense<"):
            if elem == "f64":
                raise CaseError("param @%s: the value must be an inline dense<...>" % name)
            params.append(Param(name, shape, elem, None, None))
            continue
        begin = m.end() + len("dense<")
        end = text.index(">", begin)
        body = text[begin:end].strip()
        value = None
        if elem in ("f64", "f32", "f16"):
            if body.startswith('"'):
                raise CaseError("param @%s: hex dense values are not supported" % name)
            try:
                lit = ast.literal_eval(body)
            except (ValueError, SyntaxError):
                raise CaseError("param @%s: cannot parse dense<%s>" % (name, body))
            arr = np.array(lit, dtype=np.float64)
            if arr.ndim == 0:
                arr = np.full(shape, float(arr))
            if arr.shape != shape:
                raise CaseError("param @%s: value shape %s, type shape %s"
                                % (name, arr.shape, shape))
            value = arr
        params.append(Param(name, shape, elem, value, (begin, end)))
    return params


def parse_forward_args(text):
    m = re.search(r"func\.func\s+@forward\s*\(", text)
    if not m:
        return []
    depth, i = 1, m.end()
    while depth:
        if i >= len(text):
            raise CaseError("unbalanced @forward signature")
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    sig = text[m.end():i - 1]
    return [(a, parse_tensor_type(t)) for a, t in
            re.findall(r"%([\w$.\-]+)\s*:\s*tensor<([^>]*)>", sig)]


def make_inputs(text, args, workdir):
    given = {}
    for m in re.finditer(r"//\s*gradcheck-arg:\s*%([\w$.\-]+)\s*=\s*(.+)", text):
        given[m.group(1)] = m.group(2).strip()
    paths = []
    for k, (name, (shape, elem)) in enumerate(args):
        dtype = DTYPES[elem]
        if name in given:
            try:
                arr = np.array(ast.literal_eval(given[name]))
            except (ValueError, SyntaxError):
                raise CaseError("cannot parse the value of %" + name)
            arr = np.broadcast_to(arr.astype(dtype), shape).copy()
        elif elem in ("f64", "f32", "f16"):
            rng = np.random.default_rng(1234 + k)
            arr = rng.uniform(-1.0, 1.0, shape).astype(dtype)
        else:
            raise CaseError("argument %%%s (%s) needs a `// gradcheck-arg:` value"
                            % (name, elem))
        path = os.path.join(workdir, "arg%d.npy" % k)
        np.save(path, arr)
        paths.append(path)
    return paths


def run(cmd):
    # A tool that cannot be started at all (e.g. "text file busy" while it
    # is being relinked) is retried; a tool that runs and fails is not.
    for attempt in range(3):
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=TIMEOUT_S)
            return p.returncode, p.stdout + p.stderr
        except OSError as e:
            if attempt == 2:
                return 127, "cannot run %s: %s" % (cmd[0], e)
            time.sleep(1.0)


class Checker:
    def __init__(self, opts):
        self.opts = opts
        self.opt = find_tool("merak-opt", opts.tools_dir)
        self.run = find_tool("merak-run", opts.tools_dir)
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS)

    def evaluate(self, path, entry, inputs, outdir, count):
        cmd = [self.run, path, "--entry", entry, "--output-dir", outdir,
               "--output-format", "npy"]
        for i in inputs:
            cmd += ["--input", i]
        rc, out = run(cmd)
        if rc != 0:
            raise CaseError("merak-run --entry %s %s failed (rc %d):\n%s"
                            % (entry, os.path.basename(path), rc, out))
        return [np.load(os.path.join(outdir, "output_%d.npy" % i)) for i in range(count)]

    def loss_at(self, text, param, values, workdir, tag, inputs):
        a, b = param.span
        new = text[:a] + dense_literal(values) + text[b:]
        path = os.path.join(workdir, tag + ".mlir")
        with open(path, "w") as f:
            f.write(new)
        loss = self.evaluate(path, "forward", inputs, os.path.join(workdir, tag), 1)[0]
        return float(loss)

    def check_case(self, index, text, workdir, log):
        zero = set(self.opts.zero)
        for m in re.finditer(r"//\s*gradcheck-zero:\s*(.+)", text):
            zero.update(n.lstrip("@") for n in m.group(1).split())
        step = self.opts.step
        m = re.search(r"//\s*gradcheck-step:\s*(\S+)", text)
        if m:
            step = float(m.group(1))

        params = parse_params(text)
        if not params:
            raise CaseError("no merak.param")
        unknown = zero - {p.name for p in params}
        if unknown:
            raise CaseError("declared zero but not a parameter: " + ", ".join(sorted(unknown)))
        inputs = make_inputs(text, parse_forward_args(text), workdir)

        src = os.path.join(workdir, "case.mlir")
        with open(src, "w") as f:
            f.write(text)
        grad_path = os.path.join(workdir, "grad.mlir")
        rc, out = run([self.opt, "--merak-autodiff", src, "-o", grad_path])
        if rc != 0:
            raise CaseError("merak-opt --merak-autodiff failed (rc %d):\n%s" % (rc, out))
        results = self.evaluate(grad_path, "forward_grad", inputs,
                                os.path.join(workdir, "grad"), 1 + len(params))
        loss = results[0]
        if loss.shape != () or loss.dtype != np.float64:
            raise CaseError("the loss is %s %s, not a scalar f64" % (loss.dtype, loss.shape))
        base = self.evaluate(src, "forward", inputs, os.path.join(workdir, "fwd"), 1)[0]
        if float(base) != float(loss):
            raise CaseError("@forward_grad's loss %r differs from @forward's %r"
                            % (float(loss), float(base)))

        ok = True
        # Submit every perturbation first so that the pool stays busy.
        jobs = []
        for p in params:
            if p.value is None or p.elem != "f64":
                continue
            for i in np.ndindex(*p.shape):
                v = p.value[i]
                h = step if step else max(MIN_STEP, REL_STEP * abs(v))
                plus, minus = p.value.copy(), p.value.copy()
                plus[i], minus[i] = v + h, v - h
                lin = int(np.ravel_multi_index(i, p.shape)) if p.shape else 0
                tag = "%s_%d" % (re.sub(r"\W", "_", p.name), lin)
                jobs.append((p, i, plus[i] - minus[i],
                             self.pool.submit(self.loss_at, text, p, plus, workdir,
                                              tag + "_p", inputs),
                             self.pool.submit(self.loss_at, text, p, minus, workdir,
                                              tag + "_m", inputs)))
        numeric = {p.name: np.zeros(p.shape) for p in params}
        for p, i, width, fp, fm in jobs:
            numeric[p.name][i] = (fp.result() - fm.result()) / width

        for k, p in enumerate(params):
            g = results[1 + k]
            if self.opts.corrupt_scale is not None:
                g = g * self.opts.corrupt_scale
            if self.opts.corrupt_reverse:
                g = g.ravel()[::-1].reshape(g.shape)
            label = "case %d: param @%s %s" % (index, p.name, "x".join(map(str, p.shape)) or "scalar")
            if g.shape != p.shape:
                log("%s: gradient shape %s, expected %s  FAIL" % (label, g.shape, p.shape))
                ok = False
                continue
            if p.elem != "f64":
                if p.name in zero and not np.all(g == 0):
                    log("%s (%s): gradient not exactly zero  FAIL" % (label, p.elem))
                    ok = False
                else:
                    log("%s (%s): not f64, finite differences skipped" % (label, p.elem))
                continue
            num = numeric[p.name]
            err = float(np.max(np.abs(g - num))) if g.size else 0.0
            scale = float(np.max(np.abs(num))) if g.size else 0.0
            tol = ATOL + RTOL * scale
            msg = "%s: max|analytic-numeric| = %.3e, max|numeric| = %.3e, tol = %.3e" % (
                label, err, scale, tol)
            good = err <= tol
            if p.name in zero:
                exact = bool(np.all(g == 0))
                msg += ", exactly zero: %s" % ("yes" if exact else "NO")
                good = good and exact
            elif scale < TRIVIAL:
                msg += " (trivial: the loss does not depend on it; use gradcheck-zero)"
                good = False
            if not good or self.opts.verbose:
                with np.printoptions(precision=10, suppress=False):
                    detail = "\n    analytic: %s\n    numeric:  %s" % (
                        np.array2string(g.ravel()), np.array2string(num.ravel()))
            else:
                detail = ""
            log(msg + ("  ok" if good else "  FAIL") + detail)
            ok = ok and good
        return ok


def split_cases(text):
    chunks, start_lines, cur, line0 = [], [], [], 1
    for n, line in enumerate(text.splitlines(True), 1):
        if re.match(r"^\s*//\s*-----\s*$", line):
            chunks.append("".join(cur))
            start_lines.append(line0)
            cur, line0 = [], n + 1
        else:
            cur.append(line)
    chunks.append("".join(cur))
    start_lines.append(line0)
    return list(zip(chunks, start_lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--zero", action="append", default=[], metavar="NAME",
                    help="the gradient of this parameter must be exactly zero")
    ap.add_argument("--step", type=float, default=None,
                    help="absolute finite-difference step (default: relative)")
    ap.add_argument("--case", type=int, action="append", default=None,
                    help="check only this case (0-based; repeatable)")
    ap.add_argument("--tools-dir", default=None)
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="keep the intermediate files in DIR")
    ap.add_argument("--verbose", action="store_true")
    # Fault injection, to test the checker itself: distort the analytic
    # gradients before the comparison.
    ap.add_argument("--corrupt-scale", type=float, default=None, metavar="F",
                    help="(self-test) multiply every analytic gradient by F")
    ap.add_argument("--corrupt-reverse", action="store_true",
                    help="(self-test) reverse the element order of every analytic gradient")
    opts = ap.parse_args()
    opts.zero = [n.lstrip("@") for n in opts.zero]

    with open(opts.file) as f:
        cases = split_cases(f.read())
    checker = Checker(opts)
    root = opts.keep or tempfile.mkdtemp(prefix="gradcheck.")
    os.makedirs(root, exist_ok=True)
    log = lambda s: print(s, flush=True)
    failed = checked = 0
    try:
        for index, (text, line) in enumerate(cases):
            if opts.case is not None and index not in opts.case:
                continue
            checked += 1
            workdir = os.path.join(root, "case%d" % index)
            os.makedirs(workdir, exist_ok=True)
            try:
                ok = checker.check_case(index, text, workdir, log)
            except (CaseError, subprocess.TimeoutExpired) as e:
                log("case %d: error: %s" % (index, e))
                ok = False
            except Exception as e:  # e.g. a missing output file
                log("case %d: error: %s: %s" % (index, type(e).__name__, e))
                ok = False
            log("case %d: %s (line %d)" % (index, "PASS" if ok else "FAIL", line))
            failed += not ok
    finally:
        checker.pool.shutdown()
        if not opts.keep:
            shutil.rmtree(root, ignore_errors=True)
    if failed:
        log("gradcheck: %d of %d cases FAILED" % (failed, checked))
        return 1
    log("gradcheck: all %d cases passed" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
