#!/usr/bin/env python3
"""The workloads of bench/autograd.cu in PyTorch eager and torch.compile (forward + backward).

    chain10 fwd+bwd    x, y, w: 2^28 float32 (--log2), requiring grad;
                       z = tanh(x * 0.5 + y) * sigmoid(w) + exp(-abs(x)) * 0.25; z.backward(g), g = ones
    chain10 fwd        the forward alone (recording what the backward needs)
    chain10 bwd        z.backward(g) alone (the forward queued before the start event)
    mlp3 fwd+bwd       h1 = relu(addmm(b1, x, w1)); h2 = relu(addmm(b2, h1, w2)); out = addmm(b3, h2, w3);
                       (out * out).mean().backward(); x [256, 4096], w_k [4096, 4096], b_k [4096];
                       float32 with TF32 off (etensor's MathMode::exact)
    mlp3 tf32 fwd+bwd  the same with TF32 allowed (etensor's MathMode::tf32)
    tiny recorded fwd  1000 dependent y = 0.5 + 1.0001 * y on 1024 floats (x requires grad), host
                       microseconds per op: eager torch.add(half, y, alpha=1.0001), one kernel and one
                       autograd node per op; torch.compile: the step compiled, one node per call
    tiny recorded bwd  y.sum().backward() through those 1000 nodes, host microseconds per node
    tiny no-grad fwd   the same loop under torch.no_grad()
    tiny cpu ...       the same three on CPU tensors, eager only (what recording costs the host)

As in bench/autograd.cu, every iteration starts from fresh leaves (t.detach().requires_grad_()),
so grads are written once, not accumulated: PyTorch's zero_grad(set_to_none=True).
torch.compile compiles each workload once (dynamic=False); its first call (the compilation,
forward and backward) is reported separately. The mlp3 inputs are odd integers in [-3, 3]
(biases half-integers), as in bench/autograd.cu, so the float32 forward is exact and no ReLU
mask differs from the float64 reference's.

Timing as et_bench_autograd: a CUDA event pair around every repetition after warm-up, median
(mlp3: after one second of the same work, bench/peers_gemm.py's timing); tiny ops: host
perf_counter spans ending with torch.cuda.synchronize(), median. Checks against float64:
chain10 z and gradients (in chunks) within 1e-5 of max(|ref|, 1); mlp3's six gradients
within 1e-4 of max |ref|; tiny ops within 1e-4 (1000 dependent roundings).

Usage: python3 bench/peers_autograd.py [--json PATH] [--reps N] [--log2 K] [--only chain10,mlp3,tiny]
                                       [--budget SECONDS]
A peer that fails is reported as unavailable; the others still run. Past --budget seconds the
remaining measurements are skipped (and listed as such).
"""

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import median_us, torch_timer, write_json  # noqa: E402  (event pairs, as every peer script)
from peers_gemm import median_us as steady_median_us, set_tf32  # noqa: E402
from peers_suite import chain10, relative_error  # noqa: E402

TOLERANCE = {"chain10": 1e-5, "mlp3": 1e-4, "mlp3 tf32": 5e-2, "tiny": 1e-4}
MLP_BATCH, MLP_WIDTH = 256, 4096
TINY_ELEMENTS, TINY_OPS = 1024, 1000
WORKLOADS = ("chain10", "mlp3", "mlp3_tf32", "tiny", "tiny_cpu")
PEERS = ("torch eager", "torch.compile")


def median(times):
    times = sorted(times)
    middle = len(times) // 2
    return times[middle] if len(times) % 2 else 0.5 * (times[middle - 1] + times[middle])


def phase_median_us(torch, setup, work, warmup, reps):
    """Median microseconds of work() between an event pair, setup() queued before each start."""
    for _ in range(warmup):
        setup()
        work()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(reps):
        setup()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return median([1000.0 * s.elapsed_time(e) for s, e in pairs])


def host_median_us(torch, setup, work, warmup, spans):
    """Median host microseconds of work() up to torch.cuda.synchronize(), setup() untimed."""
    times = []
    for s in range(warmup + spans):
        setup()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        work()
        torch.cuda.synchronize()
        if s >= warmup:
            times.append((time.perf_counter() - t0) * 1e6)
    return median(times)


