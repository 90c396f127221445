#!/usr/bin/env python3
"""The workloads of bench/gemm.cu in PyTorch, printed side by side with etensor's figures.

    gemm-fp32         C = A @ B, 8192^3, float32, TF32 off (torch.backends.cuda.matmul: ieee)
    gemm-tf32         the same with TF32 allowed
    gemm-bf16         bfloat16 A, B and C
    linear-bias-relu  relu(linear(x, w, b)), bfloat16, x [8192, 4096], w [4096, 4096], b [4096]:
                      PyTorch eager and torch.compile

Timed like et_bench_gemm: a CUDA event pair around every repetition, after one second of warm-up, median
reported as TFLOP/s (2*M*N*K). The GEMMs write into a preallocated tensor (torch.mm(...,
out=c)), as etensor's do; the linear layer is written the way a model writes it. Each
result is checked on 256 sampled elements against float64 dot products of the same inputs.

With --etensor-json (what et_bench_gemm --json wrote), the table shows etensor beside the
peers with the ratio etensor TFLOP/s / peer TFLOP/s (> 1: etensor is faster) and the
targets (GEMMs >= 0.98x PyTorch eager, the fused linear layer >= 1.05x). --json may name
the same file: it then holds etensor's figures, the peers' and the ratios together.

Usage: python3 bench/peers_gemm.py [--etensor-json PATH] [--json PATH] [--reps N] [--size N]
Exit status 1 if PyTorch is missing or a result is wrong (not for a missed target).
"""

import argparse
import json
import sys
import time
import traceback

WARMUP_S = 1.0  # seconds of warm-up before timing, as et_bench_gemm
TARGETS = {"gemm-fp32": 0.98, "gemm-tf32": 0.98, "gemm-bf16": 0.98, "linear-bias-relu": 1.05}
TOLERANCE = {"gemm-fp32": 5e-5, "gemm-tf32": 3e-3, "gemm-bf16": 1e-2, "linear-bias-relu": 1e-2}


def median_us(torch, run, warmup_s, reps):
    """Median of `reps` event-timed runs after `warmup_s` seconds of the same work (as
    et_bench_gemm: a large GEMM lowers the GPU's clocks within a second of starting)."""
    start = time.perf_counter()
    while True:
        for _ in range(4):
            run()
        torch.cuda.synchronize()
        if time.perf_counter() - start >= warmup_s:
            break
    pairs = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    times = sorted(1000.0 * s.elapsed_time(e) for s, e in pairs)
    mid = len(times) // 2
    return times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])


