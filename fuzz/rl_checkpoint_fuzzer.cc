// RL checkpoints in (`placer train --resume`, `place --policy rl
// --checkpoint`): the bytes become DIR/checkpoint.pt, and a trainer of a
// small GNMT-2 on two CPUs reads it the three ways the CLI does: the model
// options it was trained with, the whole training state, the model alone.
// Each must fail with a status or succeed; a state that loads must fit the
// graph and cluster (a placement that does not would crash later).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <unistd.h>

#include "fuzz/fuzz_target.h"
#include "fuzz/small_model.h"
#include "graph/training_view.h"
#include "simulator/evaluator.h"
#include "simulator/simulator.h"
#include "policies/rl/trainer.h"
#include "profiles/cluster.h"
#include "profiles/cost_model.h"

namespace {

struct Fixed {
  placer::Graph graph;
  placer::TrainingView view;
  placer::Cluster cluster;
  std::unique_ptr<placer::CostModel> costs = placer::NewRooflineCostModel();
  std::unique_ptr<placer::ReadyOrder> order =
      placer::NewCriticalPathReadyOrder();
  std::unique_ptr<placer::SimulationContext> sim;
  std::unique_ptr<placer::PolicyInput> input;
  std::string dir;
  std::unique_ptr<placer::RlTrainer> trainer;
};

Fixed& Model() {
  static Fixed* fixed = [] {
    auto* f = new Fixed;
    f->graph = placer::fuzz::SmallGnmt2();
    f->view = placer::BuildTrainingView(f->graph);
    f->cluster = *placer::LoadCluster("cpu2");
    f->sim = std::make_unique<placer::SimulationContext>(
        placer::SimulationContext::Create(f->view, f->cluster, *f->costs,
                                          *f->order));
    f->input = std::make_unique<placer::PolicyInput>(
        placer::PolicyInput{f->view, f->cluster, *f->costs, *f->sim});
    f->dir = (std::filesystem::temp_directory_path() /
              ("rl_checkpoint_fuzz." + std::to_string(getpid())))
                 .string();
    std::filesystem::create_directories(f->dir);
    placer::RlTask task;
    task.name = "zoo:gnmt2:batch=2,hidden=8,seq_len=2,vocab=10";
    task.input = f->input.get();
    const placer::SimulationContext* context = f->sim.get();
    task.make_evaluator = [context] {
      return placer::NewSimulatorEvaluator(*context);
    };
    placer::RlTrainerOptions o;  // a small model: a small seed checkpoint
    o.model.groups = 4;
    o.model.grouper_hidden = 8;
    o.model.placer_hidden = 8;
    o.model.device_embedding = 4;
    o.samples_per_step = 4;
    o.max_samples = 8;
    o.checkpoint_dir = f->dir;
    o.threads = 1;
    f->trainer = std::move(*placer::RlTrainer::Create({task}, o));
    // RL_CHECKPOINT_FUZZ_SEED=FILE: train two steps and write the
    // checkpoint there (how fuzz/corpus/rl_checkpoint/seed was made).
    if (const char* seed = std::getenv("RL_CHECKPOINT_FUZZ_SEED")) {
      if (f->trainer->Train().ok()) {
        std::filesystem::copy_file(
            f->dir + "/checkpoint.pt", seed,
            std::filesystem::copy_options::overwrite_existing);
      }
    }
    return f;
  }();
  return *fixed;
}

}  // namespace

// LeakSanitizer: LibTorch 1.13's zip reader (miniz, inside libtorch_cpu)
// leaks what it allocates for an archive it rejects; that is LibTorch's, so
// leaks allocated there are suppressed in this binary (the fuzzer and its
// replay test) - ours are still reported.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libtorch_cpu.so\n";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixed& f = Model();
  {
    std::ofstream out(f.dir + "/checkpoint.pt", std::ios::binary);
    out.write(reinterpret_cast<const char*>(data),
              static_cast<std::streamsize>(size));
  }
  (void)placer::RlTrainer::ReadModelOptions(f.dir);
  if (f.trainer->Resume().ok()) {
    const placer::RlTaskBest& best = f.trainer->best(0);
    if (best.placement) {
      (void)placer::Simulate(*f.sim, *best.placement);
    }
  }
  (void)f.trainer->LoadModel(f.dir);
  return 0;
}
