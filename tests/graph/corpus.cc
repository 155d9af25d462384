#include "tests/graph/corpus.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "graph/import_options.h"
#include "graph/onnx_import.h"

namespace placer {
namespace {

constexpr char kDir[] = "tests/fixtures/corpus/";

}  // namespace

std::vector<CorpusEntry> CorpusManifest() {
  std::ifstream in(std::string(kDir) + "MANIFEST.tsv");
  std::vector<CorpusEntry> entries;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> cols = absl::StrSplit(line, '\t');
    if (cols.size() != 3) continue;
    entries.push_back({cols[0], cols[1], std::stoi(cols[2])});
  }
  return entries;
}

absl::StatusOr<Graph> ImportCorpusEntry(const CorpusEntry& entry) {
  ImportOptions options;
  for (absl::string_view shape : absl::StrSplit(entry.shapes, ',')) {
    std::vector<std::string> name_dims = absl::StrSplit(shape, '=');
    if (name_dims.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("bad shape ", shape));
    }
    absl::StatusOr<std::vector<int64_t>> dims = ParseDims(name_dims[1]);
    if (!dims.ok()) return dims.status();
    options.input_shapes[name_dims[0]] = *dims;
  }
  return ImportOnnxFile(kDir + entry.file, options);
}

}  // namespace placer
