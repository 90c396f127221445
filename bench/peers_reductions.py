"""The reductions of bench/reductions.cu in the peers: PyTorch eager, torch.compile, CuPy.

Same sizes and bytes as et_bench_reductions; CUDA-event medians after warm-up.
Usage: python3 bench/peers_reductions.py [--json PATH] [--reps N]
"""
import argparse
import json
import statistics


def median_us(fn, reps, torch):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    import torch

    n, side = 1 << 28, 16384
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    m = torch.randn(side, side, device="cuda")
    workloads = {
        "sum((x-y)^2) 2^28": (lambda a, b: ((a - b) * (a - b)).sum(), (x, y), 2 * 4 * n),
        "row sums 16384^2": (lambda a: a.sum(1), (m,), 4 * side * side),
        "column sums 16384^2": (lambda a: a.sum(0), (m,), 4 * side * side),
    }
    results = {}
    peers = {"torch eager": lambda f: f}
    try:
        peers["torch.compile"] = lambda f: torch.compile(f, dynamic=False)
    except Exception as error:  # noqa: BLE001 - report, do not fail the run
        print(f"torch.compile unavailable: {error}")
    for peer, wrap in peers.items():
        for name, (fn, inputs, nbytes) in workloads.items():
            try:
                compiled = wrap(fn)
                us = median_us(lambda: compiled(*inputs), args.reps, torch)
                results.setdefault(peer, []).append({"workload": name, "us": us, "GBps": nbytes / us / 1e3})
            except Exception as error:  # noqa: BLE001
                results.setdefault(peer, []).append({"workload": name, "error": str(error)[:200]})
    try:
        import cupy

        cx, cy, cm = cupy.asarray(x), cupy.asarray(y), cupy.asarray(m)
        cupy_fns = {
            "sum((x-y)^2) 2^28": (lambda: cupy.sum((cx - cy) * (cx - cy)), 2 * 4 * n),
            "row sums 16384^2": (lambda: cm.sum(1), 4 * side * side),
            "column sums 16384^2": (lambda: cm.sum(0), 4 * side * side),
        }
        for name, (fn, nbytes) in cupy_fns.items():
            us = median_us(fn, args.reps, torch)
            results.setdefault("cupy", []).append({"workload": name, "us": us, "GBps": nbytes / us / 1e3})
    except Exception as error:  # noqa: BLE001
        print(f"cupy unavailable: {error}")

    print(f"{'peer':<16} {'workload':<22} {'us':>10} {'GB/s':>10}")
    for peer, rows in results.items():
        for row in rows:
            if "us" in row:
                print(f"{peer:<16} {row['workload']:<22} {row['us']:10.1f} {row['GBps']:10.1f}")
            else:
                print(f"{peer:<16} {row['workload']:<22} failed: {row['error']}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": torch.cuda.get_device_name(0), "peers": results}, out, indent=1)


if __name__ == "__main__":
    main()
