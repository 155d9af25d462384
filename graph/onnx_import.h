// Imports an ONNX model into placer's Graph.
//
// Contract:
//  - Parses the file, fixes the dynamic dims the user named (ImportOptions),
//    runs ONNX shape inference, and folds the shape-computation chains that
//    exporters emit (Shape -> Gather -> Concat -> Reshape and friends) by
//    evaluating them, re-running inference until every shape resolves.
//    The folded nodes (and Constant nodes) leave the graph, their outputs
//    constants with data (graph.h, WithoutFoldedOps).
//  - Initializers stored as external data are sized from their dims; their
//    contents are not read, except, from a file (ImportOnnxFile), small
//    tensors (at most kMaxFoldedElements elements: masks and shape
//    constants, never weights) read from beside the model. A missing or
//    short data file leaves them unread, with their location kept
//    (TensorData::external_location) for the error of whatever needs them.
//  - Every error names the file and, where there is one, the node (by key,
//    type and index) or the tensor and dim: not a protobuf, truncated file,
//    cycle, undefined input, duplicate output name, unresolved shape, empty
//    graph.
//  - Ops of unknown type are kept with CostStatus::kUnknown, never dropped.
//    Tensors downstream of them may keep unknown shapes; any other tensor
//    whose shape does not resolve is an error.
#ifndef PLACER_GRAPH_ONNX_IMPORT_H_
#define PLACER_GRAPH_ONNX_IMPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/import_options.h"

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace placer {

absl::StatusOr<Graph> ImportOnnxFile(const std::string& path,
                                     const ImportOptions& options);

// `source` names the model in error messages (a path or "zoo:NAME").
absl::StatusOr<Graph> ImportOnnxBytes(const std::string& bytes,
                                      const std::string& source,
                                      const ImportOptions& options);

absl::StatusOr<Graph> ImportOnnxModel(const onnx::ModelProto& model,
                                      const std::string& source,
                                      const ImportOptions& options);
// Same, moving the weights' bytes out of `model` rather than copying them.
absl::StatusOr<Graph> ImportOnnxModel(onnx::ModelProto&& model,
                                      const std::string& source,
                                      const ImportOptions& options);

}  // namespace placer

#endif  // PLACER_GRAPH_ONNX_IMPORT_H_
