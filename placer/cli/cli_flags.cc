// The command line's flags, defined once for every command (each command's
// help lists its own: cli_common.cc's FlagsOf table); cli_common.h declares
// them, and the commands read them once into their options structs.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "placer/cli/cli_common.h"

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
          "CPUs: bf16); fp8: bf16 with the linear layers' products at the "
          "devices' fp8 rate, as Transformer Engine trains (simulated only).");
ABSL_FLAG(std::string, mixed_precision, "amp",
          "Below fp32, where the weights are kept: amp (torch.autocast: "
          "fp32 parameters, gradients and optimizer state, a cast copy of "
          "each weight kept for the backward) or master (Megatron-LM's "
          "--bf16, FSDP's mixed precision: parameters and gradients at the "
          "compute type, an fp32 master copy in the optimizer state, "
          "sharded with it by ZeRO; simulated only).");
ABSL_FLAG(std::string, fp8_recipe, "te",
          "--precision fp8: whose kernels cast to fp8, for their cost: te "
          "(Transformer Engine: casts written by the kernels that make the "
          "tensors, weights cast once a step; not counted) or torchao "
          "(torchao's Float8 tensorwise recipe, torchtitan's float8: an amax "
          "pass and a cast per operand and transposed copies, at the "
          "device's memory rate).");
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
ABSL_FLAG(std::string, elementwise, "as-exported",
          "as-exported: elementwise ops, norms and data movement op by op "
          "as the model writes them (every tensor between them made and "
          "kept as eager PyTorch does); fused: each region of them one "
          "kernel that keeps only what its backward reads, as torch.compile "
          "and Transformer Engine run them.");
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
          "selectively, then layer by layer, then wholly), none, full "
          "(every stage) or selective "
          "(every stage reruns its ops without weights: Megatron-LM's "
          "selective recomputation) or selective-op (in each repeated "
          "layer, every op but the attention cores and every other linear "
          "product: torchtitan's op-level selective checkpointing) or "
          "layers (each repeated layer whole from its input: Megatron-LM's "
          "--recompute-num-layers 1, torchtitan's full).");
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
ABSL_FLAG(std::string, stages, "auto",
          "place --parallelism: pipeline stages of every candidate, or auto "
          "(any); with --tensor and --replicas it fixes a layout, such as a "
          "published run's (Megatron-LM's pipeline-model-parallel size).");
ABSL_FLAG(std::string, replicas, "auto",
          "place --parallelism: data-parallel replicas of every stage of "
          "every candidate, or auto (any); stages x replicas x tensor "
          "devices in all.");
ABSL_FLAG(bool, sequence_parallel, false,
          "place --parallelism: tensor-parallel candidates split the norms, "
          "dropout and residuals between row- and column-parallel ops on a "
          "token dim (Megatron-LM's sequence parallelism).");
ABSL_FLAG(bool, overlap_param_gather, false,
          "place --parallelism: candidates with ZeRO-1 or -2 all-gather the "
          "updated parameters as the next step's first forward pass needs "
          "them, not after the update (Megatron-LM's --overlap-param-gather); "
          "needs --zero 1, 2 or auto.");
ABSL_FLAG(int64_t, global_batch, 0,
          "place --parallelism: the step's global batch (samples); the "
          "graph's batch is one micro-batch, so a step runs global batch / "
          "graph batch micro-batches (instead of --micro-batches).");
ABSL_FLAG(std::vector<std::string>, micro_batch_sizes, {},
          "place --parallelism with --global-batch: micro batch sizes to "
          "search, comma-separated (each reloads the model at that batch and "
          "runs global batch / size micro-batches); the fastest plan of any "
          "size is chosen.");
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
