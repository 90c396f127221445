#!/usr/bin/env python3
"""bench/hpc.cu's statements in PyTorch eager, torch.compile and CuPy, as an HPC user writes
them in Python: NumPy-style slices of one array.

    jacobi-2d             B[1:-1,1:-1] = 0.2 * (A[1:-1,1:-1] + A[1:-1,:-2] + A[1:-1,2:] + A[2:,1:-1] + A[:-2,1:-1])
    jacobi-2d + copy back the same, then A[1:-1,1:-1] = B[1:-1,1:-1]
    conv-2d 9-point       PolyBench 2DCONV's 3x3 convolution
    conv-3d 15-point      PolyBench 3DCONV's 15 terms
    heat-3d (A->B, B->A)  RAJAPerf HEAT_3D's sweep, both ways
    fdtd-2d (ey, ex, hz)  PolyBench fdtd-2d's three updates

Eager writes each statement into the destination's slice (`b[1:-1, 1:-1] = ...`: one kernel per
operation plus the copy into the slice); torch.compile compiles each step function once
(dynamic=False; its first call reported apart); CuPy evaluates the same slice expressions
(one kernel per operation). Minimal traffic and the copy bandwidth as in et_bench_hpc (the
copy measured here with torch's own device-to-device copy of 1 GiB). Each peer's first step
is checked against a float64 evaluation of the same statement on the same inputs.

Usage: python3 bench/peers_hpc.py [--json PATH] [--reps N] [--n2 N] [--n3 N] [--budget SECONDS]
A peer that is missing or fails is reported as unavailable; the others still run.
"""

import argparse
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import median_us, torch_timer, write_json  # noqa: E402

TOLERANCE = 1e-5


def jacobi(x, a, b):
    b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1] + a[:-2, 1:-1])


def jacobi_copy(x, a, b):
    jacobi(x, a, b)
    a[1:-1, 1:-1] = b[1:-1, 1:-1]


def conv2d9(x, a, b):
    b[1:-1, 1:-1] = (0.2 * a[:-2, :-2] + 0.5 * a[1:-1, :-2] - 0.8 * a[2:, :-2] - 0.3 * a[:-2, 1:-1] + 0.6 * a[1:-1, 1:-1]
                     - 0.9 * a[2:, 1:-1] + 0.4 * a[:-2, 2:] + 0.7 * a[1:-1, 2:] + 0.1 * a[2:, 2:])


def conv3d15(x, a, b):
    def at(di, dj, dk):
        n = a.shape[0]
        return a[1 + di:n - 1 + di, 1 + dj:n - 1 + dj, 1 + dk:n - 1 + dk]
    b[1:-1, 1:-1, 1:-1] = (2 * at(-1, -1, -1) + 4 * at(1, -1, -1) + 5 * at(-1, -1, -1) + 7 * at(1, -1, -1)
                           - 8 * at(-1, -1, -1) + 10 * at(1, -1, -1) - 3 * at(0, -1, 0) + 6 * at(0, 0, 0)
                           - 9 * at(0, 1, 0) + 2 * at(-1, -1, 1) + 4 * at(1, -1, 1) + 5 * at(-1, 0, 1)
                           + 7 * at(1, 0, 1) - 8 * at(-1, 1, 1) + 10 * at(1, 1, 1))


def heat_sweep(src, dst):
    n = src.shape[0]

    def at(di, dj, dk):
        return src[1 + di:n - 1 + di, 1 + dj:n - 1 + dj, 1 + dk:n - 1 + dk]
    dst[1:-1, 1:-1, 1:-1] = (0.125 * (at(1, 0, 0) - 2 * at(0, 0, 0) + at(-1, 0, 0))
                             + 0.125 * (at(0, 1, 0) - 2 * at(0, 0, 0) + at(0, -1, 0))
                             + 0.125 * (at(0, 0, 1) - 2 * at(0, 0, 0) + at(0, 0, -1)) + at(0, 0, 0))


def heat3d(x, a, b):
    heat_sweep(a, b)
    heat_sweep(b, a)


