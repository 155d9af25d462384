// The shapes of a model's graph inputs, fixed from the file and the import
// options that size them (a batch, full shapes by input name, values of
// named symbolic dims). For the importer (it reads ONNX types).
#ifndef PLACER_GRAPH_INPUT_SHAPES_H_
#define PLACER_GRAPH_INPUT_SHAPES_H_

#include <map>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "graph/import_options.h"
#include "graph/onnx_values.h"

namespace placer {

// Every graph input of `graph` that is not an initializer (IR < 4 files
// list those as inputs too), with its shape fully known: the file's, with
// options.input_shapes replacing it, named symbolic dims taking
// options.dim_values and a symbolic first dim options.batch_size.
// InvalidArgument, prefixed "<source>: ", when an option names no input or
// symbolic dim, a batch changes nothing, or a shape stays unresolved (the
// message says which option fixes it).
absl::StatusOr<std::map<std::string, ShapeInfo>> FixInputShapes(
    const onnx::GraphProto& graph,
    const absl::flat_hash_set<std::string>& initializer_names,
    const ImportOptions& options, const std::string& source);

}  // namespace placer

#endif  // PLACER_GRAPH_INPUT_SHAPES_H_
