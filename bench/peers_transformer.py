#!/usr/bin/env python3
"""bench/transformer.cu's layer normalizations in PyTorch eager and torch.compile, on the same
rows (GPT-2 small's 768 values; 4096 and 32768 rows; float32 and bfloat16 activations with
float32 weight and bias, as autocast leaves LayerNorm's parameters):

    layer_norm           F.layer_norm(x, (768,), w, b)
    add_layer_norm       h = x + r; F.layer_norm(h, ...)      (two kernels eager; fused by compile)
    layer_norm backward  torch.ops.aten.native_layer_norm_backward from the saved mean and rstd

Timing as etensor's: an event pair around every repetition, after warm-up, the median. The
forward is checked against float64 on the first 64 rows.

Usage: python3 bench/peers_transformer.py [--json PATH] [--reps N] [--budget SECONDS]
A peer that is missing or fails is reported as unavailable; the others still run.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import median_us, torch_timer, write_json  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--budget", type=float, default=300)
    args = parser.parse_args()
    result = {"benchmark": "peers-transformer", "rows": [], "unavailable": []}
    start = time.time()
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        result["unavailable"].append(f"torch: {e}")
        if args.json:
            write_json(args.json, result)
        return 1
    timer = torch_timer(torch)
    for rows in (4096, 32768):
        for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            size = f"{rows}x768 {name}"
            g = torch.Generator("cuda").manual_seed(1)
            x = torch.randn(rows, 768, device="cuda", generator=g).to(dtype)
            r = torch.randn(rows, 768, device="cuda", generator=g).to(dtype)
            dy = torch.randn(rows, 768, device="cuda", generator=g).to(dtype)
            w = 1 + 0.1 * torch.randn(768, device="cuda", generator=g)
            b = 0.1 * torch.randn(768, device="cuda", generator=g)

            def ln(x, w, b):
                return F.layer_norm(x, (768,), w.to(x.dtype) if x.dtype != torch.float32 else w,
                                    b.to(x.dtype) if x.dtype != torch.float32 else b)

            def add_ln(x, r, w, b):
                h = x + r
                return h, ln(h, w, b)

            for peer in ("torch eager", "torch.compile"):
                if time.time() - start > args.budget:
                    result["unavailable"].append(f"{size} {peer}: past the budget")
                    continue
                try:
                    f_ln = torch.compile(ln, dynamic=False) if peer == "torch.compile" else ln
                    f_add = torch.compile(add_ln, dynamic=False) if peer == "torch.compile" else add_ln
                    with torch.no_grad():
                        y = f_ln(x, w, b)
                        want = F.layer_norm(x[:64].double(), (768,), w.double(), b.double())
                        error = (y[:64].double() - want).abs().max().item()
                        t_ln = median_us(lambda: f_ln(x, w, b), warmup=3, reps=args.reps, **timer)
                        f_add(x, r, w, b)
                        t_add = median_us(lambda: f_add(x, r, w, b), warmup=3, reps=args.reps, **timer)
                    rows_out = [("layer_norm", t_ln), ("add_layer_norm", t_add)]
                    if peer == "torch eager":
                        wt, bt = w.to(dtype), b.to(dtype)
                        _, mean, rstd = torch.ops.aten.native_layer_norm(x, (768,), wt, bt, 1e-5)
                        mask = [True, True, True]
                        t_bwd = median_us(lambda: torch.ops.aten.native_layer_norm_backward(
                            dy, x, (768,), mean, rstd, wt, bt, mask), warmup=3, reps=args.reps, **timer)
                        rows_out.append(("layer_norm backward", t_bwd))
                    for workload, us in rows_out:
                        result["rows"].append({"workload": workload, "size": size, "peer": peer, "us": us,
                                               "max_error": error, "ok": error <= (4e-2 if name == "bf16" else 1e-4)})
                        print(f"{workload:22s} {size:16s} {peer:14s} {us:10.1f} us  err {error:.2e}")
                except Exception as e:  # noqa: BLE001
                    result["unavailable"].append(f"{size} {peer}: {type(e).__name__}: {e}")
                    print(f"{size} {peer}: unavailable ({type(e).__name__}: {e})")
            del x, r, dy
            torch.cuda.empty_cache()
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
