#!/usr/bin/env python3
"""The chain of bench/elementwise.cu in PyTorch eager, torch.compile and CuPy.

    z = tanh(x * 0.5f + y) * sigmoid(w) + exp(-abs(x)) * 0.25f - sqrt(square(y) + 1.0f) / (1.0f + relu(w))

17 operations over 3 float32 inputs and 1 float32 output (16 bytes per element), at the
same sizes as et_bench_elementwise (2^10, 2^16, 2^20, 2^24, 2^28). Each peer is timed like
etensor: a CUDA event pair around every repetition, repetitions back to back, after
warm-up, median reported. Every peer's output is checked against a float64 evaluation of
the chain on the same inputs, so a wrong kernel cannot pass as a fast one.

A peer that is missing or fails is reported as unavailable; the others still run.

Usage: python3 bench/peers.py [--json PATH] [--etensor-json PATH] [--reps N] [--sizes 10,16,20,24,28]
With --etensor-json (the JSON et_bench_elementwise wrote), etensor's figures appear in the
same table, so the ratios are read side by side.
"""

import argparse
import json
import math
import os
import sys
import traceback

CHAIN = "z = tanh(x * 0.5f + y) * sigmoid(w) + exp(-abs(x)) * 0.25f - sqrt(square(y) + 1.0f) / (1.0f + relu(w))"
OPS = 17
BYTES_PER_ELEMENT = 16  # 3 float32 inputs read + 1 float32 output written
TOLERANCE = 1e-5  # max |got - want| / max(|want|, 1)

CUPY_SOURCE = r"""
const float sigmoid_w = 1.0f / (1.0f + expf(-w));
const float relu_w = w < 0.0f ? 0.0f : w;
z = tanhf(x * 0.5f + y) * sigmoid_w + expf(-fabsf(x)) * 0.25f - sqrtf(y * y + 1.0f) / (1.0f + relu_w);
"""


def chain_torch(torch, x, y, w):
    return (torch.tanh(x * 0.5 + y) * torch.sigmoid(w) + torch.exp(-torch.abs(x)) * 0.25
            - torch.sqrt(torch.square(y) + 1.0) / (1.0 + torch.relu(w)))


def median_us(run, record_start, record_end, elapsed_ms, synchronize, warmup, reps):
    """Median microseconds of `reps` back-to-back runs, each between its own event pair."""
    for _ in range(warmup):
        run()
    synchronize()
    pairs = []
    for _ in range(reps):
        start = record_start()
        run()
        pairs.append((start, record_end()))
    synchronize()
    times = sorted(1000.0 * elapsed_ms(start, end) for start, end in pairs)
    middle = len(times) // 2
    return times[middle] if len(times) % 2 else 0.5 * (times[middle - 1] + times[middle])


def max_error(torch, got, want):
    """(max |got - want| / max(|want|, 1), number of non-finite results) on the GPU."""
    got = got.double()
    finite = torch.isfinite(got)
    non_finite = int((~finite).sum().item())
    diff = (got - want).abs() / torch.clamp(want.abs(), min=1.0)
    diff = torch.where(finite, diff, torch.zeros_like(diff))
    return float(diff.max().item()) if got.numel() else 0.0, non_finite


