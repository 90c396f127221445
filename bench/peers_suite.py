#!/usr/bin/env python3
"""The workloads of bench/suite.cu in PyTorch eager, torch.compile and CuPy.

    axpy           z = 1.5 * x + y                          2^10 ... 2^28 elements
    chain10        z = tanh(x * 0.5 + y) * sigmoid(w) + exp(-abs(x)) * 0.25
    bias-add       z = m + b, m [n, n], b [n]               32x32 ... 16384x16384
    transpose-add  z = x.t() + y on [n, n]
    softmax        softmax over the rows of a 4096 x 4096 float32 matrix; log-softmax and
                   logsumexp (keepdim) likewise; cross-entropy (F.cross_entropy's forward,
                   the matrix as logits, int64 labels [4096] as bench/suite.cu makes them)
    launch-bound   1000 dependent x = x * 0.5 + y on 1024 floats, microseconds per expression

Each peer gets its best natural spelling: eager writes single-operation workloads into a
preallocated output (torch.add(y, x, alpha=1.5, out=z), as etensor writes into an existing
tensor) and runs the launch-bound recurrence as one kernel per step (torch.add(y, x,
alpha=0.5, out=x)); chain10 is written with operators (one kernel per operation).
torch.compile compiles each workload once per shape (dynamic=False), and its first call
(the compilation) is reported separately. CuPy runs the elementwise workloads as one
ElementwiseKernel (broadcasting and the transposed view handled by CuPy's indexer) and the
softmax composed of CuPy operations (CuPy has no softmax of its own).

Timing as in et_bench_suite and bench/peers.py (whose helpers this script uses): a CUDA event
pair around every repetition, repetitions back to back after warm-up, median reported; the
launch-bound spans of 1000 expressions are timed whole and divided by 1000. Every result is
checked against a float64 evaluation on the same inputs.

Usage: python3 bench/peers_suite.py [--json PATH] [--reps N] [--sizes 10,16,20,24,28]
                                    [--only axpy,chain10,...] [--budget SECONDS]
A peer that is missing or fails is reported as unavailable; the others still run. Past
--budget seconds the remaining measurements are skipped (and listed as such).
"""

import argparse
import json
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import median_us, torch_timer, write_json  # noqa: E402  (the same timing as the 17-op chain's peers)

TOLERANCE = 1e-5  # max |got - want| / max(|want|, 1); softmax: relative to the value itself
AXPY_A = 1.5
SOFTMAX_SIDE = 4096
LAUNCH_ELEMENTS = 1024
LAUNCH_EXPRESSIONS = 1000
WORKLOADS = ("axpy", "chain10", "bias-add", "transpose-add", "softmax", "launch-bound")
PEERS = ("torch eager", "torch.compile", "cupy")

CUPY_CHAIN10 = r"""
const float sigmoid_w = 1.0f / (1.0f + expf(-w));
z = tanhf(x * 0.5f + y) * sigmoid_w + expf(-fabsf(x)) * 0.25f;
"""


def chain10(torch, x, y, w):
    return torch.tanh(x * 0.5 + y) * torch.sigmoid(w) + torch.exp(-torch.abs(x)) * 0.25


def relative_error(torch, got, want, scale_floor=1.0):
    """(max |got - want| / max(|want|, floor), non-finite count), on the GPU."""
    got = got.double()
    finite = torch.isfinite(got)
    non_finite = int((~finite).sum().item())
    diff = (got - want).abs() / torch.clamp(want.abs(), min=scale_floor)
    diff = torch.where(finite, diff, torch.zeros_like(diff))
    return (float(diff.max().item()) if got.numel() else 0.0), non_finite


