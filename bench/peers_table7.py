#!/usr/bin/env python3
"""Seconds per mini-batch of Shi et al.'s Table 7 networks (bench/table7.cu) in PyTorch on one
GPU: eager, torch.compile, and the eager step captured in a CUDA graph.

    networks   FCN-S (batch 64; bf16 and f16 only: peers_fcn.py has its fp32 rows), FCN-R
               (batch 1024), AlexNet-R (1024), ResNet-56 (128 and 1024), AlexNet-S (16),
               ResNet-50 (16; also 64 in bf16), the LSTM (Embedding, 2 layers of 256 on cuDNN,
               Linear to 10000; token ids [32, 128], clip_grad_norm_ to 5 before the step), defined here as
               examples/table7.hpp and table7_imagenet.hpp define them (ResNet-50 is
               torchvision's resnet50, written out so that torchvision is not needed);
               fp32: float32, cuDNN's convolutions with TF32 allowed, matmul without (both
               libraries' defaults), the LSTM without (etensor's default; PyTorch's would
               allow it); tf32: TF32 allowed everywhere (allow_tf32 for matmul and cuDNN), the
               rows named "... tf32" (eager and graph; torch.compile in fp32 and bf16 only,
               whose compilations take most of the budget); bf16 and f16: torch.autocast to
               that type around the forward and the loss, f16 with torch.amp.GradScaler (whose
               step() reads the overflow flag on the host: its graph capture fails, which is
               reported as unavailable), the rows "... bf16" and "... f16"
    a step     opt.zero_grad(); F.cross_entropy(model(x), labels).backward(); opt.step() with
               torch.optim.SGD (its default foreach implementation), x normal and labels
               uniform, made once on the device
    compile    torch.compile of the forward and the loss (dynamic=False; AOTAutograd compiles
               the backward with it, the optimizer step stays eager); its first call is the
               compilation, reported as a note
    graph      the eager step captured with torch.cuda.graph after warm-up steps on a side
               stream (PyTorch's "whole network capture"), replayed

Timing as et_bench_table7: a CUDA event pair around every step after 3 warm-up steps, median.

Usage: python3 bench/peers_table7.py [--json PATH] [--reps N] [--only NAMES] [--budget SECONDS]
"""

import argparse
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import finish, import_torch, median_us, torch_timer, write_json  # noqa: E402
from peers_fcn import fcn_s, stepper  # noqa: E402