def fdtd(x, ex, ey, hz):
    ey[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
    ex[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
    hz[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


def cases(n2, n3):
    """(workload, size, step, shapes of its arrays, minimal bytes)."""
    i2 = (n2 - 2) ** 2 * 4.0
    i3 = (n3 - 2) ** 3 * 4.0
    return [
        ("jacobi-2d", f"{n2}^2", jacobi, [(n2, n2)] * 2, 2 * i2),
        ("jacobi-2d + copy back", f"{n2}^2", jacobi_copy, [(n2, n2)] * 2, 4 * i2),
        ("conv-2d 9-point", f"{n2}^2", conv2d9, [(n2, n2)] * 2, 2 * i2),
        ("conv-3d 15-point", f"{n3}^3", conv3d15, [(n3, n3, n3)] * 2, 2 * i3),
        ("heat-3d (A->B, B->A)", f"{n3}^3", heat3d, [(n3, n3, n3)] * 2, 4 * i3),
        ("fdtd-2d (ey, ex, hz)", f"{n2}^2", fdtd, [(n2, n2)] * 3, 10.0 * n2 * n2 * 4),
    ]


def check(lib, step, arrays, make):
    """The step's first result against the same step in float64 on copies of the inputs."""
    wide = [make(a, True) for a in arrays]
    got = [make(a, False) for a in arrays]
    step(lib, *wide)
    step(lib, *got)
    worst = 0.0
    for g, w in zip(got, wide):
        g64 = g.double() if hasattr(g, "double") else g.astype(lib.float64)
        error = lib.abs(g64 - w) / lib.maximum(lib.abs(w), lib.ones_like(w))
        worst = max(worst, float(error.max()))
    return worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default="")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--n2", type=int, default=8192)
    parser.add_argument("--n3", type=int, default=512)
    parser.add_argument("--budget", type=float, default=600)
    args = parser.parse_args()
    start = time.time()
    result = {"benchmark": "peers_hpc", "rows": [], "unavailable": []}
    try:
        import torch
        result["device"] = torch.cuda.get_device_name(0)
        timer = torch_timer(torch)
        src = torch.rand(1 << 28, device="cuda")
        dst = torch.empty_like(src)
        us = median_us(lambda: dst.copy_(src), warmup=3, reps=args.reps, **timer)
        copy_gbs = 2.0 * src.numel() * 4 / us / 1e3
        result["copy_gbs"] = copy_gbs
        del src, dst
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        result["unavailable"].append("torch")
        write_json(args.json, result) if args.json else None
        return 1
    print(f"device: {result['device']}; copy {copy_gbs:.1f} GB/s")

    def run_peer(peer, lib, make, step, arrays, label):
        ins = [make(a, False) for a in arrays]
        worst = check(lib, step, arrays, make)
        fn = step
        compile_s = None
        if peer == "torch.compile":
            fn = torch.compile(step, dynamic=False)
            t0 = time.time()
            fn(lib, *ins)
            torch.cuda.synchronize()
            compile_s = time.time() - t0
        us = median_us(lambda: fn(lib, *ins), warmup=3, reps=args.reps, **timer)
        return us, worst, compile_s

    for workload, size, step, shapes, nbytes in cases(args.n2, args.n3):
        base = [torch.rand(s, device="cuda", dtype=torch.float32, generator=torch.Generator("cuda").manual_seed(k))
                for k, s in enumerate(shapes)]
        for peer in ("torch eager", "torch.compile", "cupy"):
            if time.time() - start > args.budget:
                result["unavailable"].append(f"{workload} {peer}: past the budget")
                continue
            try:
                if peer == "cupy":
                    import cupy
                    lib = cupy

                    def make(a, wide, cupy=cupy):
                        return cupy.asarray(a.double() if wide else a.clone())
                else:
                    lib = torch

                    def make(a, wide):
                        return a.double() if wide else a.clone()
                us, worst, compile_s = run_peer(peer, lib, make, step, base, workload)
                gbs = nbytes / us / 1e3
                row = {"workload": workload, "size": size, "peer": peer, "us": us, "gbs": gbs,
                       "percent_of_copy": 100.0 * gbs / copy_gbs, "max_error": worst, "ok": worst <= TOLERANCE}
                if compile_s is not None:
                    row["compile_s"] = compile_s
                result["rows"].append(row)
                print(f"{workload:24s} {size:8s} {peer:14s} {us:10.1f} us {gbs:8.1f} GB/s {100 * gbs / copy_gbs:6.1f}%"
                      f"  err {worst:.2e}{'' if worst <= TOLERANCE else '  CHECK FAILED'}")
            except Exception as e:  # noqa: BLE001
                result["unavailable"].append(f"{workload} {peer}: {type(e).__name__}: {e}")
                print(f"{workload} {peer}: unavailable ({type(e).__name__}: {e})")
        del base
        torch.cuda.empty_cache()
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
