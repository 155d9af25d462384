#!/usr/bin/env python3
"""A plain PyTorch training loop of ResNet-50 on one GPU, the baseline that
placer's executor's steps are held against (docs/runtime.md, "On a GPU:
queued against a plain training loop").

    python3 scripts/gpu_loop_baseline.py --batch 32 --steps 20

torchvision's ResNet-50 (v1.5, as zoo:resnet50 builds it: 224 x 224
images, 1,000 classes, cross-entropy), fp32 with PyTorch's default TF32
settings (cuDNN's convolutions on TF32, matrix products not: LibTorch's
defaults too), torch.optim.SGD with momentum 0.9 as placer's default
optimizer, one step a batch. A step is timed on the host from its start
to a device synchronize after the update, as placer's executor times its
steps; the median of --steps after --warmup. Prints one JSON line.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(1)
    model = torchvision.models.resnet50().cuda().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(args.batch, 3, args.image_size, args.image_size,
                         device="cuda")
    labels = torch.randint(0, 1000, (args.batch,), device="cuda")
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
            losses.append(loss.item())
    print(json.dumps({"model": "torchvision resnet50", "batch": args.batch,
                      "image_size": args.image_size,
                      "step_seconds": statistics.median(times),
                      "min_seconds": min(times), "max_seconds": max(times),
                      "steps": args.steps, "torch": torch.__version__,
                      "device": torch.cuda.get_device_name(0),
                      "last_loss": losses[-1]}))


if __name__ == "__main__":
    main()
