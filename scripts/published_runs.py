#!/usr/bin/env python3
"""Simulates published LLM training runs in their own configurations and
prints, per row, the predicted tokens/s per GPU beside the published one
(docs/llm.md, "Agreement with published runs").

    python3 scripts/published_runs.py bazel-bin/placer/placer [ROW ...]

Then, for each row with tensor or pipeline parallelism, the same run with
both removed (every GPU a data-parallel replica, the row's ZeRO stage and
recomputation) on the preset itself: whether it fits, and if not what the
simulator says does not.

Each row fixes the run's layout with `place --parallelism tensor --tensor T
--stages P --replicas D` (plus its ZeRO stage, recomputation, precision and
global batch) on the matching cluster preset, so the search only shards ops
inside the tensor groups and cuts the stages. The step time is simulated
twice: on the preset, whose verdict on memory is reported, and on the same
cluster with its memory lifted, so that a row whose predicted peak is over
80 GB still has a predicted step time. Nothing here is tuned to a row: the
presets' achieved rates come from kernel measurements
(scripts/gpu_rates.py), named in profiles/clusters/dgx_h100.pbtxt.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

# How each system runs its kernels and keeps its weights (placer's flags):
# Transformer Engine fuses the elementwise regions; torchtitan's eager
# rows run them op by op; both hold bf16 parameters with fp32 master
# copies and gradients (Megatron's distributed optimizer, FSDP2's mixed
# precision).
TE = ["--elementwise", "fused", "--mixed-precision", "master"]
# NeMo's distributed optimizer (ZeRO-1) gathers the updated parameters in
# the next step's forward (overlap_param_sync).
NEMO_ZERO1 = TE + ["--overlap-param-gather"]
EAGER_FSDP = ["--elementwise", "as-exported", "--mixed-precision", "master"]
# torch.compile, compiling each TransformerBlock, fuses its elementwise
# regions as Transformer Engine does; its Float8 is torchao's (casts in
# kernels of their own; a no-op for the bf16 rows).
COMPILED_FSDP = TE + ["--fp8-recipe", "torchao"]

# name: (source, model, cluster, tensor, stages, replicas, global batch,
#        sequence length, micro batch, precision, zero, recompute,
#        extra flags, published tokens/s per GPU, published peak memory in
#        GiB or None)
ROWS = {
    "gpt3_5b": (
        "NeMo 24.07, DGX-H100, FP8", "zoo:gpt:layers=24,hidden=4096,heads=32,"
        "ffn=16384,seq_len=2048,vocab=50304,batch=4", "dgx_h100:nodes=8",
        1, 1, 64, 2048, 2048, 4, "fp8", "1", "none", NEMO_ZERO1, 22521, None),
    "gpt3_20b": (
        "NeMo 24.07, DGX-H100, FP8", "zoo:gpt:layers=44,hidden=6144,heads=48,"
        "ffn=24576,seq_len=2048,vocab=50304,batch=2", "dgx_h100:nodes=8",
        2, 1, 32, 256, 2048, 2, "fp8", "1", "selective",
        NEMO_ZERO1 + ["--sequence-parallel"], 5851, None),
    "llama2_7b": (
        "NeMo 24.07, DGX-H100, FP8", "zoo:llama2_7b", "dgx_h100", 1, 1, 8, 128,
        4096, 1, "fp8", "1", "none", NEMO_ZERO1, 16847, None),
    "llama3_8b_25.09": (
        "Megatron-Bridge 25.09, DGX-H100, FP8-CS", "zoo:llama3_8b", "dgx_h100",
        1, 1, 8, 128, 8192, 1, "fp8", "3", "none", TE, 14079, None),
    "llama3_8b_25.11": (
        "Megatron-Bridge 25.11, DGX-H100, FP8-CS", "zoo:llama3_8b", "dgx_h100",
        1, 1, 8, 128, 8192, 1, "fp8", "3", "none", TE, 14451, None),
    "titan_8b_8gpu": (
        "torchtitan 2024-12, Grand Teton H100 (500 W), BF16 eager",
        "zoo:llama3_8b:batch=2", "grand_teton_h100", 1, 1, 8, 16, 8192, 2,
        "bf16", "3", "selective-op", EAGER_FSDP, 5762, 82.4),
    "titan_8b_128gpu": (
        "torchtitan 2024-12, Grand Teton H100 (500 W), BF16 eager",
        "zoo:llama3_8b:batch=2", "grand_teton_h100:nodes=16", 1, 1, 128, 256,
        8192, 2, "bf16", "3", "selective-op", EAGER_FSDP, 5605, 67.0),
    "titan_8b_8gpu_compile": (
        "torchtitan 2024-12, Grand Teton H100 (500 W), BF16 compiled",
        "zoo:llama3_8b:batch=2", "grand_teton_h100", 1, 1, 8, 16, 8192, 2,
        "bf16", "3", "selective-op", COMPILED_FSDP, 6667, 77.0),
    "titan_8b_8gpu_fp8": (
        "torchtitan 2024-12, Grand Teton H100 (500 W), Float8 compiled",
        "zoo:llama3_8b:batch=2", "grand_teton_h100", 1, 1, 8, 16, 8192, 2,
        "fp8", "3", "selective-op", COMPILED_FSDP, 8532, 76.8),
    "titan_8b_128gpu_compile": (
        "torchtitan 2024-12, Grand Teton H100 (500 W), BF16 compiled",
        "zoo:llama3_8b:batch=2", "grand_teton_h100:nodes=16", 1, 1, 128, 256,
        8192, 2, "bf16", "3", "selective-op", COMPILED_FSDP, 6514, 62.0),
    "titan_8b_128gpu_fp8": (
        "torchtitan 2024-12, Grand Teton H100 (500 W), Float8 compiled",
        "zoo:llama3_8b:batch=2", "grand_teton_h100:nodes=16", 1, 1, 128, 256,
        8192, 2, "fp8", "3", "selective-op", COMPILED_FSDP, 8380, 61.8),
    "titan_70b_256gpu": (
        "torchtitan 2024-12, Grand Teton H100 (500 W), Float8 compiled",
        "zoo:llama3_70b:batch=16", "grand_teton_h100:nodes=32", 8, 1, 32,
        512, 8192, 16, "fp8", "3", "layers",
        COMPILED_FSDP + ["--sequence-parallel"], 829, 71.9),
}


# Presets whose parts' peaks are not known exactly, and the low end of
# them: torchtitan's 500 W Grand Teton H100s lie between the H100 SXM's
# peaks (the preset's) and the H100 NVL's (NVIDIA's H100 datasheet: 1,671
# TFLOP/s BF16 and FP16, 3,341 FP8, with sparsity; half that dense).
LOW_END = {
    "grand_teton_h100": {"bf16_peak_flops": 8.355e14,
                         "fp16_peak_flops": 8.355e14,
                         "fp8_peak_flops": 1.6705e15},
}


def lifted_cluster(preset, directory, peaks=None):
    """The preset's file with 100x the memory (and `peaks`, a field: value
    dict, in place of its peaks), as a cluster file."""
    base, _, nodes = preset.partition(":nodes=")
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "profiles", "clusters",
                           base + ".pbtxt")) as f:
        text = f.read()
    text = re.sub(r"memory_bytes: (\d+)",
                  lambda m: "memory_bytes: %d" % (int(m.group(1)) * 100), text)
    text = re.sub(r"^nodes: \d+", "nodes: %s" % (nodes or "1"), text,
                  flags=re.M)
    for field, value in (peaks or {}).items():
        text = re.sub(r"\b%s: [0-9.e+]+" % field, "%s: %g" % (field, value),
                      text)
    path = os.path.join(directory, preset.replace(":", "_") +
                        ("_low" if peaks else "") + ".pbtxt")
    with open(path, "w") as f:
        f.write(text)
    return path


def simulate(placer, row, cluster, layout=None):
    (_, model, _, tensor, stages, replicas, batch, _, _, precision, zero,
     recompute, extra, _, _) = row
    if layout is not None:
        tensor, stages, replicas = layout
    command = [placer, "place", model, "--noweights", "--cluster", cluster,
               "--parallelism", "tensor", "--tensor", str(tensor),
               "--stages", str(stages), "--replicas", str(replicas),
               "--global-batch", str(batch), "--precision", precision,
               "--optimizer", "adam", "--attention", "fused", "--zero", zero,
               "--recompute", recompute, "--budget", "600", "--json"] + extra
    started = time.time()
    out = subprocess.run(command, capture_output=True, text=True)
    seconds = time.time() - started
    try:
        result = json.loads(out.stdout)
    except json.JSONDecodeError:
        return None, out.stderr.strip(), seconds, command
    rows = [r for r in result["results"] if r["row"] == "tensor"]
    return (rows[0] if rows else None), out.stderr.strip(), seconds, command


def main():
    placer = sys.argv[1]
    names = sys.argv[2:] or list(ROWS)
    errors = []
    print("| row | source | layout | published tok/s/GPU | predicted | error "
          "| at the low-end peaks | published peak | predicted peak "
          "| fits its GPUs |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as directory:
        for name in names:
            row = ROWS[name]
            (source, model, cluster, tensor, stages, replicas, batch, seq,
             micro, precision, zero, recompute, extra, published,
             published_gib) = row
            fits, fit_error, _, _ = simulate(placer, row, cluster)
            timed, error, seconds, command = simulate(
                placer, row, lifted_cluster(cluster, directory))
            if timed is None or not timed.get("ok"):
                print("| %s | %s | - | %d | failed: %s |" %
                      (name, source, published, error.splitlines()[-1:]))
                continue
            gpus = tensor * stages * replicas
            tokens = batch * seq / timed["step_seconds"] / gpus
            peak = max(timed["peak_memory_bytes"].values())
            relative = tokens / published - 1
            errors.append(abs(relative))
            low_end = "-"
            peaks = LOW_END.get(cluster.partition(":")[0])
            if peaks:
                low, _, _, _ = simulate(
                    placer, row, lifted_cluster(cluster, directory, peaks))
                if low is not None and low.get("ok"):
                    low_tokens = batch * seq / low["step_seconds"] / gpus
                    low_end = "%d (%+.1f%%)" % (
                        low_tokens, 100 * (low_tokens / published - 1))
            layout = "TP%d PP%d DP%d, MBS %d, GBS %d, ZeRO-%s, %s recompute" % (
                tensor, stages, replicas, micro, batch, zero, recompute)
            print("| %s | %s | %s | %d | %d | %+.1f%% | %s | %s | %.1f GiB "
                  "| %s |" %
                  (name, source, layout, published, tokens, 100 * relative,
                   low_end,
                   "-" if published_gib is None else "%.1f GiB" % published_gib,
                   peak / 2**30,
                   "yes" if fits is not None and fits.get("ok") and
                   not fits.get("out_of_memory") else "no"),
                  flush=True)
            print("    %s (%.0f s)" % (" ".join(command[1:]), seconds),
                  file=sys.stderr, flush=True)
    if errors:
        print("\nmedian |error| %.1f%%, largest %.1f%% over %d rows" %
              (100 * statistics.median(errors), 100 * max(errors),
               len(errors)))
    truth = [n for n in names if ROWS[n][3] * ROWS[n][4] > 1]
    if truth:
        print("\nWithout tensor and pipeline parallelism, on the preset:\n")
        print("| row | layout | fits its GPUs | what the simulator says |")
        print("|---|---|---|---|")
    for name in truth:
        row = ROWS[name]
        gpus = row[3] * row[4] * row[5]
        # Every GPU a replica needs a micro-batch of its own: the global
        # batch's share per GPU, when the row's micro batch is larger.
        if row[6] // row[8] < gpus:
            share = "batch=%d" % (row[6] // gpus)
            model = re.sub(r"batch=\d+", share, row[1])
            if model == row[1]:
                model += (":" if ":" not in model[4:] else ",") + share
            row = (row[0], model) + row[2:]
        result, error, _, command = simulate(placer, row, row[2],
                                             (1, 1, gpus))
        said = error.splitlines()[-1] if error else ""
        said = said.replace("placer: error: ", "")
        fits = result is not None and result.get("ok") and \
            not result.get("out_of_memory")
        micro = int(re.search(r"batch=(\d+)", row[1]).group(1)) \
            if "batch=" in row[1] else row[8]
        print("| %s | TP1 PP1 DP%d, MBS %d, ZeRO-%s, %s recompute | %s | %s |"
              % (name, gpus, micro, row[10], row[11], "yes" if fits else "no",
               "" if fits else said), flush=True)
        print("    %s" % " ".join(command[1:]), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