def networks(torch):
    nn = torch.nn

    def fcn_r():
        model = nn.Sequential(nn.Linear(784, 2048), nn.Sigmoid(), nn.Linear(2048, 4096), nn.Sigmoid(),
                              nn.Linear(4096, 1024), nn.Sigmoid(), nn.Linear(1024, 10))
        for m in model:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        return model

    def alexnet_r():
        return nn.Sequential(nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(3, 2), nn.ReLU(),
                             nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
                             nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2),
                             nn.Flatten(), nn.Linear(576, 10))

    class BasicBlock(nn.Module):
        def __init__(self, inp, out, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(out)
            self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(out)
            self.stride, self.extra = stride, out - inp

        def forward(self, x):
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            s = x
            if self.stride != 1 or self.extra:
                half = self.extra // 2
                s = nn.functional.pad(x[:, :, ::self.stride, ::self.stride], (0, 0, 0, 0, half, self.extra - half))
            return torch.relu(y + s)

    class ResNet56(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            layers, inp = [], 16
            for width in (16, 32, 64):
                blocks = []
                for b in range(9):
                    blocks.append(BasicBlock(inp, width, 2 if b == 0 and width != 16 else 1))
                    inp = width
                layers.append(nn.Sequential(*blocks))
            self.layer1, self.layer2, self.layer3 = layers
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            h = self.layer3(self.layer2(self.layer1(torch.relu(self.bn1(self.conv1(x))))))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))

    def alexnet_s():
        return nn.Sequential(nn.Conv2d(3, 96, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
                             nn.Conv2d(96, 256, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
                             nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(), nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2), nn.Flatten(),
                             nn.Linear(9216, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))

    class Bottleneck(nn.Module):
        def __init__(self, inp, width, stride):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(inp, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, 4 * width, 1, bias=False), nn.BatchNorm2d(4 * width)
            self.downsample = None
            if stride != 1 or inp != 4 * width:
                self.downsample = nn.Sequential(nn.Conv2d(inp, 4 * width, 1, stride, bias=False),
                                                nn.BatchNorm2d(4 * width))

        def forward(self, x):
            h = torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))
            return torch.relu(self.bn3(self.conv3(h)) + (x if self.downsample is None else self.downsample(x)))

    class ResNet50(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            layers, inp = [], 64
            for blocks, width, stride in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
                stage = []
                for b in range(blocks):
                    stage.append(Bottleneck(inp, width, stride if b == 0 else 1))
                    inp = 4 * width
                layers.append(nn.Sequential(*stage))
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x):
            h = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
            h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))

    class LstmLm(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(10000, 256)
            self.lstm = nn.LSTM(256, 256, num_layers=2)
            self.decoder = nn.Linear(256, 10000)

        def forward(self, tokens):
            y, _ = self.lstm(self.embedding(tokens))
            return self.decoder(y.reshape(-1, 256))

    sgd = lambda lr, momentum=0.0, wd=0.0: dict(lr=lr, momentum=momentum, weight_decay=wd)  # noqa: E731
    return [
        ("fcn-s", "FCN-S", lambda: fcn_s(torch), (64, 26752), 26752, sgd(0.01)),  # bf16 and f16 only
        ("fcn-r", "FCN-R", fcn_r, (1024, 784), 10, sgd(0.01)),
        ("alexnet-r", "AlexNet-R", alexnet_r, (1024, 3, 32, 32), 10, sgd(0.01, 0.9)),
        ("resnet-56", "ResNet-56", ResNet56, (128, 3, 32, 32), 10, sgd(0.01, 0.9, 1e-4)),
        ("resnet-56", "ResNet-56", ResNet56, (1024, 3, 32, 32), 10, sgd(0.01, 0.9, 1e-4)),
        ("alexnet-s", "AlexNet-S", alexnet_s, (16, 3, 224, 224), 1000, sgd(0.01, 0.9)),
        ("resnet-50", "ResNet-50", ResNet50, (16, 3, 224, 224), 1000, sgd(0.01, 0.9, 1e-4)),
        ("resnet-50", "ResNet-50", ResNet50, (64, 3, 224, 224), 1000, sgd(0.01, 0.9, 1e-4)),  # bf16 only
        ("lstm", "LSTM", LstmLm, (32, 128), 10000, sgd(0.01)),  # token ids [steps, batch]
    ]


def amp_stepper(torch, model, x, labels, opt, compiled, clip, dtype):
    """stepper's step under torch.autocast(dtype), with a GradScaler for float16."""
    scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)

    def loss_of(a, b):
        with torch.autocast("cuda", dtype=dtype):
            return torch.nn.functional.cross_entropy(model(a), b)
    if compiled:
        loss_of = torch.compile(loss_of, dynamic=False)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_of(x, labels)
        scaler.scale(loss).backward()
        if clip > 0:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(opt)
        scaler.update()
        return loss
    return step


