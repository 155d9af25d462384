// What an import is told about a model beyond its file: sizes for its
// symbolic dims, whether weights may be absent, a size limit; and dims
// written as text ("32x3x224x224") for the CLI's and the service's fields.
#ifndef PLACER_GRAPH_IMPORT_OPTIONS_H_
#define PLACER_GRAPH_IMPORT_OPTIONS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer {

// How the caller names ImportOptions' fields in its errors: its flags (the
// CLI) or its request fields (the service). The defaults are the fields'
// own names, so this layer never speaks for a caller; an empty name is an
// option the caller does not offer, and no hint suggests it.
struct ImportOptionNames {
  std::string batch_size = "batch_size";
  std::string input_shapes = "input_shapes";
  std::string dim_values = "dim_values";
  std::string weights_optional = "weights_optional";
};

struct ImportOptions {
  // Sets the first dim of every graph input whose first dim is symbolic;
  // an error when no input has one (the file fixes the batch).
  std::optional<int64_t> batch_size;
  // Full shapes for named graph inputs, overriding the file's.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Symbolic dims by name (dim_param), e.g. {"seq_len", 128}; an error
  // when a name is no input's symbolic dim.
  std::map<std::string, int64_t> dim_values;
  // Accept initializers that carry dims but no data (a file stripped of
  // its weights for planning): they are sized from their dims, like
  // external data. Off: such a file is refused as truncated.
  bool weights_optional = false;
  // Run each attention core (Q·Kᵀ, scale and mask, Softmax, ·V) as one
  // fused op, as training frameworks do (graph/attention_fusion.h); off:
  // op by op as the file writes it.
  bool fuse_attention = false;
  // Run each region of elementwise ops, row reductions and data movement
  // as one kernel (graph/elementwise_fusion.h), as torch.compile and
  // Transformer Engine do; off: op by op as the file writes it.
  bool fuse_elementwise = false;
  // Refuse (ResourceExhausted) a model with more nodes than this before
  // building anything from it; 0: no limit.
  int64_t max_ops = 0;
  // What errors call the options above.
  ImportOptionNames names;
};

// Dims written D0xD1x... ("32x3x224x224"). InvalidArgument naming the dim
// that is not a positive integer; the caller adds where the text came from
// (a flag, a request field).
absl::StatusOr<std::vector<int64_t>> ParseDims(absl::string_view text);

}  // namespace placer

#endif  // PLACER_GRAPH_IMPORT_OPTIONS_H_