def write_json(path, result):
    """Writes `result` to `path` (nothing without a path) through a .part file renamed into
    place, so that a run stopped from outside leaves the last complete file."""
    if path:
        with open(path + ".part", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(path + ".part", path)


def finish(path, result, budget):
    """The end of a budgeted peer script: names what the budget left out, writes the JSON;
    returns the exit status (0: what could not run is recorded, not a failure)."""
    if result["skipped"]:
        print(f"skipped past the {budget:.0f} s budget: {', '.join(result['skipped'])}")
    write_json(path, result)
    if path:
        print(f"wrote {path}")
    return 0


def import_torch(result, script, cuda=False):
    """PyTorch (with a GPU, if `cuda`), its version noted in result["versions"]; or None,
    why noted in result["unavailable"] and printed: the script then skips its peers."""
    try:
        import torch
        result["versions"]["torch"] = torch.__version__
        if cuda and not torch.cuda.is_available():
            raise RuntimeError("no CUDA device")
        return torch
    except Exception as e:  # noqa: BLE001
        result["unavailable"]["torch"] = f"{type(e).__name__}: {e}"[:300]
        print(f"PyTorch{' with CUDA' if cuda else ''} unavailable ({e}): {script} skipped")
        return None


def torch_timer(torch):
    def record():
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
    return dict(record_start=record, record_end=record,
                elapsed_ms=lambda start, end: start.elapsed_time(end),
                synchronize=torch.cuda.synchronize)


def bench_torch(torch, inputs, reps, compiled):
    """PyTorch eager (one kernel per operation) or torch.compile (Inductor fuses the chain)."""
    x, y, w = inputs
    if compiled:
        import torch._dynamo
        config = torch._dynamo.config
        # One static-shape compilation per size (five sizes), so the kernels are the
        # ones Inductor would pick for a fixed shape.
        for limit in ("recompile_limit", "cache_size_limit"):
            if hasattr(config, limit):
                setattr(config, limit, max(getattr(config, limit), 64))
        fn = torch.compile(lambda a, b, c: chain_torch(torch, a, b, c), dynamic=False)
    else:
        fn = lambda a, b, c: chain_torch(torch, a, b, c)  # noqa: E731
    z = fn(x, y, w)
    us = median_us(lambda: fn(x, y, w), warmup=3, reps=reps, **torch_timer(torch))
    return us, z


def bench_cupy(torch, inputs, reps):
    """CuPy ElementwiseKernel: the chain as one hand-written CUDA expression."""
    import cupy
    kernel = cupy.ElementwiseKernel("float32 x, float32 y, float32 w", "float32 z", CUPY_SOURCE, "et_peer_chain")
    x, y, w = (cupy.from_dlpack(t) for t in inputs)
    z = cupy.empty_like(x)
    stream = cupy.cuda.Stream.null

    def record():
        event = cupy.cuda.Event()
        event.record(stream)
        return event

    run = lambda: kernel(x, y, w, z)  # noqa: E731
    run()
    stream.synchronize()
    us = median_us(run, record_start=record, record_end=record,
                   elapsed_ms=lambda start, end: cupy.cuda.get_elapsed_time(start, end),
                   synchronize=stream.synchronize, warmup=3, reps=reps)
    return us, torch.from_dlpack(z)


def load_etensor(path):
    if not path:
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
        return {r["elements"]: r for r in data.get("results", [])}
    except Exception as e:  # a missing etensor run must not stop the peers
        print(f"note: cannot read etensor results from {path}: {e}")
        return {}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--etensor-json", help="et_bench_elementwise's JSON, shown beside the peers")
    parser.add_argument("--reps", type=int, default=50, help="timed repetitions per measurement (>= 20)")
    parser.add_argument("--sizes", default="10,16,20,24,28", help="log2 of the element counts")
    args = parser.parse_args()
    if args.reps < 20:
        parser.error("--reps must be at least 20")
    sizes = [1 << int(s) for s in args.sizes.split(",")]

    result = {"benchmark": "elementwise-peers", "chain": CHAIN, "ops": OPS, "bytes_per_element": BYTES_PER_ELEMENT,
              "reps": args.reps, "peers": {}, "versions": {}, "ok": True}
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        result["device"] = torch.cuda.get_device_name(0)
        result["versions"]["torch"] = torch.__version__
    except Exception as e:
        print(f"PyTorch unavailable ({e}); every peer needs it for inputs and checks")
        result["ok"] = False
        result["error"] = str(e)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
        return 1
    try:
        import cupy
        result["versions"]["cupy"] = cupy.__version__
    except Exception:
        pass

    peers = {
        "torch eager": lambda inputs: bench_torch(torch, inputs, args.reps, compiled=False),
        "torch.compile": lambda inputs: bench_torch(torch, inputs, args.reps, compiled=True),
        "cupy ElementwiseKernel": lambda inputs: bench_cupy(torch, inputs, args.reps),
    }
    etensor = load_etensor(args.etensor_json)
    generator = torch.Generator(device="cuda").manual_seed(2026)
    rows = []
    unavailable = {}
    for n in sizes:
        inputs = [torch.randn(n, device="cuda", dtype=torch.float32, generator=generator) for _ in range(3)]
        want = chain_torch(torch, *(t.double() for t in inputs))
        for name, bench in peers.items():
            if name in unavailable:
                continue
            try:
                us, z = bench(inputs)
                error, non_finite = max_error(torch, z, want)
                ok = non_finite == 0 and error <= TOLERANCE
                result["ok"] = result["ok"] and ok
                gbps = BYTES_PER_ELEMENT * n / (us * 1e-6) / 1e9
                row = {"peer": name, "elements": n, "us": us, "GBps": gbps, "max_error": error,
                       "non_finite": non_finite, "ok": ok}
                et = etensor.get(n)
                if et:
                    row["etensor_us"] = et["etensor_us"]
                    row["etensor_over_peer"] = us / et["etensor_us"]  # > 1: etensor is faster
                rows.append(row)
                result["peers"].setdefault(name, []).append(row)
            except Exception as e:
                unavailable[name] = f"{type(e).__name__}: {e}"
                print(f"{name}: unavailable ({unavailable[name]})")
                traceback.print_exc(file=sys.stdout)
        del inputs, want
        torch.cuda.empty_cache()

    print(f"\nchain: {CHAIN}\n{OPS} operations, {BYTES_PER_ELEMENT} bytes per element; median of {args.reps}")
    if "device" in result:
        print(f"device: {result['device']}; versions: {result['versions']}\n")
    header = f"{'peer':<24} {'elements':>11} {'us':>10} {'GB/s':>9} {'max error':>10} {'etensor us':>11} {'peer/etensor time':>18}"
    print(header)
    for r in sorted(rows, key=lambda r: (r["elements"], r["peer"])):
        et_us = f"{r['etensor_us']:.2f}" if "etensor_us" in r else "-"
        ratio = f"{r['etensor_over_peer']:.2f}" if "etensor_over_peer" in r else "-"
        flag = "" if r["ok"] else "  MISMATCH"
        print(f"{r['peer']:<24} {r['elements']:>11} {r['us']:>10.2f} {r['GBps']:>9.1f} {r['max_error']:>10.2e} "
              f"{et_us:>11} {ratio:>18}{flag}")
    for name, why in unavailable.items():
        print(f"{name:<24} unavailable: {why}")
    result["unavailable"] = unavailable
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {args.json}")
    # Unavailable peers are reported, not failures; a wrong result is.
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
