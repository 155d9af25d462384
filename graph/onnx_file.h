// Reading an ONNX file as exporters write it: the ModelProto parsed with
// each weight's bytes read into a string of exactly its size (protobuf
// grows large strings by doubling while it reads them), and small tensors
// kept in external data files (masks, shape constants; never weights)
// read from beside the model.
//
// Contract: ReadOnnxFile returns the model, or NOT_FOUND / INVALID_ARGUMENT
// naming the path (cannot open, not a regular file, empty, does not parse).
// External tensors of at most kMaxFoldedElements elements are read from
// their location relative to the model's directory (offset and length
// honoured; locations outside it are left alone); a missing or short data
// file leaves a tensor external, never an error here.
#ifndef PLACER_GRAPH_ONNX_FILE_H_
#define PLACER_GRAPH_ONNX_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace placer {

absl::StatusOr<onnx::ModelProto> ReadOnnxFile(const std::string& path);

// Whether a tensor's bytes are in an external data file.
bool IsExternal(const onnx::TensorProto& t);

}  // namespace placer

#endif  // PLACER_GRAPH_ONNX_FILE_H_
