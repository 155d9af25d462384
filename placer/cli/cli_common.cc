#include "placer/cli/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <new>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_helpers.h"
#include "profiles/measured_cost_model.h"

ABSL_FLAG(bool, json, false, "Print one JSON object instead of tables.");
ABSL_FLAG(std::string, optimizer, "momentum",
          "The optimizer the step trains with, for update costs and memory: "
          "sgd (no state), momentum (one state tensor per parameter), adam "
          "(AdamW: two); simulate, place, bench and run. profile, calibrate "
          "and train measure momentum steps only.");
ABSL_FLAG(std::string, precision, "fp32",
          "The step's compute precision, as torch.autocast trains: fp32, "
          "bf16 or fp16 (matrix products at that precision on the devices' "
          "tensor-core rates, activations stored in it; weights, gradients "
          "and optimizer state fp32); simulate, place, bench and run (on "
          "CPUs: bf16).");
ABSL_FLAG(int64_t, batch, 0,
          "Batch size: fixes the first dim of every graph input whose first "
          "dim is symbolic; for zoo models, the batch they are built with.");
ABSL_FLAG(std::vector<std::string>, input_shape, {},
          "Full shapes of named graph inputs, NAME=D0xD1x..., comma "
          "separated (e.g. input=32x3x224x224).");
ABSL_FLAG(std::vector<std::string>, input_values, {},
          "run: values of named graph inputs, NAME=SPEC comma separated; "
          "SPEC is range:LO:HI (uniform; integers LO..HI-1), value:V, mask "
          "(a padding mask) or file:PATH (numbers, row-major). Integer "
          "inputs that reach no Gather, loss or comparison need one.");
ABSL_FLAG(std::vector<std::string>, dim, {},
          "Values of symbolic dims by name, NAME=VALUE, comma separated "
          "(e.g. seq_len=128).");
ABSL_FLAG(std::string, attention, "as-exported",
          "as-exported: attention op by op as the model writes it (its "
          "seq x seq scores a tensor of the step); fused: each attention "
          "core (Q.K^T, scale and mask, Softmax, .V) one op costed and run "
          "as FlashAttention, as training frameworks run it.");
ABSL_FLAG(int64_t, layers, 0, "Zoo: layers (or toy depth/width).");
ABSL_FLAG(int64_t, seq_len, 0, "Zoo: sequence length / unrolled steps.");
ABSL_FLAG(int64_t, hidden, 0, "Zoo: hidden size / model width.");
ABSL_FLAG(int64_t, vocab, 0, "Zoo: vocabulary size.");
ABSL_FLAG(int64_t, image_size, 0, "Zoo: image height and width (CNNs).");
ABSL_FLAG(uint64_t, seed, 1,
          "Seed of searches (place) and of zoo models' weights.");
ABSL_FLAG(bool, weights, true,
          "Zoo: write real (random) weights; with --noweights initializers "
          "are external data with no file (for placement only). ONNX "
          "files: --noweights accepts weights stripped to their dims.");
ABSL_FLAG(std::string, o, "", "Output file (zoo export).");
ABSL_FLAG(std::string, cluster, "",
          "Cluster: a preset name (p100x4, v100x8, h100x8, cpu1_gpu2, cpu2, ...) "
          "or a .pbtxt/.json file.");
ABSL_FLAG(std::string, placement, "", "Placement file (JSON).");
ABSL_FLAG(std::string, trace, "",
          "Write the simulated schedule as a Chrome trace (JSON).");
ABSL_FLAG(std::string, report, "",
          "simulate, place: write the plan as one self-contained HTML page "
          "(devices, timeline, memory over the step, busiest links; with "
          "--compare, the policies side by side); remote place|train|get: "
          "the server's page of the stored placement.");
ABSL_FLAG(std::string, profile, "",
          "simulate: a measured profile (.pbtxt/.json) preferred over the "
          "roofline wherever it has a node or link.");
ABSL_FLAG(std::string, devices, "",
          "profile: the device kinds to measure, cpu and/or gpu (gpu needs a "
          "CUDA LibTorch); empty: every kind the cluster has.");
ABSL_FLAG(int32_t, repeats, 5, "profile: timed repeats per measurement.");
ABSL_FLAG(int32_t, reference_steps, 5,
          "profile: steps of a reference placement (seeded random runs of "
          "the topological order over the cluster) whose in-step node and "
          "link times overlay the op-by-op ones; 0: op-by-op only.");
