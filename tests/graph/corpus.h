// The real-world corpus (tests/fixtures/corpus: PyTorch exports in training
// and eval mode at two opsets, see export_corpus.py there) as tests read
// it: its MANIFEST.tsv and each file imported with the input shapes the
// manifest gives. Tests that use it depend on //tests/fixtures:corpus.
#ifndef PLACER_TESTS_GRAPH_CORPUS_H_
#define PLACER_TESTS_GRAPH_CORPUS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace placer {

struct CorpusEntry {
  std::string file;    // in tests/fixtures/corpus/
  std::string shapes;  // "name=AxB,name2=C"
  int nodes = 0;       // the file's nodes
};

// The manifest's rows, in order; empty when it cannot be read.
std::vector<CorpusEntry> CorpusManifest();

// The entry's file imported with its input shapes.
absl::StatusOr<Graph> ImportCorpusEntry(const CorpusEntry& entry);

}  // namespace placer

#endif  // PLACER_TESTS_GRAPH_CORPUS_H_