class Runner:
    def __init__(self, torch, args):
        self.torch = torch
        self.reps = args.reps
        self.deadline = time.monotonic() + args.budget
        self.rows = []
        self.unavailable = {}
        self.skipped = []
        self.timer = torch_timer(torch)
        self.generator = torch.Generator(device="cuda").manual_seed(2027)
        try:
            import cupy
            self.cupy = cupy
        except Exception as e:  # noqa: BLE001 - reported, the torch peers still run
            self.cupy = None
            self.unavailable["cupy"] = f"{type(e).__name__}: {e}"
        import torch._dynamo
        config = torch._dynamo.config
        for limit in ("recompile_limit", "cache_size_limit"):  # one static compilation per shape
            if hasattr(config, limit):
                setattr(config, limit, max(getattr(config, limit), 64))
        self.compiled = {}

    def randn(self, *shape):
        return self.torch.randn(*shape, device="cuda", dtype=self.torch.float32, generator=self.generator)

    def compile(self, name, fn):
        if name not in self.compiled:
            self.compiled[name] = self.torch.compile(fn, dynamic=False)
        return self.compiled[name]

    def cupy_timer(self):
        cupy = self.cupy
        stream = cupy.cuda.Stream.null

        def record():
            event = cupy.cuda.Event()
            event.record(stream)
            return event
        return dict(record_start=record, record_end=record,
                    elapsed_ms=lambda start, end: cupy.cuda.get_elapsed_time(start, end),
                    synchronize=stream.synchronize)

    def measure(self, workload, size, elements, peer, run, output, want, scale_floor=1.0, per=1, note=""):
        """Times run() (after a first call, timed alone: torch.compile's compilation), checks output()."""
        if peer in self.unavailable:
            return
        if time.monotonic() > self.deadline:
            self.skipped.append(f"{workload} {size} {peer}")
            return
        try:
            synchronize = self.timer["synchronize"]
            synchronize()
            t0 = time.perf_counter()
            run()
            synchronize()
            first_ms = (time.perf_counter() - t0) * 1000.0
            timer = self.cupy_timer() if peer == "cupy" else self.timer
            reps = max(5, self.reps // 4) if per > 1 else self.reps
            us = median_us(run, warmup=2 if per > 1 else 3, reps=reps, **timer) / per
            error, non_finite = relative_error(self.torch, output(), want, scale_floor)
            ok = non_finite == 0 and error <= TOLERANCE
            row = {"workload": workload, "size": size, "elements": elements, "peer": peer, "us": us,
                   "first_call_ms": first_ms, "max_error": error, "non_finite": non_finite, "ok": ok}
            if note:
                row["note"] = note
            self.rows.append(row)
            flag = "" if ok else "  WRONG"
            print(f"{workload:<14} {size:<12} {peer:<14} {us:12.2f} us  first call {first_ms:9.1f} ms"
                  f"  error {error:.1e}{flag}", flush=True)
        except Exception as e:  # noqa: BLE001 - one failing peer must not stop the others
            key = peer if peer != "torch.compile" else f"torch.compile ({workload})"
            self.unavailable[key] = f"{type(e).__name__}: {e}"[:300]
            print(f"{workload} {size} {peer}: unavailable ({self.unavailable[key]})", flush=True)
            traceback.print_exc(file=sys.stdout)

    def to_cupy(self, t):
        return self.cupy.from_dlpack(t)

    # --- workloads --------------------------------------------------------------------
    def axpy(self, n):
        torch = self.torch
        x, y = self.randn(n), self.randn(n)
        z = torch.empty_like(x)
        want = AXPY_A * x.double() + y.double()
        size = f"2^{n.bit_length() - 1}"
        self.measure("axpy", size, n, "torch eager", lambda: torch.add(y, x, alpha=AXPY_A, out=z), lambda: z, want)
        f = self.compile("axpy", lambda a, b: AXPY_A * a + b)
        out = {}
        self.measure("axpy", size, n, "torch.compile", lambda: out.__setitem__("z", f(x, y)), lambda: out["z"], want)
        if self.cupy:
            kernel = self.cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", f"z = {AXPY_A}f * x + y",
                                                 "et_peer_axpy")
            cx, cy, cz = self.to_cupy(x), self.to_cupy(y), self.to_cupy(z)
            z.fill_(float("nan"))
            self.measure("axpy", size, n, "cupy", lambda: kernel(cx, cy, cz), lambda: z, want)

    def chain10(self, n):
        torch = self.torch
        x, y, w = self.randn(n), self.randn(n), self.randn(n)
        want = chain10(torch, x.double(), y.double(), w.double())
        size = f"2^{n.bit_length() - 1}"
        out = {}
        self.measure("chain10", size, n, "torch eager", lambda: out.__setitem__("z", chain10(torch, x, y, w)),
                     lambda: out["z"], want)
        f = self.compile("chain10", lambda a, b, c: chain10(torch, a, b, c))
        self.measure("chain10", size, n, "torch.compile", lambda: out.__setitem__("z", f(x, y, w)), lambda: out["z"],
                     want)
        if self.cupy:
            kernel = self.cupy.ElementwiseKernel("float32 x, float32 y, float32 w", "float32 z", CUPY_CHAIN10,
                                                 "et_peer_chain10")
            z = torch.full_like(x, float("nan"))
            cx, cy, cw, cz = (self.to_cupy(t) for t in (x, y, w, z))
            self.measure("chain10", size, n, "cupy", lambda: kernel(cx, cy, cw, cz), lambda: z, want)

    def bias_add(self, n):
        torch = self.torch
        side = math.isqrt(n)
        m, b = self.randn(side, side), self.randn(side)
        z = torch.empty_like(m)
        want = m.double() + b.double()
        size = f"{side}x{side}"
        self.measure("bias-add", size, n, "torch eager", lambda: torch.add(m, b, out=z), lambda: z, want)
        f = self.compile("bias-add", lambda a, c: a + c)
        out = {}
        self.measure("bias-add", size, n, "torch.compile", lambda: out.__setitem__("z", f(m, b)), lambda: out["z"],
                     want)
        if self.cupy:
            kernel = self.cupy.ElementwiseKernel("float32 m, float32 b", "float32 z", "z = m + b", "et_peer_bias_add")
            cm, cb, cz = self.to_cupy(m), self.to_cupy(b), self.to_cupy(z)
            z.fill_(float("nan"))
            self.measure("bias-add", size, n, "cupy", lambda: kernel(cm, cb, cz), lambda: z, want)

    def transpose_add(self, n):
        torch = self.torch
        side = math.isqrt(n)
        x, y = self.randn(side, side), self.randn(side, side)
        z = torch.empty_like(x)
        want = x.double().t() + y.double()
        size = f"{side}x{side}"
        self.measure("transpose-add", size, n, "torch eager", lambda: torch.add(x.t(), y, out=z), lambda: z, want)
        f = self.compile("transpose-add", lambda a, c: a.t() + c)
        out = {}
        self.measure("transpose-add", size, n, "torch.compile", lambda: out.__setitem__("z", f(x, y)),
                     lambda: out["z"], want)
        if self.cupy:
            kernel = self.cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y",
                                                 "et_peer_transpose_add")
            cx, cy, cz = self.to_cupy(x), self.to_cupy(y), self.to_cupy(z)
            z.fill_(float("nan"))
            self.measure("transpose-add", size, n, "cupy", lambda: kernel(cx.T, cy, cz), lambda: z, want)

    def softmax(self):
        """softmax, log-softmax and logsumexp (keepdim) over the rows of a 4096 x 4096 matrix."""
        torch = self.torch
        side = SOFTMAX_SIDE
        m = self.randn(side, side)
        size = f"{side}x{side}"
        out = {}
        workloads = (("softmax", lambda a: torch.softmax(a, 1), 1e-30),  # values about 1/side: relative errors
                     ("log-softmax", lambda a: torch.log_softmax(a, 1), 1.0),
                     ("logsumexp", lambda a: torch.logsumexp(a, 1, keepdim=True), 1.0))
        for name, op, floor in workloads:
            want = op(m.double())
            self.measure(name, size, side * side, "torch eager", lambda: out.__setitem__("z", op(m)),
                         lambda: out["z"], want, floor)
            f = self.compile(name, op)
            self.measure(name, size, side * side, "torch.compile", lambda: out.__setitem__("z", f(m)),
                         lambda: out["z"], want, floor)
        labels = (torch.arange(side, dtype=torch.int64, device=m.device) * 2654435761) % side

        def cross_entropy(a):
            return torch.nn.functional.cross_entropy(a, labels)
        want = cross_entropy(m.double())
        self.measure("cross-entropy", size, side * side, "torch eager", lambda: out.__setitem__("z", cross_entropy(m)),
                     lambda: out["z"], want)
        f = self.compile("cross-entropy", cross_entropy)
        self.measure("cross-entropy", size, side * side, "torch.compile", lambda: out.__setitem__("z", f(m)),
                     lambda: out["z"], want)
        if self.cupy:
            cupy = self.cupy
            cm = self.to_cupy(m)
            want = torch.softmax(m.double(), 1)

            def composed():
                e = cupy.exp(cm - cm.max(axis=1, keepdims=True))
                out["c"] = e / e.sum(axis=1, keepdims=True)
            self.measure("softmax", size, side * side, "cupy", composed,
                         lambda: torch.from_dlpack(out["c"]), want, 1e-30,
                         note="composed: max, subtract+exp, sum, divide")

    def launch_bound(self):
        torch = self.torch
        n, count = LAUNCH_ELEMENTS, LAUNCH_EXPRESSIONS
        y, start = self.randn(n), self.randn(n)
        want = start.double()
        for _ in range(count):
            want = want * 0.5 + y.double()
        size = f"{count} x 2^{n.bit_length() - 1}"
        # Each run starts from `start` again, so the check sees exactly `count` steps.
        x = start.clone()

        def eager():
            x.copy_(start)
            for _ in range(count):
                torch.add(y, x, alpha=0.5, out=x)
        self.measure("launch-bound", size, n, "torch eager", eager, lambda: x, want, per=count,
                     note="torch.add(y, x, alpha=0.5, out=x): one kernel per expression")
        # The same span as a CUDA graph (torch.cuda.CUDAGraph), the peer of et::capture.
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                eager()  # warm-up on the side stream, as PyTorch's docs ask before a capture
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                eager()
            self.measure("launch-bound graph", size, n, "torch eager", graph.replay, lambda: x, want, per=count,
                         note="torch.cuda.CUDAGraph of the eager span, replayed")
        except Exception as e:  # noqa: BLE001 - the graph peer is optional
            print(f"launch-bound graph torch eager: unavailable ({type(e).__name__}: {e})", flush=True)
        f = self.compile("launch-bound", lambda a, b: a * 0.5 + b)
        out = {}

        def compiled():
            value = start
            for _ in range(count):
                value = f(value, y)
            out["z"] = value
        self.measure("launch-bound", size, n, "torch.compile", compiled, lambda: out["z"], want, per=count)
        if self.cupy:
            kernel = self.cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * 0.5f + y",
                                                 "et_peer_halve_add")
            a, b = start.clone(), torch.empty_like(start)
            ca, cb, cy, cstart = self.to_cupy(a), self.to_cupy(b), self.to_cupy(y), self.to_cupy(start)

            def ping_pong():  # each step reads the previous step's output
                ca[...] = cstart
                for step in range(count // 2):
                    kernel(ca, cy, cb)
                    kernel(cb, cy, ca)
            self.measure("launch-bound", size, n, "cupy", ping_pong, lambda: a, want, per=count,
                         note="one ElementwiseKernel per expression, two buffers in turn")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--reps", type=int, default=30, help="timed repetitions per measurement (>= 10)")
    parser.add_argument("--sizes", default="10,16,20,24,28", help="log2 of the elementwise element counts (even)")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds; later measurements are skipped")
    args = parser.parse_args()
    if args.reps < 10:
        parser.error("--reps must be at least 10")
    sizes = [1 << int(s) for s in args.sizes.split(",")]
    if any(int(s) % 2 for s in args.sizes.split(",")):
        parser.error("--sizes must be even powers (the 2-d workloads are square)")
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = sorted(set(only) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {', '.join(WORKLOADS)}")

    result = {"benchmark": "suite-peers", "reps": args.reps, "versions": {}, "results": [], "unavailable": {},
              "skipped": [], "ok": True}
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        result["device"] = torch.cuda.get_device_name(0)
        result["versions"]["torch"] = torch.__version__
    except Exception as e:  # noqa: BLE001
        print(f"PyTorch unavailable ({e}); every peer needs it for inputs and checks")
        result["ok"] = False
        result["error"] = str(e)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        return 1

    runner = Runner(torch, args)
    if runner.cupy:
        result["versions"]["cupy"] = runner.cupy.__version__
    print(f"device: {result['device']}; versions: {result['versions']}; median of {args.reps}\n", flush=True)
    def save():
        """Writes what has been measured so far: a run stopped from outside keeps it."""
        result["results"] = runner.rows
        result["unavailable"] = runner.unavailable
        result["skipped"] = runner.skipped
        result["ok"] = all(r["ok"] for r in runner.rows)
        write_json(args.json, result)

    for workload in only:
        method = getattr(runner, workload.replace("-", "_"))
        for n in ([None] if workload in ("softmax", "launch-bound") else sizes):
            try:  # set-up failures (memory, a CuPy import that half works) cost one workload and size
                method() if n is None else method(n)
            except Exception as e:  # noqa: BLE001
                key = f"{workload} {'' if n is None else n}".strip()
                runner.unavailable[key] = f"{type(e).__name__}: {e}"[:300]
                print(f"{key}: failed ({runner.unavailable[key]})", flush=True)
                traceback.print_exc(file=sys.stdout)
            save()
        torch.cuda.empty_cache()

    save()
    for name, why in runner.unavailable.items():
        print(f"{name}: unavailable: {why}")
    if runner.skipped:
        print(f"skipped past the {args.budget:.0f} s budget: {', '.join(runner.skipped)}")
    if args.json:
        print(f"wrote {args.json}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