ABSL_FLAG(int32_t, warmup, 2, "profile, run, calibrate: discarded warm-up runs (steps for run).");
ABSL_FLAG(int32_t, threads, 1, "profile, run, calibrate: threads per CPU device.");
ABSL_FLAG(bool, pin_cores, true,
          "profile, run, calibrate, train: run each CPU device on --threads "
          "cores of its own (the next ones of those the process may use: "
          "taskset picks which), so that where a placement's devices run "
          "does not vary from run to run; off, the system moves them.");
ABSL_FLAG(placer::FlagSeconds, budget, placer::FlagSeconds{10},
          "Time budget: seconds, or with a unit (90s, 10m, 1h) (place: for "
          "searches; train: for training; profile: for measuring).");
ABSL_FLAG(int64_t, evaluations, 0,
          "place: at most this many simulations per search (0: no limit); "
          "unlike --budget it makes results machine-independent.");
ABSL_FLAG(double, memory_headroom, 0.05,
          "place, bench, run, calibrate: the fraction of each "
          "device's memory placements leave free (allocator fragmentation, "
          "workspaces, the runtime's own memory).");
ABSL_FLAG(std::string, policy, "best",
          "place: the policy (single, expert, hash, critical_path, metis, "
          "heft, m_etf, m_sct, m_topo, local_search, best, memory_first; rl "
          "runs in placer_torch).");
ABSL_FLAG(bool, compare, false, "place: run and compare every policy.");
ABSL_FLAG(std::string, parallelism, "model",
          "place: model (op placement only), pipeline (stages over "
          "micro-batches), data (replicas with allreduce), hybrid (replicas "
          "of an op placement by --policy over several devices), tensor "
          "(replicas that are tensor-parallel groups, ops split across "
          "them) or auto (the fastest per graph batch of op placement, "
          "data, pipeline, hybrid, tensor and stages with replicas).");
ABSL_FLAG(int32_t, micro_batches, 0,
          "place --parallelism: micro-batches per step, the same for every "
          "row compared (a step's global batch is that many times the "
          "graph's batch); 0: one per identical device (plain data "
          "parallelism's).");
ABSL_FLAG(std::string, recompute, "auto",
          "place --parallelism: which pipeline stages rerun their forward "
          "before the backward instead of keeping its activations: auto "
          "(those whose devices would be over their memory otherwise, "
          "selectively, then wholly), none, full (every stage) or selective "
          "(every stage reruns its ops without weights: Megatron-LM's "
          "selective recomputation).");
ABSL_FLAG(std::string, zero, "auto",
          "place --parallelism: ZeRO over each stage's data-parallel "
          "replicas: 0 (each holds everything), 1 (the optimizer state "
          "sharded), 2 (and the gradients), 3 (and the parameters, gathered "
          "before each use: FSDP), or auto (1, then 2, then 3, for a "
          "candidate whose devices would be over their memory otherwise).");
ABSL_FLAG(std::string, tensor, "auto",
          "place --parallelism: devices per tensor-parallel group for every "
          "candidate (dividing the identical devices), or auto (tensor and "
          "auto try every power of two; the others none).");
ABSL_FLAG(bool, sequence_parallel, false,
          "place --parallelism: tensor-parallel candidates split the norms, "
          "dropout and residuals between row- and column-parallel ops on a "
          "token dim (Megatron-LM's sequence parallelism).");
ABSL_FLAG(int64_t, global_batch, 0,
          "place --parallelism: the step's global batch (samples); the "
          "graph's batch is one micro-batch, so a step runs global batch / "
          "graph batch micro-batches (instead of --micro-batches).");
ABSL_FLAG(std::string, emit, "",
          "place --parallelism: also print the chosen plan in another "
          "system's terms: megatron (Megatron-LM's flags), deepspeed (a "
          "DeepSpeed config), torchtitan (its TOML sections), and what of "
          "the plan that system cannot express.");
ABSL_FLAG(int32_t, steps, 10,
          "run, calibrate: measured training steps (after --warmup).");
ABSL_FLAG(std::string, profile_out, "",
          "run: write the measured per-node and per-link times as a profile "
          "(over --profile's, when given).");
