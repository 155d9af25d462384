#include "policies/metis_graph.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/base/const_init.h"
#include "absl/synchronization/mutex.h"

namespace placer {

std::vector<idx_t> ScaledWeights(const std::vector<double>& values) {
  double top = 0;
  for (double v : values) top = std::max(top, v);
  std::vector<idx_t> out;
  out.reserve(values.size());
  for (double v : values) {
    out.push_back(top > 0 ? 1 + static_cast<idx_t>(std::llround(v / top * 1e6))
                          : 1);
  }
  return out;
}

MetisGraph ToMetisGraph(const GroupGraph& units) {
  MetisGraph g;
  std::vector<double> bytes;
  for (int u = 0; u < units.num_units(); ++u) {
    for (const GroupEdge& e : units.neighbours(u)) {
      g.adjncy.push_back(e.to);
      bytes.push_back(static_cast<double>(e.bytes));
    }
    g.xadj.push_back(static_cast<idx_t>(g.adjncy.size()));
  }
  g.adjwgt = ScaledWeights(bytes);
  return g;
}

namespace {

// Guards stdout's descriptor while METIS runs.
ABSL_CONST_INIT absl::Mutex metis_stdout_mutex(absl::kConstInit);

// While alive, file descriptor 1 is a copy of 2 (stdout's buffered bytes
// flushed first, and again before it is restored).
class StdoutToStderr {
 public:
  StdoutToStderr() {
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    if (saved_ >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      close(saved_);
      saved_ = -1;
    }
  }
  ~StdoutToStderr() {
    std::fflush(stdout);
    if (saved_ < 0) return;
    dup2(saved_, STDOUT_FILENO);
    close(saved_);
  }
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace

int PartGraphKway(MetisGraph& graph, idx_t ncon, std::vector<idx_t>& vwgt,
                  idx_t nparts, std::vector<real_t>& tpwgts,
                  std::vector<real_t>& ubvec, idx_t* options,
                  std::vector<idx_t>* part) {
  idx_t nvtxs = static_cast<idx_t>(graph.xadj.size()) - 1;
  idx_t objval = 0;
  part->assign(nvtxs, 0);
  absl::MutexLock lock(&metis_stdout_mutex);
  const StdoutToStderr redirect;
  return METIS_PartGraphKway(&nvtxs, &ncon, graph.xadj.data(),
                             graph.adjncy.data(), vwgt.data(), nullptr,
                             graph.edge_weights(), &nparts, tpwgts.data(),
                             ubvec.data(), options, &objval, part->data());
}

}  // namespace placer
