"""The copies of bench/copies.cu in PyTorch: the same sizes, timed the same way.

    h2d pageable   cpu_tensor.to("cuda")                             256 MiB
    h2d pinned     pinned_tensor.to("cuda", non_blocking=True)       256 MiB
    d2h pageable   gpu_tensor.to("cpu")                              256 MiB
    d2h pinned     gpu_tensor.to("cpu", non_blocking=True), then a read (PyTorch makes the
                   destination pinned; the read only sees the data after a synchronize)
    peer           gpu0_tensor.to("cuda:1")                           1 GiB (two GPUs only)

Each time is host time from the call until the data is usable (torch.cuda.synchronize()),
median of --reps after two warm-ups. Usage: python3 bench/peers_copies.py [--json PATH] [--reps N]
"""
import argparse
import json
import statistics
import time


def host_median_us(fn, reps):
    times = []
    for r in range(reps + 2):
        start = time.perf_counter()
        fn()
        if r >= 2:
            times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    import torch

    rows = []

    def measure(workload, size, fn, check):
        us = host_median_us(fn, args.reps)
        ok = bool(check())
        rows.append({"workload": workload, "size": size, "peer": "torch eager", "us": us, "ok": ok})
        print(f"{workload:<14} {size:<9} torch eager {us:12.1f} us  {'ok' if ok else 'WRONG'}", flush=True)

    n = 64 << 20  # 256 MiB of floats
    host = torch.rand(n)
    pinned = host.pin_memory()
    gpu = host.to("cuda")
    out = {}

    def sync(value):
        torch.cuda.synchronize()
        return value

    measure("h2d pageable", "256 MiB", lambda: out.__setitem__("g", sync(host.to("cuda"))),
            lambda: torch.equal(out["g"][-1:].cpu(), host[-1:]))
    measure("h2d pinned", "256 MiB", lambda: out.__setitem__("g", sync(pinned.to("cuda", non_blocking=True))),
            lambda: torch.equal(out["g"][-1:].cpu(), host[-1:]))
    measure("d2h pageable", "256 MiB", lambda: out.__setitem__("h", float(gpu.to("cpu")[-1])),
            lambda: out["h"] == float(host[-1]))
    measure("d2h pinned", "256 MiB",
            lambda: out.__setitem__("h", float(sync(gpu.to("cpu", non_blocking=True))[-1])),
            lambda: out["h"] == float(host[-1]))
    if torch.cuda.device_count() >= 2:
        a = torch.rand(256 << 20, device="cuda:0")
        measure("peer", "1024 MiB", lambda: out.__setitem__("p", sync(a.to("cuda:1"))),
                lambda: torch.equal(out["p"][-1:].to("cuda:0"), a[-1:]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "peers-copies", "device": torch.cuda.get_device_name(0),
                       "torch": torch.__version__, "peers": rows}, f, indent=1)


if __name__ == "__main__":
    main()
