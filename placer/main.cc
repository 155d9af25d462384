// The placer command line. Commands that need LibTorch (profile, run,
// calibrate, train, and place with a learned policy) run in the sibling
// binary placer_torch, so that the others start instantly.
#include "absl/flags/flag.h"
#include "placer/cli/cli_common.h"
#include "policies/policy.h"

namespace placer {
namespace {

constexpr char kUsage[] = R"(placer: device placement for ML training graphs.

Usage:
  placer inspect MODEL [--json] [--batch N] [--input-shape NAME=AxBxC]
      What MODEL contains: ops by type, parameter bytes, forward and
      training FLOPs, the longest path in FLOPs, ops without a cost model.
  placer place MODEL --cluster C [--policy P] [--compare] -o P.json
      Places MODEL on cluster C with policy P (default best: the portfolio
      then local search; --budget 10 seconds, --seed 1) and writes the
      placement file; --compare runs every policy and prints a table of
      simulated step time, speedup over single, ratio to the lower bound,
      peak memory, bytes moved and placement time.
      --parallelism pipeline|data|hybrid|tensor|auto also searches
      strategies: pipeline stages over micro-batches (GPipe/1F1B),
      data-parallel replicas with ring/tree allreduce, replicas of an op
      placement by --policy over several devices (hybrid), replicas that
      are tensor-parallel groups splitting ops (tensor; --tensor T fixes
      the group size), and stages with replicas (auto), --micro-batches M
      per step (default one per device; or --global-batch G samples),
      --recompute auto|none|full|selective|selective-op|layers and --zero
      (--overlap-param-gather: ZeRO-1/2's
      parameter all-gather in the next step's forward); it prints one device, the op placement, the best data-parallel,
      pipeline, hybrid and tensor strategies and auto's choice, each per
      graph batch (the graph's batch is one micro-batch), and writes the
      fastest per batch (-o: its op placement plus a "strategy" object);
      --emit megatron|deepspeed|torchtitan also prints the chosen strategy
      as that system's flags, config or TOML, and what it cannot express.
  placer train MODEL... --cluster C[,C2...] [--budget 10s] [--seed N]
      [--checkpoint DIR [--resume]] [--samples N] [--warm-start]
      [--curve F.csv] [-o P.json] [--reward simulated|measured]
      [--entropy-target 0.4] [--max-kl 0.01] [--sage-layers K]
      [--device-agnostic] [--heuristic-input]
      Trains the hierarchical RL placer (Grouper + Placer, REINFORCE) on
      the models: a progress line with best and mean step time and the
      batch's diversity (distinct placements, entropy per choice); the
      learning curve, checkpoints (every --checkpoint-every 60s, on
      SIGINT/SIGTERM and at the end) and each model's best placement in
      DIR. Starts cold (random groupings of the structural groups);
      --warm-start imitates the best heuristic first. Exploration cannot
      collapse: the entropy weight adapts toward --entropy-target nats
      per choice, and each step's policy change is held under --max-kl.
      Several clusters: every model on every cluster (clusters of other
      device counts need --device-agnostic, whose checkpoint places on any
      cluster).
      Then `place NEW --policy rl --checkpoint DIR` places a model it
      never saw (--evaluations 1: zero-shot; else fine-tunes for --budget).
  placer bench [--models a,b] [--clusters c,d] [--policies p,q]
      Every policy on every model and cluster: simulated step times and
      placement times as Markdown (stdout, --out-dir/bench.md) and CSV.
  placer simulate MODEL --cluster C --placement P.json [--trace T.json]
      [--report R.html]
      Simulates one training step of MODEL placed by P.json on cluster C
      (a preset such as p100x4, or a .pbtxt/.json file): step time, lower
      bound, bytes moved, peak memory per device, out-of-memory verdict;
      --report writes the plan as one self-contained HTML page (place
      --compare --report: the policies side by side).
  placer profile [MODEL] --cluster cpu2 [--devices cpu,gpu]
      [--reference-steps 5] [--nproc N] [--resume] -o PROFILE.pbtxt
      Measures with LibTorch on this machine: each distinct node of MODEL's
      training step (forward, backward, update) on each device kind, and
      copies of 1 B..256 MiB between the cluster's devices; then overlays
      the node and link times measured inside the steps of a reference
      placement (0 steps: op-by-op only). `simulate --profile` uses it.
      With --nproc N (or --world-size and `placer worker`), the links
      between devices of different ranks are measured over the ranks'
      transport (Gloo send/recv round trips). Ctrl-C writes what was
      timed; --resume (same -o) keeps it and measures the rest.
  placer run MODEL --cluster cpu2 (--placement P.json | --policy P)
      [--steps 10 --warmup 2] [--profile P.pbtxt] [--profile-out F.pbtxt]
      Trains MODEL under the placement with LibTorch on this machine's
      devices (synthetic data, SGD with momentum): loss and time per step,
      measured (median) against simulated step time, memory per device
      (a file holding a strategy, from place --parallelism, runs its
      stages, micro-batches and replicas as threads, one per device);
      --profile-out writes the measured node and link times as a profile
      (over --profile's: feed it to the next place/run). --nproc N runs
      the devices as N processes (c10d ranks, Gloo between them; the
      cluster file may give each device its process); --world-size W
      with W > N waits for `placer worker` ranks from other hosts.
  placer worker --rank R --world-size W --master HOST:PORT [--bind ADDR]
      Joins rank 0's `placer run` as rank R: it reads the run's arguments
      from rank 0 (files named there must exist on this host too).
  placer calibrate MODEL... --cluster cpu2 [--placements 10]
      Profiles each model, then measures and simulates a set of placements
      (every heuristic policy, then seeded random ones): relative error of
      the simulator and Spearman's rank correlation.
  placer serve [--listen 127.0.0.1:50051] [--state-dir DIR]
      [--tls-cert C.pem --tls-key K.pem [--tls-ca CA.pem]] [--access FILE]
      The placement service over gRPC (placer/service/service.proto): Place,
      Simulate, Train (streamed progress), GetPlacement by fingerprint,
      ReportMeasurement; health and reflection services; --max-searches 2
      (1 per client), --max-placing 128 (32 per client), --max-threads 128,
      --max-request-mb 256, --max-state-mb 1024. Loopback unless --listen
      opens it, and then only over TLS (or with --insecure); --access names
      the clients, their roles and tokens; with --state-dir the cache and
      measurements survive restarts.
  placer token NAME --roles read,place,train,report
      A new bearer token for a client, and its line for serve --access.
  placer remote place|train|simulate MODEL --cluster C [--policy P ...]
      [--server HOST:PORT] [--deadline S] [-o P.json]
      [--tls-ca CA.pem [--token-file F] [--tls-cert C.pem --tls-key K.pem]]
  placer remote get FINGERPRINT [MODEL]
  placer remote report FINGERPRINT --step-seconds a,b
      The same as RPCs to a placer serve (default 127.0.0.1:50051);
      place, train and get take --report R.html: the server's HTML page
      of the stored placement (get: MODEL again for an ONNX placement).
  placer zoo list
      The built-in benchmark models and decoder LLMs, with their sizes.
  placer zoo export NAME -o FILE.onnx [--batch N --layers N ...]
      Writes a zoo model as an ONNX file.

MODEL is a path to an ONNX file or zoo:NAME (see `placer zoo list`); zoo
models take --batch, --layers, --seq-len, --hidden, --vocab, --image-size.
--attention fused runs every attention core (Q.K^T, scale and mask,
Softmax, .V) as one FlashAttention op: no seq x seq scores kept for the
backward, as PyTorch's scaled_dot_product_attention and Megatron-LM train.
--elementwise fused runs each region of elementwise ops, norms and data
movement as one kernel that keeps only what its backward reads, as
torch.compile and Transformer Engine do. --mixed-precision master (below
fp32) holds weights and gradients at the compute type with an fp32 master
copy in the optimizer state, as Megatron-LM and FSDP do (simulated only).
)";

}  // namespace
}  // namespace placer

int main(int argc, char** argv) {
  return placer::RunCli(argc, argv, placer::kUsage,
                        {{"bench", placer::BenchCommand},
                         {"inspect", placer::InspectCommand},
                         {"place", placer::PlaceCommand},
#if PLACER_WITH_SERVICE
                         {"remote", placer::RemoteCommand},
                         {"serve", placer::ServeCommand},
                         {"token", placer::TokenCommand},
#endif
                         {"simulate", placer::SimulateCommand},
                         {"zoo", placer::ZooCommand}},
                        [](const std::string& command) {
                          if (command == "place") {
                            // Policies this binary lacks (the learned
                            // ones) are in placer_torch.
                            return placer::FindPolicy(
                                       absl::GetFlag(FLAGS_policy)) == nullptr ||
                                   !absl::GetFlag(FLAGS_checkpoint).empty();
                          }
                          return command == "calibrate" ||
                                 command == "profile" || command == "run" ||
                                 command == "train" || command == "worker";
                        },
                        "placer_torch");
}