ABSL_FLAG(int32_t, placements, 10,
          "calibrate: placements measured per model (policies, then random).");
ABSL_FLAG(int32_t, rounds, 3,
          "calibrate: measure every placement this many times, in rounds "
          "that take the placements in turn (each time a fresh executor, "
          "--warmup then --steps steps); a placement's step is the median "
          "of its rounds, and the summary says how well the rounds agree "
          "with each other and with the simulator one at a time.");
ABSL_FLAG(std::string, checkpoint, "",
          "train: the directory for checkpoints, the learning curve and the "
          "best placements; place --policy rl: the trained model to start "
          "from.");
ABSL_FLAG(bool, resume, false,
          "train: go on from the checkpoint in --checkpoint; profile: go "
          "on from the -o file a stopped profile wrote (its op timings "
          "kept, the rest measured).");
ABSL_FLAG(std::string, curve, "",
          "train: also write the learning curve (CSV) here.");
ABSL_FLAG(int64_t, samples, 0,
          "train: stop after this many sampled placements (0: only the "
          "budget stops); with a seed, makes training repeatable.");
ABSL_FLAG(int32_t, samples_per_step, 64,
          "train: placements sampled per REINFORCE step.");
ABSL_FLAG(bool, warm_start, false,
          "train: imitate the best heuristic placement first (default: "
          "from random assignments of the structural groups).");
ABSL_FLAG(int32_t, imitation_steps, 150,
          "train: Adam steps of the warm start's imitation.");
ABSL_FLAG(bool, joint, false,
          "train: REINFORCE samples and trains the Grouper with the Placer "
          "(default: the Grouper keeps its most likely groups, the "
          "structural ones, and the Placer learns alone; less variance).");
ABSL_FLAG(double, learning_rate, 0.01, "train: Adam's learning rate.");
ABSL_FLAG(double, entropy, 0.01,
          "train: starting weight of the policy's entropy in the loss "
          "(keeps it exploring); it adapts toward --entropy-target.");
ABSL_FLAG(double, entropy_target, 0.4,
          "train: entropy per device choice (nats; ln 4 = 1.39 is uniform "
          "over four devices) the entropy weight steers toward; 0: a fixed "
          "weight.");
ABSL_FLAG(double, max_kl, 0.01,
          "train: largest policy change per step (mean KL divergence per "
          "device choice); a step over it is halved; 0: no limit.");
ABSL_FLAG(int32_t, groups, 32, "train: the Grouper's number of groups.");
ABSL_FLAG(int32_t, sage_layers, 0,
          "train: GraphSAGE layers embedding the units before the Grouper "
          "and the Placer (0: the features alone).");
ABSL_FLAG(int32_t, sage_hidden, 64,
          "train: the width of each GraphSAGE layer.");
ABSL_FLAG(bool, device_agnostic, false,
          "train: a Placer for any cluster (each device scored from its own "
          "numbers), so the checkpoint places on clusters of other sizes "
          "and kinds.");
ABSL_FLAG(bool, heuristic_input, false,
          "train: the Placer reads the best heuristic's placement (each "
          "group's device logits gain a learned weight times the share of "
          "its compute the heuristic put on each device).");
ABSL_FLAG(bool, memory_mask, true,
          "train: the Placer closes devices that a group would overflow.");
ABSL_FLAG(placer::FlagSeconds, checkpoint_every, placer::FlagSeconds{60},
          "train: checkpoint interval (and on SIGINT/SIGTERM, and at the "
          "end).");
ABSL_FLAG(std::string, reward, "simulated",
          "train: simulated (the simulator, threads in parallel) or "
          "measured (the executor on the cluster's CPU devices).");
ABSL_FLAG(int32_t, nproc, 1,
          "run: ranks (processes) to start on this machine, rank 0 being "
          "this one; devices are split over the ranks in order unless the "
          "cluster file gives each its process.");
ABSL_FLAG(int32_t, world_size, 0,
          "run: ranks in all (default --nproc); ranks --nproc and up join "
          "with `placer worker` from other hosts.");
ABSL_FLAG(int32_t, rank, 0,
          "run, worker: this process's rank (set by the launcher).");
ABSL_FLAG(std::string, master, "127.0.0.1:0",
          "run, worker: HOST:PORT of rank 0's rendezvous store (rank 0: port "
          "0 picks a free one, printed for `placer worker`).");
