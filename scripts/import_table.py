#!/usr/bin/env python3
"""Writes docs/import.md: every model of the real-world corpus
(tests/fixtures/corpus/MANIFEST.tsv) through `placer inspect --json`, with
its node count, ops without a cost, forward FLOPs, training/forward ratio,
ops the executor cannot run, import time and the process's peak RSS.

    bazel build //placer && python3 scripts/import_table.py > docs/import.md
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fixtures", "corpus")
PLACER = os.path.join(ROOT, "bazel-bin", "placer", "placer")


def inspect(path, shapes):
    proc = subprocess.Popen(
        [PLACER, "inspect", path, "--input-shape", shapes, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        return None, out.decode().strip(), usage.ru_maxrss
    return json.loads(out), None, usage.ru_maxrss


def main():
    rows = []
    with open(os.path.join(CORPUS, "MANIFEST.tsv")) as f:
        for line in f.read().splitlines()[1:]:
            rows.append(line.split("\t"))
    print("# Importing what PyTorch exports\n")
    print("What this guide is for: which PyTorch exports placer imports, "
          "costs and runs, how to export a model so that they do, and the "
          "corpus table that checks it on every file.\n")
    print("Every model of the corpus (`tests/fixtures/corpus`, made by "
          "`export_corpus.py` there with Debian's torch 1.13 / torchvision "
          "0.14: training and eval mode, opsets 13 and 17, weights stripped "
          "to their dims; the model families of today from "
          "`modern_models.py` there — a Llama-style decoder (RMSNorm, RoPE, "
          "grouped-query attention, SwiGLU), its top-2 mixture-of-experts "
          "variant, a GPT-2-style decoder, a diffusion UNet (GroupNorm, "
          "Resize, ConvTranspose) and a BERT encoder with an int64 "
          "attention mask and token types, each with its loss in the graph "
          "— at opsets 14 and 17) through `placer inspect --json`. "
          "Produced by\n\n"
          "    bazel build //placer && "
          "python3 scripts/import_table.py > docs/import.md\n\n"
          "on this project's 2-core machine. FLOPs are per batch at the "
          "input shape given (batch 1 for the CNNs); *nodes* are the file's "
          "(placer keeps as ops those it does not fold to constants: "
          "`placer inspect` prints both); *train/fwd* is the "
          "training step's FLOPs over the forward pass's; *not runnable* "
          "counts ops without a LibTorch kernel; *RSS* is the inspect "
          "process's peak resident memory. `tests/graph/corpus_test.cc` "
          "asserts every row (imports, no unknown op, every op runnable, "
          "ratio in (2, 3.2)) and checks ten torchvision models' "
          "contraction MACs against torchvision's published GFLOPS within "
          "2%. The models of today also train under `placer run` "
          "(`tests/placer/cli_run_test.cc`) and match PyTorch's loss and every "
          "parameter's gradient in float64 on one and two devices "
          "(`tests/runtime/torch_numerics_test.cc`). Not in the table: "
          "`llama_repeat_interleave.*.onnx`, the Llama-style decoder with "
          "its k/v heads repeated by `repeat_interleave`: torch.onnx 1.13 "
          "writes that, after `torch.outer` lost it the static shape, as a "
          "Reshape whose 0s copy the wrong dims, so the file does not "
          "compute the model's shapes; placer refuses it naming that "
          "Reshape (`tests/graph/onnx_import_test.cc`).\n")
    print("| file | input | nodes | unknown ops | forward GFLOPs | "
          "train/fwd | not runnable | import ms | RSS MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    failures = 0
    for name, shapes, nodes in rows:
        report, error, rss_kb = inspect(os.path.join(CORPUS, name), shapes)
        if report is None:
            failures += 1
            print(f"| {name} | {shapes} | {nodes} | FAILED: {error} |||||")
            continue
        print("| {} | {} | {} | {} | {:.3f} | {:.2f} | {} | {:.1f} | {:.0f} |"
              .format(name, shapes,
                      int(report["nodes"]) + int(report["folded_nodes"]),
                      len(report["unknown_ops"]),
                      report["forward_flops"] / 1e9,
                      report["training_flops"] / report["forward_flops"],
                      len(report.get("unsupported_by_executor", [])),
                      report["import_seconds"] * 1e3, rss_kb / 1024))
    print(f"\n{len(rows) - failures} of {len(rows)} files import.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
