#!/usr/bin/env python3
"""Seconds per mini-batch of Shi et al.'s Table 7 networks in PyTorch's CPU build, beside
bench/table7_cpu.cpp: the same networks (peers_table7.networks, FCN-S from peers_fcn), the
same batches (ResNet-56 at 128), the same step (zero_grad(set_to_none=True), cross_entropy,
backward, torch.optim.SGD with each network's options, the LSTM clipped to 5), at each thread
count (torch.set_num_threads). Eager: torch.compile on the CPU is not Table 7's question.

Timing as et_bench_table7_cpu: time.perf_counter around every step after one warm-up step
(ending with loss.item()), median of --reps.

Usage: python3 bench/peers_table7_cpu.py [--json PATH] [--reps N] [--threads 1,2,4,8,16] [--only NAMES] [--budget S]
"""

import argparse
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import finish, import_torch, write_json  # noqa: E402
from peers_fcn import stepper  # noqa: E402
from peers_table7 import networks  # noqa: E402

# The CPU columns' batches: ResNet-56 at 128 only, ResNet-50 at 16 (the table's sizes).
CPU_SIZES = {"resnet-56": (128, 3, 32, 32), "resnet-50": (16, 3, 224, 224)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--threads", default="1,2,4,8,16")
    parser.add_argument("--only", default="", help="comma-separated: fcn-s,fcn-r,alexnet-r,resnet-56,alexnet-s,resnet-50,lstm")
    parser.add_argument("--budget", type=float, default=400.0, help="seconds; later measurements are skipped")
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget
    result = {"benchmark": "table7-cpu-peers", "results": [], "unavailable": {}, "skipped": [], "versions": {}}

    def save():
        write_json(args.json, result)

    torch = import_torch(result, "peers-table7-cpu")
    if torch is None:
        save()
        return 0
    result["versions"]["torch_parallel"] = torch.__config__.parallel_info().splitlines()[0:3]
    wanted = set(filter(None, args.only.split(",")))
    cores = os.cpu_count() or 1
    seen = set()
    for key, name, make, shape, classes, options in networks(torch):
        if (wanted and key not in wanted) or (key in CPU_SIZES and shape != CPU_SIZES[key]) or key in seen:
            continue
        seen.add(key)
        size = f"batch {shape[1] if key == 'lstm' else shape[0]}"
        for threads in (int(t) for t in args.threads.split(",")):
            label = f"{name} cpu {threads}t"
            if threads > cores:
                print(f"{label}: skipped ({cores} cores)")
                continue
            if time.monotonic() > deadline:
                result["skipped"].append(label)
                continue
            try:
                torch.set_num_threads(threads)
                torch.manual_seed(1)
                model = make()
                if key == "lstm":
                    x = torch.randint(0, classes, shape)
                    labels = torch.randint(0, classes, (shape[0] * shape[1],))
                else:
                    x = torch.randn(*shape)
                    labels = torch.randint(0, classes, (shape[0],))
                opt = torch.optim.SGD(model.parameters(), **options)
                step = stepper(torch, model, x, labels, opt, compiled=False, clip=5.0 if key == "lstm" else 0.0)
                first = step().item()
                times = []
                for _ in range(args.reps):
                    started = time.perf_counter()
                    step().item()
                    times.append(1e6 * (time.perf_counter() - started))
                times.sort()
                us = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2])
                result["results"].append({"workload": label, "size": size, "peer": "torch eager", "threads": threads,
                                          "us": us, "first_loss": first})
                print(f"{name:10s} {size:10s} {threads:2d} threads torch eager {us / 1e3:10.1f} ms   first loss {first:.5f}",
                      flush=True)
                save()
            except Exception as e:  # noqa: BLE001
                result["unavailable"][label] = f"{type(e).__name__}: {e}"[:300]
                print(f"{label}: unavailable ({e})", flush=True)
                traceback.print_exc()
    torch.set_num_threads(cores)
    return finish(args.json, result, args.budget)


if __name__ == "__main__":
    sys.exit(main())