ABSL_FLAG(std::string, bind, "127.0.0.1",
          "run, worker: the address this rank's transport listens on "
          "(loopback by default; another host's ranks need a reachable one).");
ABSL_FLAG(placer::FlagSeconds, rank_timeout, placer::FlagSeconds{30},
          "run, worker: how long a rank waits on another (joining, a value, "
          "the end of a step) before stopping with an error naming it.");
ABSL_FLAG(std::string, order, "critical_path",
          "Ready-queue order of the simulator: critical_path or topological.");


namespace placer {

bool AbslParseFlag(absl::string_view text, FlagSeconds* out,
                   std::string* error) {
  double scale = 1;
  absl::string_view number = text;
  if (!text.empty()) {
    switch (text.back()) {
      case 's': scale = 1; break;
      case 'm': scale = 60; break;
      case 'h': scale = 3600; break;
      default: scale = 0; break;
    }
    if (scale > 0) number.remove_suffix(1);
    if (scale == 0) scale = 1;
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !(value >= 0)) {
    *error = "expected a duration like 30, 30s, 10m or 1h";
    return false;
  }
  out->seconds = value * scale;
  return true;
}

std::string AbslUnparseFlag(FlagSeconds value) {
  return absl::StrCat(value.seconds);
}

// Under `bazel run` the process starts in the runfiles tree; paths the user
// typed are relative to where they ran bazel.
std::string UserPath(const std::string& path) {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (dir == nullptr || path.empty() || path[0] == '/' ||
      path.rfind("zoo:", 0) == 0) {
    return path;
  }
  return absl::StrCat(dir, "/", path);
}

std::vector<const absl::CommandLineFlag*> PlacerFlags() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "placer/")) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(), [](const auto* a, const auto* b) {
    return a->Name() < b->Name();
  });
  return flags;
}

const std::map<std::string, std::vector<std::string>>& CommandFlags() {
  static const auto* table = [] {
    using Flags = std::vector<std::string>;
    auto join = [](std::initializer_list<Flags> parts) {
      Flags out;
      for (const Flags& p : parts) out.insert(out.end(), p.begin(), p.end());
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      return out;
    };
    // What the shared readers read: LoadModelFromFlags (and the zoo's
    // sizes), PolicyOptionsFromFlags, CostModelFromFlags.
    const Flags model = {"batch",  "input_shape", "dim",        "layers",
                         "seq_len", "hidden",     "vocab",      "image_size",
                         "weights", "attention",  "seed"};
    const Flags policy = {"policy", "budget", "evaluations",
                          "memory_headroom", "seed"};
    const Flags costs = {"profile"};
    const Flags ranks = {"nproc", "world_size", "rank", "master", "bind",
                         "rank_timeout"};
    return new std::map<std::string, Flags>{
        {"inspect", join({model, {"json"}})},
        {"zoo", join({model, {"o", "json"}})},
        {"simulate", join({model,
                           costs,
                           {"cluster", "placement", "trace", "report", "order",
                            "json", "optimizer", "precision"}})},
        {"place",
         join({model,
               policy,
               costs,
               {"cluster", "compare", "o", "report", "checkpoint", "json",
                "parallelism", "micro_batches", "recompute", "zero", "tensor",
                "sequence_parallel", "emit", "global_batch", "optimizer",
                "precision"}})},
        {"bench", join({model,
                        policy,
                        {"models", "clusters", "policies", "out_dir", "json",
                         "optimizer", "precision"}})},
        {"profile", join({model,
                          ranks,
                          {"cluster", "devices", "repeats", "reference_steps",
                           "warmup", "threads", "pin_cores", "budget", "o",
                           "resume", "json", "optimizer"}})},
        {"run", join({model,
                      policy,
                      costs,
                      ranks,
                      {"cluster", "placement", "profile_out", "steps", "warmup",
                       "threads", "pin_cores", "json", "optimizer", "precision",
                       "input_values"}})},
        {"worker", join({ranks})},
        {"calibrate",
         join({model,
               policy,
               {"cluster", "placements", "rounds", "steps", "warmup", "threads",
                "pin_cores", "repeats", "profile", "o", "json", "optimizer"}})},
        {"train", join({model,
                        costs,
                        {"cluster",
                         "budget",
                         "checkpoint",
                         "resume",
                         "curve",
                         "samples",
                         "samples_per_step",
                         "warm_start",
                         "imitation_steps",
                         "joint",
                         "learning_rate",
                         "entropy",
                         "entropy_target",
                         "max_kl",
                         "groups",
                         "sage_layers",
                         "sage_hidden",
                         "device_agnostic",
                         "heuristic_input",
                         "memory_mask",
                         "checkpoint_every",
                         "reward",
                         "steps",
                         "warmup",
                         "threads",
                         "pin_cores",
                         "o",
                         "json",
                         "optimizer"}})},
        {"serve",
         join({{"listen", "max_ops", "max_placing", "max_request_mb",
                "max_searches", "max_threads", "state_dir",
                "max_searches_per_client", "max_placing_per_client",
                "max_calls_per_second_per_client", "max_state_mb", "tls_cert",
                "tls_key", "tls_ca", "access", "insecure"}})},
        {"token", Flags{"roles"}},
        {"remote", join({{"server",
                          "deadline",
                          "step_seconds",
                          "send_weights",
                          "use_reported_profiles",
                          "profile_clients",
                          "cluster",
                          "policy",
                          "budget",
                          "evaluations",
                          "seed",
                          "placement",
                          "profile",
                          "o",
                          "report",
                          "json",
                          "batch",
                          "input_shape",
                          "attention",
                          "tls_ca",
                          "tls_cert",
                          "tls_key",
                          "tls_server_name",
                          "token_file"}})},
    };
  }();
  return *table;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "placer: error: %s\n", std::string(status.message()).c_str());
  return 1;
}

