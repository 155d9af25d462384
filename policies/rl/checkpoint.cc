#include "policies/rl/checkpoint.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_helpers.h"
#include "base/zip_check.h"
#include "profiles/proto_io.h"

namespace placer {
namespace {

constexpr char kCheckpointFile[] = "checkpoint.pt";

// The curve's columns, each stored as "curve.<name>" (doubles, one per
// row). Earlier files hold one "curve" matrix of the first 9 or all 12.
constexpr const char* kCurveColumns[] = {
    "step",           "samples",        "elapsed_seconds",
    "task",           "batch_mean_seconds", "batch_best_seconds",
    "best_seconds",   "invalid",        "greedy_seconds",
    "distinct_placements", "entropy_per_choice", "step_kl_per_choice"};
constexpr int kColumns = 12;
constexpr int kOldColumns = 9;

std::vector<double> CurveRowValues(const RlCurveRow& r) {
  return {static_cast<double>(r.step), static_cast<double>(r.samples),
          r.elapsed_seconds, static_cast<double>(r.task),
          r.batch_mean_seconds, r.batch_best_seconds, r.best_seconds,
          static_cast<double>(r.invalid), r.greedy_seconds,
          static_cast<double>(r.distinct_placements), r.entropy_per_choice,
          r.step_kl_per_choice};
}

// `x`: the row's values in kCurveColumns order; the first `columns` known.
RlCurveRow CurveRow(const double* x, int columns) {
  RlCurveRow row{static_cast<int64_t>(x[0]), static_cast<int64_t>(x[1]), x[2],
                 static_cast<int>(x[3]),     x[4], x[5], x[6],
                 static_cast<int>(x[7]),     x[8]};
  if (columns == kColumns) {
    row.distinct_placements = static_cast<int>(x[9]);
    row.entropy_per_choice = x[10];
    row.step_kl_per_choice = x[11];
  }
  return row;
}

torch::Tensor ToTensor(const std::vector<int>& v) {
  std::vector<int64_t> wide(v.begin(), v.end());
  return torch::tensor(wide, torch::kLong);
}

std::vector<int> FromTensor(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kLong).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int>(p, p + c.numel());
}

// f() with LibTorch's and TorchScript's exceptions as DataLoss naming path.
template <typename F>
auto Reading(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat(
        "rl: ", path, " is not a readable checkpoint: ",
        e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(
        "rl: ", path, " is not a readable checkpoint: ", e.what()));
  }
}

}  // namespace

std::string RlCheckpointPath(const std::string& dir) {
  return absl::StrCat(dir, "/", kCheckpointFile);
}

absl::Status WriteRlCheckpoint(const std::string& dir,
                               const RlCheckpointState& s,
                               const torch::nn::Module& model,
                               const torch::optim::Optimizer& optimizer) {
  try {
    torch::serialize::OutputArchive archive;
    archive.write("config", c10::IValue(s.config));
    const RlModelOptions& m = s.model;
    archive.write("model.groups", c10::IValue(int64_t{m.groups}));
    archive.write("model.grouper_hidden",
                  c10::IValue(int64_t{m.grouper_hidden}));
    archive.write("model.placer_hidden", c10::IValue(int64_t{m.placer_hidden}));
    archive.write("model.device_embedding",
                  c10::IValue(int64_t{m.device_embedding}));
    archive.write("model.logit_clip", c10::IValue(m.logit_clip));
    archive.write("model.temperature", c10::IValue(m.temperature));
    archive.write("model.sage_layers", c10::IValue(int64_t{m.sage_layers}));
    archive.write("model.sage_hidden", c10::IValue(int64_t{m.sage_hidden}));
    archive.write("model.device_agnostic", c10::IValue(m.device_agnostic));
    archive.write("model.heuristic_input", c10::IValue(m.heuristic_input));
    torch::serialize::OutputArchive model_archive, optimizer_archive;
    model.save(model_archive);
    optimizer.save(optimizer_archive);
    archive.write("model", model_archive);
    archive.write("optimizer", optimizer_archive);
    archive.write("rng", c10::IValue(s.rng));
    archive.write("step", c10::IValue(s.step));
    archive.write("samples", c10::IValue(s.samples));
    archive.write("elapsed_seconds", c10::IValue(s.elapsed_seconds));
    archive.write("imitation_done", c10::IValue(s.imitation_done));
    archive.write("entropy_weight", c10::IValue(s.entropy_weight));
    for (size_t t = 0; t < s.tasks.size(); ++t) {
      const RlTaskCheckpoint& ts = s.tasks[t];
      std::string p = absl::StrCat("task", t, ".");
      archive.write(p + "baseline", c10::IValue(ts.baseline));
      archive.write(p + "has_baseline", c10::IValue(ts.has_baseline));
      if (ts.best.placement) {
        archive.write(p + "best_seconds", c10::IValue(ts.best.step_seconds));
        archive.write(p + "best_source", c10::IValue(ts.best.source));
        archive.write(p + "best_placement",
                      ToTensor(ts.best.placement->device_of_op));
      }
    }
    std::vector<std::vector<double>> columns(kColumns);
    for (const RlCurveRow& r : s.curve) {
      std::vector<double> values = CurveRowValues(r);
      for (int c = 0; c < kColumns; ++c) columns[c].push_back(values[c]);
    }
    for (int c = 0; c < kColumns; ++c) {
      archive.write(absl::StrCat("curve.", kCurveColumns[c]),
                    torch::tensor(columns[c], torch::kDouble));
    }
    std::ostringstream bytes;
    archive.save_to(bytes);
    return WriteFileAtomically(RlCheckpointPath(dir), bytes.str());
  } catch (const std::exception& e) {
    const c10::Error* torch_error = dynamic_cast<const c10::Error*>(&e);
    return absl::InternalError(absl::StrCat(
        "rl: writing a checkpoint in ", dir, ": ",
        torch_error != nullptr ? torch_error->what_without_backtrace()
                               : e.what()));
  }
}

