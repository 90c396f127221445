#!/usr/bin/env python3
"""The convolutions of bench/conv.cu in PyTorch, side by side with etensor.

conv 3x3, N=32, C=K=128, 56x56, padding 1, stride 1, forward, no bias:
    bf16 nhwc        channels_last bfloat16 tensors
    fp32 nchw tf32   float32, TF32 allowed (PyTorch's default for cuDNN convolutions)
    fp32 nchw ieee   float32, TF32 off
with torch.backends.cudnn.benchmark = True, so PyTorch times cuDNN's candidate engines on
the first call of each configuration and keeps the fastest, as etensor does. Each fp32 row
sets PyTorch's cuDNN TF32 switch to the same value etensor used for that row.

Timing, as in et_bench_conv: the first call (PyTorch's benchmark search) on its own; then
after warm-up, `reps` repetitions of `iters` back-to-back calls between a CUDA event pair,
the median per call. Each output is checked against a float64 convolution of the same
inputs on the GPU.

Usage: python3 bench/peers_conv.py [--json PATH] [--etensor-json PATH] [--reps N] [--iters N]
With --etensor-json (the JSON et_bench_conv wrote) the table shows both and the ratio
PyTorch time / etensor time (1.0 = as fast; the target is >= 0.98).
"""

import argparse
import json
import statistics
import sys
import time

N, C, K, H, W, R, S = 32, 128, 128, 56, 56, 3, 3
FLOPS = 2.0 * N * K * C * R * S * H * W
TARGET = 0.98
# name: (dtype, channels_last, tf32, tolerance of max |got - ref| / max |ref|)
WORKLOADS = {
    "bf16 nhwc": ("bfloat16", True, None, 2e-2),
    "fp32 nchw tf32": ("float32", False, True, 1e-2),
    "fp32 nchw ieee": ("float32", False, False, 1e-5),
}


def set_conv_tf32(torch, enabled):
    """Sets PyTorch's TF32 switch for cuDNN convolutions; returns how it was set."""
    cudnn = torch.backends.cudnn
    try:
        cudnn.allow_tf32 = enabled
        return f"torch.backends.cudnn.allow_tf32 = {enabled}"
    except Exception:  # noqa: BLE001 - newer releases: the per-operation precision API
        cudnn.conv.fp32_precision = "tf32" if enabled else "ieee"
        return f"torch.backends.cudnn.conv.fp32_precision = {cudnn.conv.fp32_precision!r}"


def median_us_per_call(torch, fn, reps, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0 / iters)
    return statistics.median(times)


def run(torch, name, reps, iters):
    dtype_name, channels_last, tf32, tolerance = WORKLOADS[name]
    dtype = getattr(torch, dtype_name)
    setting = set_conv_tf32(torch, bool(tf32)) if tf32 is not None else "-"
    generator = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(N, C, H, W, device="cuda", dtype=dtype, generator=generator)
    w = torch.randn(K, C, R, S, device="cuda", dtype=dtype, generator=generator)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
        w = w.to(memory_format=torch.channels_last)
    conv = torch.nn.functional.conv2d

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    y = conv(x, w, padding=1)  # benchmark mode: times the candidate engines, keeps the fastest
    torch.cuda.synchronize()
    search_ms = (time.perf_counter() - t0) * 1000.0
    us = median_us_per_call(torch, lambda: conv(x, w, padding=1), reps, iters)

    reference = conv(x.double().contiguous(), w.double().contiguous(), padding=1)
    error = float((y.double() - reference).abs().max() / reference.abs().max())
    return {"workload": name, "dtype": dtype_name, "layout": "nhwc" if channels_last else "nchw",
            "tf32": "-" if tf32 is None else ("on" if tf32 else "off"), "tf32_setting": setting,
            "channels_last_output": bool(y.is_contiguous(memory_format=torch.channels_last)),
            "us": us, "tflops": FLOPS / us / 1e6, "search_ms": search_ms, "error": error,
            "tolerance": tolerance, "ok": error <= tolerance}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--etensor-json")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()

    import torch

    torch.backends.cudnn.benchmark = True
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"device {torch.cuda.get_device_name(0)}, cudnn.benchmark = True")
    rows = [run(torch, name, args.reps, args.iters) for name in WORKLOADS]
    for row in rows:
        print(f"  {row['workload']}: {row['tf32_setting']}")

    etensor = {}
    if args.etensor_json:
        try:
            with open(args.etensor_json) as source:
                etensor = {r["workload"]: r for r in json.load(source)["results"]}
        except (OSError, ValueError, KeyError) as error:
            print(f"etensor results unavailable ({error}); PyTorch alone")

    print(f"\nconv 3x3, N={N}, C=K={C}, {H}x{W}, padding 1: {FLOPS / 1e9:.1f} GFLOP per call")
    header = (f"{'workload':<16} {'tf32':>5} | {'etensor us':>10} {'TFLOP/s':>8} | {'torch us':>10} {'TFLOP/s':>8} | "
              f"{'torch/et':>8}  {'>= 0.98':>7} | checks")
    print(header)
    print("-" * len(header))
    for row in rows:
        et = etensor.get(row["workload"])
        if et:
            ratio = row["us"] / et["us"]
            row["etensor_us"] = et["us"]
            row["torch_over_etensor"] = ratio
            checks = f"et {'ok' if et['ok'] else 'WRONG'}, torch {'ok' if row['ok'] else 'WRONG'}"
            print(f"{row['workload']:<16} {row['tf32']:>5} | {et['us']:10.1f} {et['tflops']:8.1f} | {row['us']:10.1f} "
                  f"{row['tflops']:8.1f} | {ratio:8.3f}  {'yes' if ratio >= TARGET else 'NO':>7} | {checks}")
        else:
            print(f"{row['workload']:<16} {row['tf32']:>5} | {'-':>10} {'-':>8} | {row['us']:10.1f} {row['tflops']:8.1f} | "
                  f"{'-':>8}  {'-':>7} | torch {'ok' if row['ok'] else 'WRONG'}")
    print("first call (search): " + ", ".join(
        f"{r['workload']}: torch {r['search_ms']:.0f} ms" +
        (f", etensor {etensor[r['workload']]['search_ms']:.0f} ms" if r["workload"] in etensor else "") for r in rows))

    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "flops": FLOPS, "target": TARGET, "results": rows,
                       "etensor": list(etensor.values())}, out, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
