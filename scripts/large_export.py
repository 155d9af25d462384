#!/usr/bin/python3
"""Exports a GPT-2-style decoder (tests/fixtures/corpus/modern_models.py)
widened until its weights pass 2 GB, as PyTorch writes such models: the
.onnx graph with every weight in external data files beside it (protobuf
cannot hold 2 GB in one message). For checking that placer inspects and
places multi-GB exports without reading their weights, with and without
the data files (docs/large_exports.md). Not committed: it writes ~2.2 GB.

    /usr/bin/python3 scripts/large_export.py OUT_DIR [--dim 1536 --layers 18]
"""
import argparse
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "fixtures", "corpus"))
import modern_models  # noqa: E402

warnings.filterwarnings("ignore")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument("--layers", type=int, default=18)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(0)
    with torch.no_grad():
        model = modern_models.Gpt2(vocab=args.vocab, dim=args.dim,
                                   heads=args.dim // 64, layers=args.layers,
                                   seq=args.seq).train()
    params = sum(p.numel() for p in model.parameters())
    print(f"{params / 1e6:.0f} M parameters, {params * 4 / 2**30:.2f} GiB",
          flush=True)
    tokens = torch.randint(0, args.vocab, (1, args.seq))
    path = os.path.join(args.out_dir, "gpt2_large.onnx")
    # Over 2 GB torch.onnx writes each weight to a file of its own.
    torch.onnx.export(model, (tokens, tokens), path,
                      input_names=["tokens", "targets"],
                      output_names=["loss"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17)
    data = sum(os.path.getsize(os.path.join(args.out_dir, f))
               for f in os.listdir(args.out_dir) if f != "gpt2_large.onnx")
    print(f"wrote {path} ({os.path.getsize(path)} bytes) and "
          f"{data / 2**30:.2f} GiB of external data in "
          f"{len(os.listdir(args.out_dir)) - 1} files", flush=True)


if __name__ == "__main__":
    main()
