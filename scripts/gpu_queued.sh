#!/usr/bin/env bash
# On a lent GPU machine (carry .gpu/ from scripts/gpu_bundle.sh): the op
# executor's steps on one GPU, queued (`placer run`'s default) and waiting
# for every node (`run --profile_out`, as profiles need), beside a plain
# PyTorch loop of ResNet-50 (scripts/gpu_loop_baseline.py), alternated in
# ROUNDS rounds (default 2); and the executor's GPU tests, the queued path
# among them. docs/runtime.md, "On a GPU: queued against a plain loop".
#
#   bash scripts/gpu_queued.sh        # everything into $OUT (or OUT_DIR)
set -u
cd "$(dirname "$0")/.."
out=${OUT_DIR:-${OUT:-/tmp/gpu_queued}}
mkdir -p "$out"
{ date -u; nvidia-smi -L; nproc
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
t0=$SECONDS
timeout "${BUILD_S:-240}" bash -c 'source scripts/gpu_build.sh build' \
  > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build: $((SECONDS - t0)) s"
prefix=${PREFIX:-/tmp/placer_prefix}
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout "${TESTS_S:-150}" build/executor_test \
  --gtest_filter='ExecutorTest.PlacementAcrossCpuAndGpuMatchesCpuAlone' \
  > "$out/executor_test.log" 2>&1
echo "executor_test (CPU+GPU, timed and queued): exit $?"
grep -E '^\[  (FAILED|PASSED) |Failure' "$out/executor_test.log" | head -10
cluster=cpu1_h100x1
models=("zoo:resnet50:batch=32" "zoo:gnmt2:batch=32,hidden=512,seq_len=6,vocab=4000")
for round in $(seq 1 "${ROUNDS:-2}"); do
  for model in "${models[@]}"; do
    name=$(echo "$model" | sed -E 's/^zoo://; s/:.*//')
    timeout 120 build/placer_torch run "$model" --cluster "$cluster" \
      --policy single --steps 20 --warmup 3 --json \
      > "$out/${name}_queued_$round.json" 2> "$out/${name}_queued_$round.err"
    echo "$name queued round $round: exit $?"
    timeout 120 build/placer_torch run "$model" --cluster "$cluster" \
      --policy single --steps 20 --warmup 3 --json \
      --profile_out "$out/${name}_profile.pbtxt" \
      > "$out/${name}_timed_$round.json" 2> "$out/${name}_timed_$round.err"
    echo "$name timed round $round: exit $?"
  done
  timeout 120 python3 scripts/gpu_loop_baseline.py --batch 32 --steps 20 \
    > "$out/resnet50_torch_$round.json" 2> "$out/resnet50_torch_$round.err"
  echo "resnet50 plain loop round $round: exit $?"
done
python3 - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
for path in sorted(glob.glob(os.path.join(out, "*_[0-9].json"))):
    try:
        d = json.load(open(path))
    except Exception as e:
        print(os.path.basename(path), "unreadable:", e)
        continue
    step = d.get("measured_step_seconds", d.get("step_seconds"))
    extra = {k: d[k] for k in ("simulated_step_seconds", "last_loss") if k in d}
    losses = d.get("losses")
    print(os.path.basename(path), "step", step, extra,
          "losses", losses[:2] if losses else "")
EOF