absl::StatusOr<std::unique_ptr<RlCheckpointReader>> RlCheckpointReader::Open(
    const std::string& dir) {
  std::string path = RlCheckpointPath(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("rl: no checkpoint at ", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  // LibTorch's reader does not check the archive's checksums, and a
  // damaged entry can cost it seconds and gigabytes before it fails.
  if (absl::Status s = CheckZipChecksums(bytes.str(), "its zip archive");
      !s.ok()) {
    return absl::DataLossError(absl::StrCat(
        "rl: ", path, " is not a readable checkpoint: ", s.message()));
  }
  std::unique_ptr<RlCheckpointReader> reader(new RlCheckpointReader(path));
  const std::string data = bytes.str();
  RETURN_IF_ERROR(Reading(path, [&]() -> absl::Status {
    reader->archive_.load_from(data.data(), data.size());
    return absl::OkStatus();
  }));
  return reader;
}

absl::StatusOr<std::string> RlCheckpointReader::Config() {
  return Reading(path_, [&]() -> absl::StatusOr<std::string> {
    c10::IValue v;
    archive_.read("config", v);
    return v.toStringRef();
  });
}

absl::StatusOr<RlModelOptions> RlCheckpointReader::ModelOptions() {
  absl::StatusOr<RlModelOptions> read =
      Reading(path_, [&]() -> absl::StatusOr<RlModelOptions> {
        RlModelOptions m;
        c10::IValue v;
        archive_.read("model.groups", v);
        m.groups = static_cast<int>(v.toInt());
        archive_.read("model.grouper_hidden", v);
        m.grouper_hidden = static_cast<int>(v.toInt());
        archive_.read("model.placer_hidden", v);
        m.placer_hidden = static_cast<int>(v.toInt());
        archive_.read("model.device_embedding", v);
        m.device_embedding = static_cast<int>(v.toInt());
        archive_.read("model.logit_clip", v);
        m.logit_clip = v.toDouble();
        archive_.read("model.temperature", v);
        m.temperature = v.toDouble();
        // Checkpoints made before the encoder existed have none.
        if (archive_.try_read("model.sage_layers", v)) {
          m.sage_layers = static_cast<int>(v.toInt());
          archive_.read("model.sage_hidden", v);
          m.sage_hidden = static_cast<int>(v.toInt());
        }
        if (archive_.try_read("model.device_agnostic", v)) {
          m.device_agnostic = v.toBool();
        }
        if (archive_.try_read("model.heuristic_input", v)) {
          m.heuristic_input = v.toBool();
        }
        return m;
      });
  if (!read.ok()) return read;
  const RlModelOptions& m = *read;
  auto within = [](int x, int most) { return x >= 1 && x <= most; };
  if (!within(m.groups, 1 << 12) || !within(m.grouper_hidden, 1 << 13) ||
      !within(m.placer_hidden, 1 << 13) ||
      !within(m.device_embedding, 1 << 13) ||
      !(m.sage_layers >= 0 && m.sage_layers <= kMaxSageLayers) ||
      !within(m.sage_hidden, kMaxSageHidden) ||
      !(m.logit_clip > 0 && m.logit_clip < 1e6) ||
      !(m.temperature > 0 && m.temperature < 1e6)) {
    return absl::DataLossError(absl::StrCat(
        "rl: ", path_, " holds model options out of range: ", m.Describe()));
  }
  return read;
}

absl::StatusOr<RlCheckpointState> RlCheckpointReader::State(int tasks) {
  return Reading(path_, [&]() -> absl::StatusOr<RlCheckpointState> {
    RlCheckpointState s;
    c10::IValue v;
    archive_.read("rng", v);
    s.rng = v.toStringRef();
    archive_.read("step", v);
    s.step = v.toInt();
    archive_.read("samples", v);
    s.samples = v.toInt();
    archive_.read("elapsed_seconds", v);
    s.elapsed_seconds = v.toDouble();
    archive_.read("imitation_done", v);
    s.imitation_done = v.toBool();
    archive_.read("entropy_weight", v);
    s.entropy_weight = v.toDouble();
    s.tasks.resize(tasks);
    for (int t = 0; t < tasks; ++t) {
      RlTaskCheckpoint& ts = s.tasks[t];
      std::string p = absl::StrCat("task", t, ".");
      archive_.read(p + "baseline", v);
      ts.baseline = v.toDouble();
      archive_.read(p + "has_baseline", v);
      ts.has_baseline = v.toBool();
      if (archive_.try_read(p + "best_seconds", v)) {
        ts.best.step_seconds = v.toDouble();
        archive_.read(p + "best_source", v);
        ts.best.source = v.toStringRef();
        torch::Tensor placement;
        archive_.read(p + "best_placement", placement);
        ts.best.placement = Placement{FromTensor(placement)};
      }
    }
    // Named columns, or an earlier file's matrix.
    torch::Tensor matrix;
    int64_t rows = 0;
    int columns = 0;
    std::vector<torch::Tensor> named(kColumns);
    if (archive_.try_read(absl::StrCat("curve.", kCurveColumns[0]), named[0])) {
      rows = named[0].numel();
      columns = kColumns;
      for (int c = 1; c < kColumns; ++c) {
        archive_.read(absl::StrCat("curve.", kCurveColumns[c]), named[c]);
        if (named[c].numel() != rows) {
          return absl::DataLossError(absl::StrCat(
              "rl: ", path_, ": its learning curve's columns differ in length"));
        }
      }
      for (torch::Tensor& t : named) t = t.to(torch::kDouble).contiguous();
    } else {
      archive_.read("curve", matrix);
      matrix = matrix.to(torch::kDouble).contiguous();
      columns = matrix.dim() == 2 ? static_cast<int>(matrix.size(1)) : 0;
      if (columns != kColumns && columns != kOldColumns) {
        return absl::DataLossError(absl::StrCat(
            "rl: ", path_, ": its learning curve has another shape"));
      }
      rows = matrix.size(0);
    }
    std::vector<double> x(kColumns);
    for (int64_t r = 0; r < rows; ++r) {
      for (int c = 0; c < columns; ++c) {
        x[c] = named[0].defined() ? named[c].data_ptr<double>()[r]
                                  : matrix.data_ptr<double>()[r * columns + c];
      }
      if (!(x[3] >= 0 && x[3] < static_cast<double>(tasks))) {
        return absl::DataLossError(absl::StrCat(
            "rl: ", path_,
            ": its learning curve names a task it does not have"));
      }
      s.curve.push_back(CurveRow(x.data(), columns));
    }
    return s;
  });
}

absl::Status RlCheckpointReader::LoadModel(torch::nn::Module& model) {
  return Reading(path_, [&]() -> absl::Status {
    torch::serialize::InputArchive model_archive;
    archive_.read("model", model_archive);
    model.load(model_archive);
    return absl::OkStatus();
  });
}

absl::Status RlCheckpointReader::LoadOptimizer(
    torch::optim::Optimizer& optimizer) {
  return Reading(path_, [&]() -> absl::Status {
    torch::serialize::InputArchive optimizer_archive;
    archive_.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    return absl::OkStatus();
  });
}

}  // namespace placer
