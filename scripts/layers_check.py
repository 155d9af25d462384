#!/usr/bin/env python3
"""Sets placer's simulated decoder layer beside the layers
scripts/gpu_layers.py timed on a GPU (docs/llm.md, "torchtitan's layers
on one GPU"), configuration by configuration.

    python3 scripts/layers_check.py bazel-bin/placer/placer MEASURED.json [...]

For each configuration measured (compiled or eager, recomputation,
precision) placer simulates zoo:llama3_8b with 2 and 4 layers at local
batch 2 x 8,192 tokens on one GPU of the measured kind and takes a
layer's time as half the difference (the embedding, output layer, loss
and update cancel):
  compiled -> --elementwise fused, eager -> --elementwise as-exported;
  selective-op, full -> --recompute selective-op, layers;
  float8 -> --precision fp8 --fp8-recipe torchao;
always --mixed-precision master (bf16 parameters, as the script's layers)
and --attention fused. The GPU is dgx_h100's (profiles/clusters/
dgx_h100.pbtxt, its measured achieved fractions); an H200 is the same
chip with 4.8 TB/s and 141 GB of HBM3e (NVIDIA's datasheet), and nothing
else is changed. One replica per GPU of a two-GPU copy whose link is made
instant, since strategies (and so recomputation) need two devices: each
replica runs the layer alone, as the measurement did. Several MEASURED
files (runs) are shown side by side.

A second table sets the measured peak memory above the step's start
(parameters, input and its gradient held before it) beside placer's peak
of the same four layers less what it holds from the start: activations,
gradients and workspace at the peak (`peak_breakdown`), with a vocabulary
of 8 so that the embedding and output layer, which the measurement does
not have, hold next to nothing.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PRESET = os.path.join(HERE, "..", "profiles", "clusters", "dgx_h100.pbtxt")
RECOMPUTE = {"none": "none", "selective-op": "selective-op", "full": "layers"}
PRECISION = {"bf16": "bf16", "float8": "fp8"}


def two_gpu_cluster(device_name, directory):
    lines = open(PRESET).read().splitlines()
    gpu = next(l for l in lines if l.startswith('devices { name: "/gpu:0"'))
    if "H200" in device_name:
        gpu = gpu.replace("memory_bandwidth: 3.35e12",
                          "memory_bandwidth: 4.8e12")
        gpu = gpu.replace("memory_bytes: 85899345920",
                          "memory_bytes: 150754820096")
    elif "H100" not in device_name:
        sys.exit(f"layers_check: no preset for the device '{device_name}'")
    path = os.path.join(directory, "two_gpus.pbtxt")
    with open(path, "w") as f:
        f.write('name: "two_gpus"\n')
        f.write(gpu + "\n" + gpu.replace('"/gpu:0"', '"/gpu:1"') + "\n")
        f.write("default_link { latency_seconds: 0 bandwidth: 4.5e15 }\n")
    return path


def simulate(placer, cluster, layers, row, vocab=None):
    """The simulated step's seconds and its first GPU's peak breakdown."""
    model = f"zoo:llama3_8b:layers={layers},batch=2"
    if vocab is not None:
        model += f",vocab={vocab}"
    command = [
        placer, "place", model,
        "--noweights", "--cluster", cluster, "--parallelism", "tensor",
        "--tensor", "1", "--stages", "1", "--replicas", "2",
        "--global-batch", "4", "--zero", "0", "--optimizer", "sgd",
        "--attention", "fused", "--mixed-precision", "master",
        "--precision", PRECISION[row["precision"]],
        "--elementwise", "fused" if row["compiled"] else "as-exported",
        "--recompute", RECOMPUTE[row["recompute"]], "--fp8-recipe",
        "torchao", "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    result = next(r for r in json.loads(out.stdout)["results"]
                  if r["row"] == "tensor")
    return result["step_seconds"], result["peak_breakdown"]["/gpu:0"]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    placer, files = sys.argv[1], sys.argv[2:]
    runs = [json.load(open(f)) for f in files]
    with tempfile.TemporaryDirectory() as directory:
        cluster = two_gpu_cluster(runs[0]["device"], directory)
        print(f"| configuration | measured ms a layer ({len(runs)} runs) "
              "| simulated | error | measured / eager bf16 | simulated / "
              "eager bf16 |")
        print("|---|---:|---:|---:|---:|---:|")
        simulated_base = measured_base = None
        for index, row in enumerate(runs[0]["rows"]):
            measured = [run["rows"][index]["layer_seconds"] for run in runs]
            t2 = simulate(placer, cluster, 2, row)[0]
            t4 = simulate(placer, cluster, 4, row)[0]
            simulated = (t4 - t2) / 2
            mean = sum(measured) / len(measured)
            if (not row["compiled"] and row["recompute"] == "none" and
                    row["precision"] == "bf16"):
                simulated_base, measured_base = simulated, mean
            name = ", ".join((
                "compiled" if row["compiled"] else "eager",
                f"recompute {row['recompute']}", row["precision"]))
            shown = " / ".join(f"{m * 1e3:.1f}" for m in measured)
            relative = ("", "")
            if simulated_base:
                relative = (f"{mean / measured_base:.3f}",
                            f"{simulated / simulated_base:.3f}")
            print(f"| {name} | {shown} | {simulated * 1e3:.1f} | "
                  f"{(simulated - mean) / mean * 100:+.1f}% | "
                  f"{relative[0]} | {relative[1]} |", flush=True)
        print()
        print(f"| configuration | measured GiB above the start "
              f"({runs[0]['rows'][0]['layers']} layers) | simulated | error "
              "| simulated activations / gradients / workspace |")
        print("|---|---:|---:|---:|---|")
        for index, row in enumerate(runs[0]["rows"]):
            measured = [run["rows"][index]["peak_above_start_bytes"]
                        for run in runs]
            peak = simulate(placer, cluster, row["layers"], row, vocab=8)[1]
            simulated = (peak["activations"] + peak["gradients"] +
                         peak["workspace"])
            mean = sum(measured) / len(measured)
            name = ", ".join((
                "compiled" if row["compiled"] else "eager",
                f"recompute {row['recompute']}", row["precision"]))
            shown = " / ".join(f"{m / 2**30:.2f}" for m in measured)
            parts = " / ".join(f"{peak[k] / 2**30:.2f}" for k in
                               ("activations", "gradients", "workspace"))
            print(f"| {name} | {shown} | {simulated / 2**30:.2f} | "
                  f"{(simulated - mean) / mean * 100:+.1f}% | {parts} |",
                  flush=True)


if __name__ == "__main__":
    main()