def set_tf32(torch, allowed):
    """TF32 for float32 matmuls on or off, with whichever API this PyTorch has."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32" if allowed else "ieee"
        return f"torch.backends.cuda.matmul.fp32_precision = {'tf32' if allowed else 'ieee'!r}"
    matmul.allow_tf32 = allowed
    return f"torch.backends.cuda.matmul.allow_tf32 = {allowed}"


def sampled_error(torch, a, b_kn, c, bias=None, relu=False):
    """Largest |c_ij - f(sum_k a_ik b_kj + bias_j)| / sum_k |a_ik b_kj| over 256 sampled elements."""
    g = torch.Generator(device="cpu").manual_seed(7)
    rows = torch.randint(0, a.shape[0], (256,), generator=g).to(a.device)
    cols = torch.randint(0, b_kn.shape[1], (256,), generator=g).to(a.device)
    terms = a[rows].double() * b_kn[:, cols].t().double()
    want = terms.sum(1)
    scale = terms.abs().sum(1)
    if bias is not None:
        want = want + bias[cols].double()
        scale = scale + bias[cols].double().abs()
    if relu:
        want = torch.clamp(want, min=0.0)
    got = c[rows, cols].double()
    error = ((got - want).abs() / scale.clamp(min=1e-30))
    error = torch.where(torch.isfinite(got), error, torch.full_like(error, float("inf")))
    return float(error.max().item())


def bench_gemm(torch, name, dtype, tf32, size, reps):
    setting = set_tf32(torch, tf32)
    g = torch.Generator(device="cuda").manual_seed(2026)
    a = torch.randn(size, size, device="cuda", dtype=torch.float32, generator=g).to(dtype)
    b = torch.randn(size, size, device="cuda", dtype=torch.float32, generator=g).to(dtype)
    c = torch.empty(size, size, device="cuda", dtype=dtype)
    us = median_us(torch, lambda: torch.mm(a, b, out=c), WARMUP_S, reps)
    error = sampled_error(torch, a, b, c)
    set_tf32(torch, False)
    return {"workload": name, "peer": "torch eager", "us": us, "tflops": 2.0 * size**3 / (us * 1e-6) / 1e12,
            "max_error": error, "ok": error <= TOLERANCE[name], "setting": setting}


def bench_linear(torch, batch, features, reps, compiled):
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(2027)
    x = torch.randn(batch, features, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(features, features, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(features, device="cuda", generator=g).to(torch.bfloat16)

    def layer(x, w, b):
        return F.relu(F.linear(x, w, b))

    fn = torch.compile(layer, dynamic=False) if compiled else layer
    y = fn(x, w, b)
    us = median_us(torch, lambda: fn(x, w, b), WARMUP_S, reps)
    y = fn(x, w, b)
    error = sampled_error(torch, x, w.t(), y, bias=b, relu=True)
    return {"workload": "linear-bias-relu", "peer": "torch.compile" if compiled else "torch eager", "us": us,
            "tflops": 2.0 * batch * features * features / (us * 1e-6) / 1e12, "max_error": error,
            "ok": error <= TOLERANCE["linear-bias-relu"]}


def load_etensor(path):
    if not path:
        return None
    try:
        with open(path) as f:
            data = json.load(f)
        return data.get("etensor", data)  # a file this script wrote keeps etensor's figures under "etensor"
    except Exception as e:  # a missing etensor run must not stop the peers
        print(f"note: cannot read etensor results from {path}: {e}")
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results (and etensor's, with --etensor-json) here")
    parser.add_argument("--etensor-json", help="et_bench_gemm's JSON, shown beside the peers")
    parser.add_argument("--reps", type=int, default=30, help="timed repetitions per measurement (>= 5)")
    parser.add_argument("--size", type=int, default=8192, help="GEMM size; the linear layer uses size x size/2")
    args = parser.parse_args()
    if args.reps < 5:
        parser.error("--reps must be at least 5")
    etensor = load_etensor(args.etensor_json)
    result = {"benchmark": "gemm-peers", "size": args.size, "reps": args.reps, "versions": {}, "peers": [],
              "unavailable": {}, "ok": True}
    if etensor:
        result["etensor"] = etensor
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        result["device"] = torch.cuda.get_device_name(0)
        result["versions"]["torch"] = torch.__version__
        result["versions"]["cuda"] = torch.version.cuda
    except Exception as e:
        print(f"PyTorch unavailable ({e})")
        result["ok"] = False
        result["error"] = str(e)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
        return 1

    runs = [
        ("gemm-fp32 torch eager", lambda: bench_gemm(torch, "gemm-fp32", torch.float32, False, args.size, args.reps)),
        ("gemm-tf32 torch eager", lambda: bench_gemm(torch, "gemm-tf32", torch.float32, True, args.size, args.reps)),
        ("gemm-bf16 torch eager", lambda: bench_gemm(torch, "gemm-bf16", torch.bfloat16, False, args.size, args.reps)),
        ("linear torch eager", lambda: bench_linear(torch, args.size, args.size // 2, args.reps, compiled=False)),
        ("linear torch.compile", lambda: bench_linear(torch, args.size, args.size // 2, args.reps, compiled=True)),
    ]
    for name, run in runs:
        try:
            row = run()
            result["peers"].append(row)
            result["ok"] = result["ok"] and row["ok"]
        except Exception as e:
            result["unavailable"][name] = f"{type(e).__name__}: {e}"
            print(f"{name}: unavailable ({result['unavailable'][name]})")
            traceback.print_exc(file=sys.stdout)
        torch.cuda.empty_cache()

    ours = {r["workload"]: r for r in (etensor or {}).get("results", [])}
    table = []
    print(f"\nGEMM on {result['device']}, median of {args.reps}; ratio = etensor TFLOP/s / peer TFLOP/s")
    print(f"{'workload':<18} {'etensor':>9} {'eager':>9} {'et/eager':>9} {'compile':>9} {'et/compile':>10}  target")
    for workload, target in TARGETS.items():
        et = ours.get(workload)
        eager = next((p for p in result["peers"] if p["workload"] == workload and p["peer"] == "torch eager"), None)
        compiled = next((p for p in result["peers"] if p["workload"] == workload and p["peer"] == "torch.compile"), None)
        row = {"workload": workload, "target": target}
        cells = []
        for label, entry in (("etensor", et), ("eager", eager), ("compile", compiled)):
            row[f"{label}_tflops"] = entry["tflops"] if entry else None
        row["et_over_eager"] = et["tflops"] / eager["tflops"] if et and eager else None
        row["et_over_compile"] = et["tflops"] / compiled["tflops"] if et and compiled else None
        row["meets_target"] = row["et_over_eager"] is not None and row["et_over_eager"] >= target
        for value, width, digits in ((row["etensor_tflops"], 9, 1), (row["eager_tflops"], 9, 1),
                                     (row["et_over_eager"], 9, 3), (row["compile_tflops"], 9, 1),
                                     (row["et_over_compile"], 10, 3)):
            cells.append(f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}")
        verdict = "met" if row["meets_target"] else ("BELOW" if row["et_over_eager"] is not None else "n/a")
        checks = "" if (not et or et.get("ok", False)) and (not eager or eager["ok"]) else "  WRONG RESULT"
        print(f"{workload:<18} {' '.join(cells)}  >= {target:.2f}x {verdict}{checks}")
        table.append(row)
    result["table"] = table
    result["targets_met"] = all(r["meets_target"] for r in table)
    for peer in result["peers"]:
        if "setting" in peer:
            print(f"  {peer['workload']}: {peer['setting']}, max error {peer['max_error']:.2e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