namespace {
std::atomic<bool> stop_signal_received{false};
extern "C" void OnStopSignal(int) { stop_signal_received = true; }
}  // namespace

StopOnSignal::StopOnSignal() {
  stop_signal_received = false;
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

StopOnSignal::~StopOnSignal() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

bool StopOnSignal::requested() { return stop_signal_received.load(); }

void ReportWrote(const std::string& path, const std::string& detail) {
  std::cerr << "wrote " << path << (detail.empty() ? "" : ": ") << detail
            << "\n";
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "placer: %s\nRun `placer --help` for usage.\n",
               message.c_str());
  return 2;
}

absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags() {
  absl::StatusOr<Optimizer> optimizer =
      ParseOptimizer(absl::GetFlag(FLAGS_optimizer));
  if (!optimizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", optimizer.status().message()));
  }
  TrainingOptions options = TrainingOptionsFor(*optimizer);
  absl::StatusOr<Precision> precision =
      ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", precision.status().message()));
  }
  options.precision = *precision;
  if (options.precision != Precision::kFp32 &&
      !absl::GetFlag(FLAGS_profile).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision ", PrecisionName(options.precision), " with --profile ",
        absl::GetFlag(FLAGS_profile),
        ": profiles hold fp32 measurements; plan this precision from the "
        "cluster's rates (leave --profile out)"));
  }
  return options;
}

absl::Status CheckMeasuredStepDefaults() {
  if (absl::GetFlag(FLAGS_optimizer) == "momentum" &&
      absl::GetFlag(FLAGS_precision) == "fp32") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--optimizer ", absl::GetFlag(FLAGS_optimizer), " --precision ",
      absl::GetFlag(FLAGS_precision),
      ": profiles (profile, calibrate, train, run --profile-out) are "
      "measured from fp32 steps with momentum only (simulate, place, bench "
      "and run take the others)"));
}

PolicyOptions PolicyOptionsFromFlags() {
  PolicyOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.budget_seconds = absl::GetFlag(FLAGS_budget).seconds;
  options.max_evaluations = absl::GetFlag(FLAGS_evaluations);
  options.memory_headroom = absl::GetFlag(FLAGS_memory_headroom);
  return options;
}

zoo::ZooParams ZooParamsFromFlags() {
  zoo::ZooParams p;
  p.batch_size = absl::GetFlag(FLAGS_batch);
  p.layers = absl::GetFlag(FLAGS_layers);
  p.seq_len = absl::GetFlag(FLAGS_seq_len);
  p.hidden = absl::GetFlag(FLAGS_hidden);
  p.vocab = absl::GetFlag(FLAGS_vocab);
  p.image_size = absl::GetFlag(FLAGS_image_size);
  p.seed = absl::GetFlag(FLAGS_seed);
  p.weights = absl::GetFlag(FLAGS_weights);
  return p;
}

