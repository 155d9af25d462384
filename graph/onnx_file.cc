#include "graph/onnx_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "graph/constant_folding.h"
#include "graph/graph.h"

namespace placer {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

// Field numbers of onnx.proto3 that the reader below walks into.
constexpr int kModelGraph = 7;        // ModelProto.graph
constexpr int kGraphInitializer = 5;  // GraphProto.initializer
constexpr int kTensorRawData = 9;     // TensorProto.raw_data

uint32_t LengthDelimitedTag(int field) {
  return WireFormatLite::MakeTag(field,
                                 WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
}

// Copies every field of the message being read except `field`, which
// `read` takes (with its length-delimited payload as the stream's limit),
// then merges the copied fields into `message`.
template <typename Read>
bool WalkMessage(CodedInputStream& in, int field,
                 google::protobuf::MessageLite* message, Read read) {
  std::string rest;
  {
    StringOutputStream raw(&rest);
    CodedOutputStream out(&raw);
    const uint32_t wanted = LengthDelimitedTag(field);
    while (uint32_t tag = in.ReadTag()) {
      if (tag != wanted) {
        if (!WireFormatLite::SkipField(&in, tag, &out)) return false;
        continue;
      }
      uint32_t length;
      if (!in.ReadVarint32(&length)) return false;
      CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
      if (!read(in) || in.BytesUntilLimit() != 0) return false;
      in.PopLimit(limit);
    }
    if (!in.ConsumedEntireMessage()) return false;
  }
  return message->MergeFromString(rest);
}

// Parses a ModelProto like ParseFromZeroCopyStream, except that each
// initializer's raw_data is read into a string of exactly its size:
// protobuf grows strings over 50 MB by doubling while it reads them, which
// held 1.6x a VGG-11 export (one 411 MB weight) at the peak.
bool ParseModelWithExactWeights(google::protobuf::io::ZeroCopyInputStream* raw,
                                onnx::ModelProto* model) {
  CodedInputStream in(raw);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  auto read_tensor = [](CodedInputStream& in, onnx::TensorProto* tensor) {
    return WalkMessage(in, kTensorRawData, tensor, [&](CodedInputStream& in) {
      std::string* bytes = tensor->mutable_raw_data();
      const int length = in.BytesUntilLimit();
      bytes->resize(static_cast<size_t>(length));
      return length == 0 || in.ReadRaw(bytes->data(), length);
    });
  };
  auto read_graph = [&](CodedInputStream& in) {
    onnx::GraphProto* graph = model->mutable_graph();
    return WalkMessage(in, kGraphInitializer, graph, [&](CodedInputStream& in) {
      return read_tensor(in, graph->add_initializer());
    });
  };
  return WalkMessage(in, kModelGraph, model, read_graph);
}

// Reads the bytes of a small external tensor (what folding and the
// executor need: masks, shape constants; never weights) from its file
// beside the model, honouring offset and length. A missing or short file
// leaves the tensor external: commands that need its values then say so,
// naming the location; those that need only dims go on.
void LoadSmallExternal(const std::string& dir, onnx::TensorProto* t) {
  if (!IsExternal(*t)) return;
  const int64_t elements =
      ElementCount(absl::MakeConstSpan(t->dims().data(), t->dims().size()));
  const int64_t width = DataTypeBytes(DataTypeFromOnnx(t->data_type()));
  if (elements > kMaxFoldedElements || width <= 0) return;
  std::string location;
  int64_t offset = 0, length = elements * width;
  for (const onnx::StringStringEntryProto& e : t->external_data()) {
    if (e.key() == "location") location = e.value();
    if (e.key() == "offset") offset = std::atoll(e.value().c_str());
    if (e.key() == "length") length = std::atoll(e.value().c_str());
  }
  if (location.empty() || location.find("..") != std::string::npos ||
      location[0] == '/' || length != elements * width || offset < 0) {
    return;
  }
  std::ifstream in(dir + "/" + location, std::ios::binary);
  if (!in || !in.seekg(offset)) return;
  std::string bytes(length, '\0');
  if (!in.read(bytes.data(), length)) return;
  t->clear_external_data();
  t->set_data_location(onnx::TensorProto::DEFAULT);
  t->set_raw_data(std::move(bytes));
}

void LoadSmallExternalData(const std::string& path, onnx::ModelProto* model) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash);
  onnx::GraphProto* g = model->mutable_graph();
  for (onnx::TensorProto& t : *g->mutable_initializer()) {
    LoadSmallExternal(dir, &t);
  }
  for (onnx::NodeProto& node : *g->mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_t()) LoadSmallExternal(dir, a.mutable_t());
    }
  }
}

}  // namespace

bool IsExternal(const onnx::TensorProto& t) {
  return t.data_location() == onnx::TensorProto::EXTERNAL;
}

absl::StatusOr<onnx::ModelProto> ReadOnnxFile(const std::string& path) {
  // Parsed straight from the file: no file-sized string beside the parsed
  // model, so the peak is about the model itself (whose weight bytes the
  // importer then moves, not copies, into its Graph).
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open the file"));
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  if (info.st_size == 0) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the file is empty"));
  }
  onnx::ModelProto model;
  bool parsed;
  {
    google::protobuf::io::FileInputStream stream(fd);
    stream.SetCloseOnDelete(true);
    parsed = ParseModelWithExactWeights(&stream, &model);
  }
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not an ONNX model: ", info.st_size,
        " bytes do not parse as an ONNX ModelProto (the file is truncated "
        "or is not a protobuf)"));
  }
  LoadSmallExternalData(path, &model);
  return model;
}

}  // namespace placer