def steps(torch, make, shape, classes, options, mode, tokens=False, precision="fp32"):
    """The step function of one mode (eager, compile, graph), after its warm-up. `tokens`:
    the LSTM, whose input is token ids [steps, batch] and whose labels are every step's."""
    torch.manual_seed(1)
    model = make().cuda()
    if tokens:
        x = torch.randint(0, classes, shape, device="cuda")
        labels = torch.randint(0, classes, (shape[0] * shape[1],), device="cuda")
    else:
        x = torch.randn(*shape, device="cuda")
        labels = torch.randint(0, classes, (shape[0],), device="cuda")
    opt = torch.optim.SGD(model.parameters(), **options)
    clip = 5.0 if tokens else 0.0
    if precision in ("bf16", "f16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        step = amp_stepper(torch, model, x, labels, opt, mode == "compile", clip, dtype)
    else:
        step = stepper(torch, model, x, labels, opt, compiled=mode == "compile", clip=clip)
    if mode != "graph":
        return step
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()  # its zero_grad(set_to_none=True) first: the gradients are then the graph's memory
    return graph.replay


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated: fcn-s,fcn-r,alexnet-r,resnet-56,alexnet-s,resnet-50,lstm")
    parser.add_argument("--modes", default="eager,graph,compile")
    parser.add_argument("--precisions", default="fp32,tf32")
    parser.add_argument("--budget", type=float, default=400.0, help="seconds; later measurements are skipped")
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget
    result = {"benchmark": "table7-peers", "results": [], "unavailable": {}, "skipped": [], "versions": {}}

    def save():
        write_json(args.json, result)

    torch = import_torch(result, "peers-table7", cuda=True)
    if torch is None:
        save()
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = False
    timer = torch_timer(torch)
    wanted = set(filter(None, args.only.split(",")))
    # Every network's eager and graph steps, in both precisions, before any compilation
    # (torch.compile takes a minute or more per network): what the budget leaves out is
    # compilations.
    modes = args.modes.split(",")
    precisions = args.precisions.split(",")
    runs = [(p, m) for p in precisions for m in modes if m != "compile" and (p, m) != ("f16", "graph")]
    runs += [(p, "compile") for p in ("fp32", "bf16") if "compile" in modes and p in precisions]
    # Last: capturing a float16 step, whose GradScaler.step() calls .item(), fails, and the
    # failed capture leaves PyTorch unable to capture or compile again in this process
    # ("Offset increment outside graph capture"): one attempt, the others reported with it.
    runs += [("f16", "graph")] if "graph" in modes and "f16" in precisions else []
    f16_capture_failure = None
    for precision, mode in runs:
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        suffix = "" if precision == "fp32" else f" {precision}"
        for key, name, make, shape, classes, options in networks(torch):
            if wanted and key not in wanted:
                continue
            size = f"batch {shape[1] if key == 'lstm' else shape[0]}"
            if key == "resnet-50" and shape[0] == 64 and precision != "bf16":
                continue  # the compute-bound case, for bfloat16 (as et_bench_table7)
            if key == "fcn-s" and precision not in ("bf16", "f16"):
                continue  # its fp32 and tf32 rows are peers_fcn.py's
            label = f"{name} {size} {mode}{suffix}"
            if time.monotonic() > deadline:
                result["skipped"].append(label)
                continue
            if (precision, mode) == ("f16", "graph") and f16_capture_failure:
                result["unavailable"][label] = f16_capture_failure
                continue
            try:
                started = time.perf_counter()
                # fp32: the LSTM in float32 arithmetic like etensor's (PyTorch's cuDNN RNN would
                # take TF32 where convolutions may); its decoder's GEMM is float32 in both anyway.
                torch.backends.cudnn.allow_tf32 = tf32 or key != "lstm"
                step = steps(torch, make, shape, classes, options, mode, tokens=key == "lstm", precision=precision)
                step()
                torch.cuda.synchronize()
                note = f"first call (compilation) {time.perf_counter() - started:.1f} s" if mode == "compile" else ""
                us = median_us(step, warmup=3, reps=args.reps, **timer)
                # Beside etensor's eager row: torch eager and torch.compile; beside its graph row: torch graph.
                result["results"].append({"workload": f"{name} {'graph' if mode == 'graph' else 'eager'}{suffix}",
                                          "size": size, "peer": {"compile": "torch.compile"}.get(mode, f"torch {mode}"),
                                          "us": us, "note": note})
                print(f"{name:10s} {size:11s} torch {mode:8s} {precision} {us / 1e3:9.3f} ms {note}", flush=True)
                save()
            except Exception as e:  # noqa: BLE001
                result["unavailable"][label] = f"{type(e).__name__}: {e}"[:300]
                if (precision, mode) == ("f16", "graph"):
                    f16_capture_failure = f"not tried: the capture of {name} failed ({result['unavailable'][label]})"
                print(f"{label}: unavailable ({e})", flush=True)
                traceback.print_exc()
            torch.cuda.empty_cache()
    return finish(args.json, result, args.budget)


if __name__ == "__main__":
    sys.exit(main())