absl::StatusOr<LoadedModel> LoadModelFromFlags(const std::string& spec) {
  ASSIGN_OR_RETURN(ImportOptions options, ImportOptionsFromFlags());
  return LoadModel(UserPath(spec), options, ZooParamsFromFlags());
}

absl::StatusOr<bool> FuseAttentionFromFlag() {
  const std::string attention = absl::GetFlag(FLAGS_attention);
  if (attention == "fused") return true;
  if (attention == "as-exported") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "--attention '", attention, "': expected as-exported or fused"));
}

absl::StatusOr<ImportOptions> ImportOptionsFromFlags() {
  ImportOptions options;
  options.names.batch_size = "--batch";
  options.names.input_shapes = "--input-shape";
  options.names.dim_values = "--dim";
  options.names.weights_optional = "--noweights";
  options.weights_optional = !absl::GetFlag(FLAGS_weights);
  ASSIGN_OR_RETURN(options.fuse_attention, FuseAttentionFromFlag());
  if (int64_t batch = absl::GetFlag(FLAGS_batch); batch > 0) {
    options.batch_size = batch;
  } else if (batch < 0) {
    return absl::InvalidArgumentError("--batch must be positive");
  }
  for (const std::string& s : absl::GetFlag(FLAGS_input_shape)) {
    const size_t equals = s.find('=');
    if (equals == std::string::npos || equals == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input-shape '", s,
                       "': expected NAME=D0xD1x..., e.g. input=32x3x224x224"));
    }
    absl::StatusOr<std::vector<int64_t>> dims = ParseDims(s.substr(equals + 1));
    if (!dims.ok()) {
      return WithContext(dims.status(),
                         absl::StrCat("--input-shape '", s, "': "));
    }
    options.input_shapes[s.substr(0, equals)] = *std::move(dims);
  }
  for (const std::string& s : absl::GetFlag(FLAGS_dim)) {
    std::vector<std::string> kv = absl::StrSplit(s, '=');
    int64_t value;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dim '", s, "': expected NAME=POSITIVE_INTEGER"));
    }
    options.dim_values[kv[0]] = value;
  }
  return options;
}

absl::StatusOr<Cluster> LoadUserCluster(const std::string& spec) {
  return LoadCluster(spec.find('.') != std::string::npos ? UserPath(spec)
                                                         : spec);
}

absl::StatusOr<std::unique_ptr<CostModel>> CostModelFromFlags() {
  std::unique_ptr<CostModel> costs = NewRooflineCostModel();
  if (std::string path = absl::GetFlag(FLAGS_profile); !path.empty()) {
    ASSIGN_OR_RETURN(MeasuredProfile profile, LoadProfile(UserPath(path)));
    costs = NewMeasuredCostModel(std::move(profile), std::move(costs));
  }
  return costs;
}

namespace {

// Abseil flag names use underscores; accept --input-shape as well.
std::vector<char*> NormalizeFlagNames(int argc, char** argv,
                                      std::vector<std::string>& storage) {
  storage.assign(argv, argv + argc);
  for (std::string& arg : storage) {
    if (arg.rfind("--", 0) != 0) continue;
    size_t end = arg.find('=');
    if (end == std::string::npos) end = arg.size();
    for (size_t i = 2; i < end; ++i) {
      if (arg[i] == '-') arg[i] = '_';
    }
  }
  std::vector<char*> out;
  for (std::string& arg : storage) out.push_back(arg.data());
  return out;
}


constexpr char kVersion[] = "0.1.0";

void PrintFlag(const absl::CommandLineFlag& flag) {
  std::string name(flag.Name());
  std::replace(name.begin(), name.end(), '_', '-');
  std::string def = flag.DefaultValue();
  std::cout << absl::StrFormat("  --%s (default: %s)\n      %s\n", name,
                               def.empty() ? "none" : def, flag.Help());
}

constexpr char kFlagSyntax[] =
    "Flags (--name VALUE or --name=VALUE; booleans --name / --noname):\n";

// The usage, then every flag with its default (as --flag-name).
void PrintHelp(const char* usage) {
  std::cout << usage << "\n" << kFlagSyntax;
  for (const absl::CommandLineFlag* flag : PlacerFlags()) PrintFlag(*flag);
}

// `placer COMMAND --help`: the command's paragraphs of the usage (lines
// from "  placer COMMAND" up to the next command's), then its flags.
void PrintCommandHelp(const char* usage, const std::string& command,
                      const std::vector<std::string>& flags) {
  std::vector<std::string> lines = absl::StrSplit(usage, '\n');
  const std::string mine = "  placer " + command;
  bool in = false, any = false;
  for (const std::string& line : lines) {
    const bool starts_command = absl::StartsWith(line, "  placer ");
    if (starts_command) {
      in = line == mine || absl::StartsWith(line, mine + " ");
    } else if (!absl::StartsWith(line, "  ")) {
      in = false;
    }
    if (in) {
      std::cout << line << "\n";
      any = true;
    }
  }
  if (!any) std::cout << "placer " << command << " (see `placer --help`)\n";
  std::cout << "\n" << kFlagSyntax;
  for (const std::string& name : flags) {
    if (const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name)) {
      PrintFlag(*flag);
    }
  }
}

