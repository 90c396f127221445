#!/usr/bin/env python3
"""The digits MLP of examples/digits.cpp, trained in PyTorch eager, beside the example itself.

    data       data/digits.csv (scripts/install-deps): 1797 8x8 images, pixels / 16; the first
               80% of a seeded shuffle train, the rest test (the split differs from the
               example's std::mt19937_64 shuffle; the sizes are the same: 1437 and 360)
    model      Linear(64, 128), ReLU, Dropout(0.1), Linear(128, 10); Adam(lr=2e-3); cross-entropy;
               batches of 32, shuffled every epoch; float32 on the GPU
    epoch      the training loop only (as the example's samples/s): per batch zero_grad,
               forward, loss, backward, step, the loss summed on the device; the epoch ends
               with .item() of that sum
    torch eager, DataLoader     torch.utils.data.DataLoader(TensorDataset(x, y), batch_size=32,
                                shuffle=True, pin_memory=True), each batch .to(dev, non_blocking=True):
                                what the example's et::data::DataLoader does (pinned staging,
                                copies without blocking)
    torch eager, GPU-resident   the whole training set on the GPU once, batches by index_select
                                of a torch.randperm: no loader at all (PyTorch's best case)
    etensor    --etensor PATH runs the example (PATH data/digits.csv EPOCHS) and reads its
               per-epoch "samples/s" (its MLP lines)

Reported: the median epoch's milliseconds over --epochs epochs after one warm-up epoch
(the example: the median of its epochs 2..EPOCHS), and test accuracy after the last epoch.

Usage: python3 bench/peers_digits.py [--json PATH] [--epochs N] [--etensor PATH] [--csv PATH]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_SIZE = 1437


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else 0.5 * (values[middle - 1] + values[middle])


def torch_rows(torch, csv_path, epochs):
    import numpy as np
    data = np.loadtxt(csv_path, delimiter=",", dtype=np.float32)
    images, labels = data[:, :64] / 16.0, data[:, 64].astype(np.int64)
    order = np.random.default_rng(7).permutation(len(labels))
    train, test = order[:TRAIN_SIZE], order[TRAIN_SIZE:]
    dev = torch.device("cuda")
    x, y = torch.from_numpy(images[train]), torch.from_numpy(labels[train])
    test_x, test_y = torch.from_numpy(images[test]).to(dev), torch.from_numpy(labels[test]).to(dev)
    rows = []
    for variant in ("DataLoader", "GPU-resident"):
        torch.manual_seed(1)
        nn = torch.nn
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10)).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=2e-3)
        if variant == "DataLoader":
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True,
                                                 pin_memory=True)
            batches = lambda: ((bx.to(dev, non_blocking=True), by.to(dev, non_blocking=True)) for bx, by in loader)  # noqa: E731
        else:
            gx, gy = x.to(dev), y.to(dev)

            def batches():
                perm = torch.randperm(TRAIN_SIZE, device=dev)
                for start in range(0, TRAIN_SIZE, 32):
                    index = perm[start:start + 32]
                    yield gx.index_select(0, index), gy.index_select(0, index)
        times = []
        for epoch in range(1 + epochs):
            model.train()
            torch.cuda.synchronize()
            started = time.perf_counter()
            total = torch.zeros((), device=dev)
            for bx, by in batches():
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(bx), by)
                loss.backward()
                opt.step()
                total += loss.detach()
            total.item()
            if epoch:
                times.append(1e3 * (time.perf_counter() - started))
        model.eval()
        with torch.no_grad():
            accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
        rows.append({"workload": "digits mlp epoch", "peer": f"torch eager, {variant}", "ms": median(times),
                     "accuracy": accuracy})
    return rows


def etensor_row(path, csv_path, epochs):
    out = subprocess.run([path, csv_path, str(1 + epochs)], capture_output=True, text=True, timeout=600)
    print(out.stdout, end="")
    rates = [float(m.group(2)) for m in re.finditer(r"^mlp epoch\s+(\d+).*?([\d.]+) samples/s", out.stdout, re.M)]
    accuracy = [float(m.group(1)) for m in re.finditer(r"^mlp epoch.*test accuracy ([\d.]+)", out.stdout, re.M)]
    if out.returncode != 0 or len(rates) < 2:
        raise RuntimeError(f"{path} exited with {out.returncode} and {len(rates)} MLP epoch lines")
    return {"workload": "digits mlp epoch", "peer": "etensor", "ms": median([1e3 * TRAIN_SIZE / r for r in rates[1:]]),
            "accuracy": accuracy[-1]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--etensor", help="the digits example to run beside PyTorch")
    parser.add_argument("--csv", default=os.path.join(ROOT, "data", "digits.csv"))
    args = parser.parse_args()
    result = {"benchmark": "digits-peers", "epochs": args.epochs, "results": [], "unavailable": {}}
    try:
        import torch
        result["torch"] = torch.__version__
        result["results"] += torch_rows(torch, args.csv, args.epochs)
    except Exception as e:  # noqa: BLE001
        result["unavailable"]["torch"] = f"{type(e).__name__}: {e}"[:300]
    if args.etensor:
        try:
            result["results"].append(etensor_row(args.etensor, args.csv, args.epochs))
        except Exception as e:  # noqa: BLE001
            result["unavailable"]["etensor"] = f"{type(e).__name__}: {e}"[:300]
    ours = next((r["ms"] for r in result["results"] if r["peer"] == "etensor"), None)
    for r in result["results"]:
        speedup = f"   etensor {r['ms'] / ours:.2f}x faster" if ours and r["peer"] != "etensor" else ""
        print(f"{r['workload']:18s} {r['peer']:30s} {r['ms']:8.2f} ms per epoch, test accuracy {r['accuracy']:.3f}"
              f"{speedup}")
    for name, why in result["unavailable"].items():
        print(f"{name}: unavailable: {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
