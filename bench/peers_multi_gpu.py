#!/usr/bin/env python3
"""bench/multi_gpu.cu's workloads in PyTorch, for scripts/bench-all's table (peer "torch eager"):

    dataparallel   FCN-S on cuda:0 alone (64 rows), then torch.nn.DataParallel of it over every
                   GPU seen, 64 rows per GPU, fp32
                   (TF32 off), SGD(lr=0.01); the model on cuda:0, as et::nn::DataParallel's
    ddp            a process per GPU (torch.multiprocessing, NCCL, TCP rendezvous on
                   127.0.0.1): torch.distributed.all_reduce of 1, 16 and 256 MB of floats, and
                   FCN-S in DistributedDataParallel (default 25 MB buckets), 64 rows per rank

Timing as et_bench_multi_gpu: CUDA events on cuda:0 (each rank's GPU) around every step after
3 warm-up steps, median. Sizes are named as the C++ rows are ("2 GPU x 64 rows", "16 MB, 2 ranks").

Usage: python3 bench/peers_multi_gpu.py [--json PATH] [--reps N]
"""

import argparse
import json
import os
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import median_us, torch_timer, write_json  # noqa: E402
from peers_fcn import make  # noqa: E402
from peers_gemm import set_tf32  # noqa: E402


def fcn_step(torch, model, x, labels, opt):
    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        return loss
    return step


def dataparallel(torch, reps, add):
    n = torch.cuda.device_count()
    model, x, labels, _ = make(torch, "cuda:0")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)  # the one-GPU step the scalings divide
    add("fcn-s fp32 step, 1 GPU", "64 rows", median_us(fcn_step(torch, model, x, labels, opt), warmup=3, reps=reps,
                                                       **torch_timer(torch)))
    x, labels = x.repeat(n, 1), labels.repeat(n)
    dp = torch.nn.DataParallel(model, device_ids=list(range(n)))
    opt = torch.optim.SGD(dp.parameters(), lr=0.01)
    us = median_us(fcn_step(torch, dp, x, labels, opt), warmup=3, reps=reps, **torch_timer(torch))
    add("fcn-s fp32 DataParallel", f"{n} GPU x 64 rows", us)


def rank_main(rank, n, port, reps, out_path):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    set_tf32(torch, False)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    group = f"{n} rank" + ("s" if n > 1 else "")
    rows = []
    timer = torch_timer(torch)
    for mb in (1, 16, 256):
        t = torch.ones(mb * 1024 * 1024 // 4, device=f"cuda:{rank}")
        us = median_us(lambda: dist.all_reduce(t), warmup=5, reps=reps, **timer)
        for workload in ("all_reduce, shapes checked", "all_reduce, check_shapes=false"):
            rows.append({"workload": workload, "size": f"{mb} MB, {group}", "peer": "torch eager", "us": us})
    model, x, labels, _ = make(torch, f"cuda:{rank}")
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    us = median_us(fcn_step(torch, ddp, x, labels, opt), warmup=3, reps=reps, **timer)
    rows.append({"workload": "fcn-s fp32 DDP", "size": f"{group} x 64 rows", "peer": "torch eager", "us": us})
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def ddp(torch, reps, add):
    import torch.multiprocessing as mp
    n = torch.cuda.device_count()
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "rows.json")
        mp.spawn(rank_main, args=(n, 29531, reps, out), nprocs=n, join=True)
        with open(out) as f:
            for row in json.load(f):
                add(row["workload"], row["size"], row["us"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    result = {"benchmark": "multi-gpu-peers", "results": [], "unavailable": {}}

    def save():
        write_json(args.json, result)

    def add(workload, size, us):
        result["results"].append({"workload": workload, "size": size, "peer": "torch eager", "us": us, "ok": True})
        print(f"{workload:34s} {size:22s} torch eager {us:10.1f} us", flush=True)

    try:
        import torch
        set_tf32(torch, False)
        result["versions"] = {"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
    except Exception as e:  # noqa: BLE001
        print(f"PyTorch unavailable ({e}): peers-multi-gpu skipped")
        result["unavailable"]["torch"] = str(e)
        save()
        return 0
    for name, run in (("dataparallel", dataparallel), ("ddp", ddp)):
        try:
            run(torch, args.reps, add)
        except Exception as e:  # noqa: BLE001
            result["unavailable"][name] = f"{type(e).__name__}: {e}"[:300]
            traceback.print_exc()
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
