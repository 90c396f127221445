#!/usr/bin/env python3
"""FCN-S seconds per mini-batch (bench/fcn.cu) in PyTorch: eager and torch.compile on the GPU,
eager on the CPU at each thread count.

    model      nn.Sequential(Linear(26752, 2048), Sigmoid, Linear(2048, 2048), Sigmoid,
               Linear(2048, 2048), Sigmoid, Linear(2048, 26752)), float32
    a step     opt.zero_grad(set_to_none=True); F.cross_entropy(model(x), labels).backward();
               opt.step() with torch.optim.SGD(lr=0.01) (its default foreach implementation);
               x [64, 26752] normal, labels uniform, made once on the device
    gpu fp32   TF32 off; gpu tf32: TF32 on (bench/peers_gemm.py's set_tf32)
    compile    torch.compile of the forward and the loss (dynamic=False; the backward is
               compiled with it by AOTAutograd, the optimizer step stays eager); its first call,
               the compilation, is reported separately
    cpu N      torch.set_num_threads(N), eager (thread counts above the machine's cores skipped)

Timing as et_bench_fcn: GPU, a CUDA event pair around every step after 3 warm-up steps, median;
CPU, perf_counter around every step (ending with loss.item()), median after one warm-up step.
Check: the GPU fp32 losses of 3 steps are the CPU's (relative 1e-3) and go down.

Usage: python3 bench/peers_fcn.py [--json PATH] [--reps N] [--cpu-reps N] [--threads 1,2,4,8,16]
                                  [--budget SECONDS]
"""

import argparse
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import finish, import_torch, median_us, torch_timer, write_json  # noqa: E402
from peers_gemm import set_tf32  # noqa: E402

INPUT, HIDDEN, OUTPUT, BATCH = 26752, 2048, 26752, 64


def fcn_s(torch):
    """FCN-S itself (peers_table7.py's 16-bit rows use it too)."""
    nn = torch.nn
    return nn.Sequential(nn.Linear(INPUT, HIDDEN), nn.Sigmoid(), nn.Linear(HIDDEN, HIDDEN), nn.Sigmoid(),
                         nn.Linear(HIDDEN, HIDDEN), nn.Sigmoid(), nn.Linear(HIDDEN, OUTPUT))


def make(torch, device):
    torch.manual_seed(1)
    model = fcn_s(torch).to(device)
    x = torch.randn(BATCH, INPUT).to(device)  # made on the CPU: the same data on every device
    labels = torch.randint(0, OUTPUT, (BATCH,)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, x, labels, opt


def stepper(torch, model, x, labels, opt, compiled, clip=0.0):
    loss_of = lambda a, b: torch.nn.functional.cross_entropy(model(a), b)  # noqa: E731
    if compiled:
        loss_of = torch.compile(loss_of, dynamic=False)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_of(x, labels)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--cpu-reps", type=int, default=3)
    parser.add_argument("--threads", default="1,2,4,8,16")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds; later measurements are skipped")
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget
    result = {"benchmark": "fcn-peers", "results": [], "unavailable": {}, "skipped": [], "versions": {}}

    def save():
        write_json(args.json, result)

    torch = import_torch(result, "peers-fcn")
    if torch is None:
        save()
        return 0

    def add(workload, peer, us, ok=True, note=""):
        result["results"].append({"workload": workload, "size": "batch 64", "peer": peer, "us": us, "ok": ok,
                                  "note": note})
        print(f"{workload:28s} {peer:14s} {us / 1e3:10.3f} ms{'' if ok else '   CHECK FAILED'} {note}", flush=True)
        save()

    gpu = torch.cuda.is_available()
    ok = True
    if gpu:
        try:  # the check: 3 fp32 steps on the GPU against the CPU
            set_tf32(torch, False)
            losses = {}
            for device in ("cpu", "cuda"):
                step = stepper(torch, *make(torch, device), compiled=False)
                losses[device] = [step().item() for _ in range(3)]
            ok = all(abs(g - c) <= 1e-3 * abs(c) for g, c in zip(losses["cuda"], losses["cpu"])) and \
                losses["cuda"][2] < losses["cuda"][0]
            print(f"losses of 3 steps: cpu {losses['cpu']}, gpu {losses['cuda']}: {'ok' if ok else 'WRONG'}")
        except Exception as e:  # noqa: BLE001
            result["unavailable"]["check"] = f"{type(e).__name__}: {e}"[:300]
            traceback.print_exc()
        timer = torch_timer(torch)
        for workload, tf32 in (("gpu fp32", False), ("gpu tf32", True)):
            for peer, compiled in (("torch eager", False), ("torch.compile", True)):
                if time.monotonic() > deadline:
                    result["skipped"].append(f"{workload} {peer}")
                    continue
                try:
                    set_tf32(torch, tf32)
                    step = stepper(torch, *make(torch, "cuda"), compiled=compiled)
                    note = ""
                    if compiled:
                        started = time.perf_counter()
                        step()
                        torch.cuda.synchronize()
                        note = f"first call (compilation) {time.perf_counter() - started:.1f} s"
                    add(workload, peer, median_us(step, warmup=3, reps=args.reps, **timer), ok, note)
                except Exception as e:  # noqa: BLE001
                    result["unavailable"][f"{workload} {peer}"] = f"{type(e).__name__}: {e}"[:300]
                    print(f"{workload} {peer}: unavailable ({e})", flush=True)
        set_tf32(torch, False)
    cores = os.cpu_count() or 1
    for threads in (int(t) for t in args.threads.split(",")):
        workload = f"cpu {threads} thread{'s' if threads > 1 else ''}"
        if threads > cores:
            print(f"{workload}: skipped ({cores} cores)")
            continue
        if time.monotonic() > deadline:
            result["skipped"].append(f"{workload} torch eager")
            continue
        torch.set_num_threads(threads)
        step = stepper(torch, *make(torch, "cpu"), compiled=False)
        times = []
        for k in range(1 + args.cpu_reps):
            started = time.perf_counter()
            step().item()
            if k:
                times.append(1e6 * (time.perf_counter() - started))
        times.sort()
        add(workload, "torch eager", times[len(times) // 2], ok)
    torch.set_num_threads(cores)
    return finish(args.json, result, args.budget)


if __name__ == "__main__":
    sys.exit(main())