class Runner:
    def __init__(self, torch, args):
        self.torch = torch
        self.reps = args.reps
        self.log2 = args.log2
        self.deadline = time.monotonic() + args.budget
        self.rows = []
        self.unavailable = {}
        self.skipped = []
        self.timer = torch_timer(torch)
        self.generator = torch.Generator(device="cuda").manual_seed(2027)
        import torch._dynamo
        config = torch._dynamo.config
        for limit in ("recompile_limit", "cache_size_limit"):
            if hasattr(config, limit):
                setattr(config, limit, max(getattr(config, limit), 64))

    def peers(self, fn):
        """(peer, function) for eager and torch.compile (compiled once per workload)."""
        return (("torch eager", fn), ("torch.compile", self.torch.compile(fn, dynamic=False)))

    def measure(self, workload, size, elements, peer, first, timed, check, tolerance, note=""):
        """first() once (torch.compile's compilation), then timed() -> us, then check()."""
        if peer in self.unavailable or f"torch.compile ({workload.split()[0]})" in self.unavailable:
            return
        if time.monotonic() > self.deadline:
            self.skipped.append(f"{workload} {size} {peer}")
            return
        try:
            self.torch.cuda.synchronize()
            t0 = time.perf_counter()
            first()
            self.torch.cuda.synchronize()
            first_ms = (time.perf_counter() - t0) * 1000.0
            us = timed()
            error, non_finite = check()
            ok = non_finite == 0 and error <= tolerance
            row = {"workload": workload, "size": size, "elements": elements, "peer": peer, "us": us,
                   "first_call_ms": first_ms, "max_error": error, "non_finite": non_finite, "ok": ok}
            if note:
                row["note"] = note
            self.rows.append(row)
            flag = "" if ok else "  WRONG"
            print(f"{workload:<18} {size:<12} {peer:<14} {us:12.2f} us  first call {first_ms:9.1f} ms"
                  f"  error {error:.1e}{flag}", flush=True)
        except Exception as e:  # noqa: BLE001 - one failing peer must not stop the others
            key = peer if peer != "torch.compile" else f"torch.compile ({workload.split()[0]})"
            self.unavailable[key] = f"{type(e).__name__}: {e}"[:300]
            print(f"{workload} {size} {peer}: unavailable ({self.unavailable[key]})", flush=True)
            traceback.print_exc(file=sys.stdout)

    def integers(self, high, *shape):
        return self.torch.randint(0, high, shape, device="cuda", generator=self.generator).float()

    # --- workloads --------------------------------------------------------------------
    def chain10(self):
        torch = self.torch
        n, size = 1 << self.log2, f"2^{self.log2}"
        x, y, w = (torch.randn(n, device="cuda", generator=self.generator) for _ in range(3))
        g = torch.ones(n, device="cuda")
        state = {}

        def check(grads):
            """z (and the gradients) against float64, 2^24 elements at a time."""
            worst, bad = 0.0, 0
            leaves = state["leaves"]
            if grads and any(leaf.grad is None for leaf in leaves):
                return float("inf"), n
            for s in range(0, n, 1 << 24):
                part = slice(s, s + (1 << 24))
                ref = [t[part].double().requires_grad_() for t in (x, y, w)]
                zd = chain10(torch, *ref)
                pairs = [(state["z"][part].detach(), zd.detach())]
                if grads:
                    zd.backward(g[part].double())
                    pairs += [(leaf.grad[part], r.grad) for leaf, r in zip(leaves, ref)]
                for got, want in pairs:
                    error, non_finite = relative_error(torch, got, want)
                    worst, bad = max(worst, error), bad + non_finite
            return worst, bad

        for peer, fn in self.peers(lambda a, b, c: chain10(torch, a, b, c)):
            def forward(fn=fn):
                state.clear()  # the last iteration's graph goes first
                state["leaves"] = [t.detach().requires_grad_() for t in (x, y, w)]
                state["z"] = fn(*state["leaves"])

            def backward():
                state["z"].backward(g)

            def both(forward=forward):
                forward()
                backward()
            timed = {"chain10 fwd+bwd": lambda both=both: median_us(both, warmup=3, reps=self.reps, **self.timer),
                     "chain10 fwd": lambda forward=forward: median_us(forward, warmup=3, reps=self.reps, **self.timer),
                     "chain10 bwd": lambda forward=forward: phase_median_us(torch, forward, backward, 3, self.reps)}
            for workload, run in timed.items():
                grads = workload != "chain10 fwd"
                self.measure(workload, size, n, peer, both if grads else forward, run,
                             lambda grads=grads: check(grads), TOLERANCE["chain10"])
        state.clear()

    def mlp3(self, tf32=False):
        torch = self.torch
        setting = set_tf32(torch, tf32)
        name = "mlp3 tf32" if tf32 else "mlp3"
        x = self.integers(4, MLP_BATCH, MLP_WIDTH) * 2 - 3
        params = []
        for _ in range(3):
            params += [self.integers(4, MLP_WIDTH, MLP_WIDTH) * 2 - 3, self.integers(16, MLP_WIDTH) - 7.5]

        def loss_of(a, w1, b1, w2, b2, w3, b3):
            h1 = torch.relu(torch.addmm(b1, a, w1))
            h2 = torch.relu(torch.addmm(b2, h1, w2))
            out = torch.addmm(b3, h2, w3)
            return (out * out).mean()
        reference = [p.double().requires_grad_() for p in params]
        loss_of(x.double(), *reference).backward()
        state = {}

        def check():
            worst, bad = 0.0, 0
            for leaf, r in zip(state["leaves"], reference):
                if leaf.grad is None:
                    return float("inf"), leaf.numel()
                bad += int((~torch.isfinite(leaf.grad)).sum().item())
                worst = max(worst, ((leaf.grad.double() - r.grad).abs().max() / r.grad.abs().max()).item())
            return worst, bad

        size = f"{MLP_BATCH}x{MLP_WIDTH} x3"
        for peer, fn in self.peers(loss_of):
            def step(fn=fn):
                state.clear()
                state["leaves"] = [p.detach().requires_grad_() for p in params]
                fn(x, *state["leaves"]).backward()
            self.measure(f"{name} fwd+bwd", size, MLP_BATCH * MLP_WIDTH, peer, step,
                         lambda step=step: steady_median_us(torch, step, 1.0, self.reps), check, TOLERANCE[name],
                         note=setting)
        state.clear()
        set_tf32(torch, False)

    def mlp3_tf32(self):
        self.mlp3(tf32=True)

    def tiny(self, device="cuda", name="tiny"):
        torch = self.torch
        start = torch.randn(TINY_ELEMENTS, device="cuda", generator=self.generator).to(device)
        half = torch.full_like(start, 0.5)
        factor = torch.tensor(1.0001, dtype=torch.float32).item()  # 1.0001 rounded to float32
        want = start.double()
        for _ in range(TINY_OPS):
            want = want * factor + 0.5
        want_grad = torch.full_like(want, factor ** TINY_OPS)
        state = {}
        size = f"{TINY_OPS} x 2^{TINY_ELEMENTS.bit_length() - 1}"
        spans = max(5, self.reps // 4)

        def check(grads):
            error, bad = relative_error(torch, state["y"].detach(), want)
            if grads:
                if state["x"].grad is None:
                    return float("inf"), TINY_ELEMENTS
                grad_error, grad_bad = relative_error(torch, state["x"].grad, want_grad)
                error, bad = max(error, grad_error), bad + grad_bad
            return error, bad

        for peer, step in self.peers(lambda v: v * 1.0001 + 0.5):
            if device == "cpu" and peer != "torch eager":
                continue  # the CPU rows compare recording costs with eager PyTorch's
            if peer == "torch eager":
                step = lambda v: torch.add(half, v, alpha=1.0001)  # noqa: E731 - one kernel, one node

            def reset():
                state.clear()
                state["x"] = start.detach().requires_grad_()

            def forward(step=step):
                v = state["x"]
                for _ in range(TINY_OPS):
                    v = step(v)
                state["y"] = v

            def forward_no_grad(forward=forward):
                with torch.no_grad():
                    forward()

            def setup_backward(forward=forward):
                reset()
                forward()
                state["loss"] = state["y"].sum()

            def backward():
                state["loss"].backward()

            def per_op(setup, work):
                return lambda: host_median_us(torch, setup, work, 1, spans) / TINY_OPS
            self.measure(f"{name} recorded fwd", size, TINY_ELEMENTS, peer, lambda f=forward: (reset(), f()),
                         per_op(reset, forward), lambda: check(False), TOLERANCE["tiny"])
            self.measure(f"{name} recorded bwd", size, TINY_ELEMENTS, peer, lambda s=setup_backward: (s(), backward()),
                         per_op(setup_backward, backward), lambda: check(True), TOLERANCE["tiny"])
            self.measure(f"{name} no-grad fwd", size, TINY_ELEMENTS, peer, lambda f=forward_no_grad: (reset(), f()),
                         per_op(reset, forward_no_grad), lambda: check(False), TOLERANCE["tiny"])
        state.clear()

    def tiny_cpu(self):
        self.tiny("cpu", "tiny cpu")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--reps", type=int, default=30, help="timed repetitions per measurement (>= 10)")
    parser.add_argument("--log2", type=int, default=28, help="log2 of chain10's element count (10..29)")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds; later measurements are skipped")
    args = parser.parse_args()
    if args.reps < 10 or not 10 <= args.log2 <= 29:
        parser.error("--reps must be at least 10 and --log2 between 10 and 29")
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = sorted(set(only) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {', '.join(WORKLOADS)}")

    result = {"benchmark": "autograd-peers", "reps": args.reps, "versions": {}, "results": [], "unavailable": {},
              "skipped": [], "ok": True}
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        result["device"] = torch.cuda.get_device_name(0)
        result["versions"]["torch"] = torch.__version__
    except Exception as e:  # noqa: BLE001
        print(f"PyTorch unavailable ({e}); every peer needs it: peers-autograd skipped")
        result["ok"] = False
        result["error"] = str(e)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
        return 1

    runner = Runner(torch, args)
    print(f"device: {result['device']}; versions: {result['versions']}; median of {args.reps}\n", flush=True)

    def save():
        """Writes what has been measured so far: a run stopped from outside keeps it."""
        result["results"] = runner.rows
        result["unavailable"] = runner.unavailable
        result["skipped"] = runner.skipped
        result["ok"] = all(r["ok"] for r in runner.rows)
        write_json(args.json, result)

    for workload in only:
        try:  # set-up failures (memory) cost one workload
            getattr(runner, workload)()
        except Exception as e:  # noqa: BLE001
            runner.unavailable[workload] = f"{type(e).__name__}: {e}"[:300]
            print(f"{workload}: failed ({runner.unavailable[workload]})", flush=True)
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