// Help, version and unknown flags, before Abseil's parser (which exits 1
// for all three): help and version exit 0 (-1: go on), an unknown flag is a
// usage error (2) like an unknown command. `placer COMMAND --help` shows
// that command's usage and flags.
int EarlyArguments(const std::vector<char*>& args, const char* usage) {
  const auto all = absl::GetAllFlags();
  const std::string command =
      args.size() > 1 && args[1][0] != '-' ? args[1] : "";
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h" || arg == "--helpfull" ||
        arg == "--helpshort" || arg == "-help") {
      auto it = CommandFlags().find(command);
      if (it != CommandFlags().end()) {
        PrintCommandHelp(usage, command, it->second);
      } else {
        PrintHelp(usage);
      }
      return 0;
    }
    if (arg == "--version") {
      std::cout << "placer " << kVersion << "\n";
      return 0;
    }
    if (arg.size() < 2 || arg[0] != '-') continue;
    absl::string_view name = arg.substr(arg[1] == '-' ? 2 : 1);
    name = name.substr(0, name.find('='));
    if (all.contains(name) ||
        (absl::StartsWith(name, "no") && all.contains(name.substr(2)))) {
      continue;
    }
    return UsageError(absl::StrCat("unknown flag '", args[i], "'"));
  }
  return -1;
}

// The directory of the running executable.
std::string SelfDirectory() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  std::string s(path, n);
  return s.substr(0, s.rfind('/'));
}

}  // namespace

int RunCli(int argc, char** argv, const char* usage,
           const std::vector<Command>& commands,
           const std::function<bool(const std::string& command)>& elsewhere,
           const std::string& elsewhere_binary) {
  absl::SetProgramUsageMessage(usage);
  std::vector<std::string> storage;
  std::vector<char*> normalized = NormalizeFlagNames(argc, argv, storage);
  if (int code = EarlyArguments(normalized, usage); code >= 0) return code;
  std::vector<char*> positional = absl::ParseCommandLine(
      static_cast<int>(normalized.size()), normalized.data());
  if (positional.size() < 2) {
    std::cout << usage;
    return argc > 1 ? 2 : 0;
  }
  std::string command = positional[1];
  if (elsewhere && elsewhere(command)) {
    std::string binary = SelfDirectory() + "/" + elsewhere_binary;
    std::vector<char*> args(argv, argv + argc);
    args[0] = binary.data();
    args.push_back(nullptr);
    execv(binary.c_str(), args.data());
    return Fail(absl::NotFoundError(absl::StrCat(
        "`", command, "` runs in ", binary,
        ", which could not be started; build //placer:", elsewhere_binary)));
  }
  std::vector<std::string> args(positional.begin() + 2, positional.end());
  for (const Command& c : commands) {
    if (command != c.name) continue;
    // The last line of defence: an allocation that fails, or any exception
    // a library throws past a command, is an error message, never an abort.
    try {
      return c.run(args);
    } catch (const std::bad_alloc&) {
      return Fail(absl::ResourceExhaustedError(
          absl::StrCat(command, ": out of memory")));
    } catch (const std::exception& e) {
      return Fail(absl::InternalError(absl::StrCat(command, ": ", e.what())));
    }
  }
  return UsageError(absl::StrCat("unknown command '", command, "'"));
}

}  // namespace placer
