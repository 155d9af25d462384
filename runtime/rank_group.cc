#include "runtime/rank_group.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_helpers.h"
#include "base/torch_status.h"

namespace placer {
namespace {

constexpr char kFailureKey[] = "placer/failure";
// id, dtype, rank, up to 12 dims, and last the sender's steady clock (ns)
// when the send began.
constexpr int kHeaderWords = 16;
constexpr int kMaxDims = kHeaderWords - 4;
constexpr int kSentAtWord = kHeaderWords - 1;
// A tensor of at most this many bytes rides in its header's message: one
// message instead of two (a placed zoo:chain step as 2 ranks, all values
// tiny: 3.7 ms with two messages each, 2.3 ms with one).
constexpr int64_t kInlineBytes = 4096;
constexpr int64_t kHeaderBytes = kHeaderWords * 8 + kInlineBytes;

std::string FirstLine(const std::string& message) {
  size_t end = message.find('\n');
  return end == std::string::npos ? message : message.substr(0, end);
}

// A c10d/Gloo exception as a status about `peer` ("rank 1").
absl::Status PeerError(const std::exception& e, const std::string& about) {
  std::string what = FirstLine(e.what());
  if (absl::StrContains(what, "Timed out") ||
      absl::StrContains(what, "timed out") ||
      absl::StrContains(what, "timeout")) {
    return absl::DeadlineExceededError(
        absl::StrCat(about, " stalled (no answer within the timeout): ", what));
  }
  return absl::UnavailableError(absl::StrCat(about, " is gone: ", what));
}

}  // namespace

struct RankGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::vector<c10::intrusive_ptr<c10d::ProcessGroupGloo>> subgroups;
  std::vector<std::string> subgroup_names;
  // Per subgroup: who a failure of its collectives is about, as an error
  // names it (the other member, or "one of ranks ..." of several).
  std::vector<std::string> subgroup_peers;
  std::mutex mu;
  std::set<c10::intrusive_ptr<c10d::Work>> pending;
  bool aborted = false;

  // Waits for `work`, which stays abortable meanwhile.
  absl::Status Wait(const c10::intrusive_ptr<c10d::Work>& work,
                    const std::string& about) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (aborted) {
        work->abort();
        return absl::AbortedError("aborted after a failure");
      }
      pending.insert(work);
    }
    absl::Status s;
    try {
      if (!work->wait()) s = absl::AbortedError("aborted after a failure");
    } catch (const std::exception& e) {
      s = PeerError(e, about);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      pending.erase(work);
      if (s.ok() && aborted) s = absl::AbortedError("aborted after a failure");
    }
    // The work holds its tensors too, and Gloo's thread lets it go just
    // after completing it: waiting for that (the caller's reference the
    // last), the tensors are freed by the caller's thread, whose frees the
    // executor's allocation tracking sees (frees on Gloo's threads it does
    // not, and would count as held).
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (s.ok() && work.use_count() > 1 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    return s;
  }
};

absl::StatusOr<std::pair<std::string, int>> ParseHostPort(
    const std::string& text) {
  size_t colon = text.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not HOST:PORT (PORT 0-65535)"));
  }
  return std::make_pair(text.substr(0, colon), port);
}

RankGroup::RankGroup(const RankGroupOptions& options)
    : options_(options), impl_(std::make_unique<Impl>()) {}

RankGroup::~RankGroup() {
  if (impl_ != nullptr) AbortPending();
}

absl::StatusOr<std::shared_ptr<RankGroup>> RankGroup::Create(
    const RankGroupOptions& options) {
  if (options.world_size < 1 || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " is not in [0, world size ",
                     options.world_size, ")"));
  }
  if (!(options.timeout_seconds > 0)) {
    return absl::InvalidArgumentError("the rank timeout must be positive");
  }
  std::shared_ptr<RankGroup> group(new RankGroup(options));
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(options.timeout_seconds * 1000));
  const std::string master =
      absl::StrCat(options.master_host, ":", options.master_port);
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(options.master_port);
    so.isServer = options.rank == 0;
    so.waitWorkers = false;
    so.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(options.master_host, so);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        options.rank == 0 ? "cannot serve the rendezvous on "
                          : "cannot reach the master (rank 0) at ",
        master, " within ", options.timeout_seconds, " s: ",
        FirstLine(e.what())));
  }
  group->port_ = store->getPort();
  group->impl_->store = store;
  if (options.rank == 0) {
    try {
      for (const auto& [key, value] : options.initial_values) {
        store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      }
    } catch (const std::exception& e) {
      return PeerError(e, "the store");
    }
  }
  if (options.rank == 0 && options.on_listening) options.on_listening(group->port_);
  try {
    const std::string world = absl::StrCat(options.world_size);
    if (options.rank == 0) {
      store->set("placer/world_size",
                 std::vector<uint8_t>(world.begin(), world.end()));
    }
    std::vector<uint8_t> theirs = store->get("placer/world_size");
    if (std::string(theirs.begin(), theirs.end()) != world) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", options.rank, " was started with world size ", world,
          " but the master at ", master, " runs ",
          std::string(theirs.begin(), theirs.end()), " ranks"));
    }
    if (store->add(absl::StrCat("placer/rank/", options.rank), 1) > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", options.rank, " joined the master at ", master, " twice"));
    }
    std::vector<std::string> keys;
    for (int r = 0; r < options.world_size; ++r) {
      keys.push_back(absl::StrCat("placer/rank/", r));
    }
    try {
      store->wait(keys, timeout);
    } catch (const std::exception&) {
      std::vector<std::string> missing;
      for (int r = 0; r < options.world_size; ++r) {
        if (!store->check({keys[r]})) missing.push_back(absl::StrCat(r));
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "rank(s) ", absl::StrJoin(missing, ", "), " of ", options.world_size,
          " did not join the master at ", master, " within ",
          options.timeout_seconds, " s"));
    }
    auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
    gloo->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(options.bind_host));
    group->impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("placer/gloo", store),
        options.rank, options.world_size, gloo);
  } catch (const std::exception& e) {
    return PeerError(e, absl::StrCat("the rendezvous at ", master));
  }
  return group;
}

absl::StatusOr<std::string> RankGroup::ReadFromMaster(
    const std::string& host, int port, const std::string& key,
    double timeout_seconds) {
  const std::string master = absl::StrCat(host, ":", port);
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(port);
    so.isServer = false;
    so.waitWorkers = false;
    so.timeout = std::chrono::milliseconds(
        static_cast<int64_t>(timeout_seconds * 1000));
    c10d::TCPStore store(host, so);
    std::vector<uint8_t> v = store.get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot read '", key, "' from the master (rank 0) at ", master,
        " within ", timeout_seconds, " s: ", FirstLine(e.what())));
  }
}

absl::Status RankGroup::Finish() {
  try {
    impl_->store->add("placer/finished", 1);
    if (options_.rank != 0) return absl::OkStatus();
    const auto start = std::chrono::steady_clock::now();
    while (impl_->store->add("placer/finished", 0) < options_.world_size) {
      if (std::chrono::steady_clock::now() - start >
          std::chrono::milliseconds(
              static_cast<int64_t>(options_.timeout_seconds * 1000))) {
        return absl::DeadlineExceededError(absl::StrCat(
            "not every rank finished within ", options_.timeout_seconds,
            " s of rank 0"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } catch (const std::exception& e) {
    return PeerError(e, "the master (rank 0)");
  }
  return absl::OkStatus();
}

absl::Status RankGroup::Put(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    return PeerError(e, "the master (rank 0)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RankGroup::Get(const std::string& key) {
  try {
    std::vector<uint8_t> v = impl_->store->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    return PeerError(e, absl::StrCat("the master (rank 0), asked for '", key,
                                     "',"));
  }
}

absl::Status RankGroup::SendTensor(const torch::Tensor& tensor, int64_t id,
                                   int dst_rank, int channel) {
  const std::string about = absl::StrCat("rank ", dst_rank);
  const auto start = std::chrono::steady_clock::now();
  torch::Tensor data;
  std::vector<at::Tensor> header(1);
  try {
    data = tensor.to(torch::kCPU).contiguous();
    if (data.dim() > kMaxDims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a tensor of rank ", data.dim(), " cannot be sent (at most ",
          kMaxDims, " dims)"));
    }
    header[0] = torch::zeros({kHeaderBytes}, torch::kByte);
    int64_t* h = reinterpret_cast<int64_t*>(header[0].data_ptr<uint8_t>());
    h[0] = id;
    h[kSentAtWord] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         start.time_since_epoch())
                         .count();
    h[1] = static_cast<int64_t>(data.scalar_type());
    h[2] = data.dim();
    for (int64_t k = 0; k < data.dim(); ++k) h[3 + k] = data.size(k);
    const int64_t bytes = data.numel() * data.element_size();
    if (bytes <= kInlineBytes && bytes > 0) {
      std::memcpy(header[0].data_ptr<uint8_t>() + kHeaderWords * 8,
                  data.data_ptr(), bytes);
    }
  } catch (const std::exception& e) {
    return TorchErrorStatus(e, "preparing a send: ");
  }
  try {
    c10::intrusive_ptr<c10d::Work> w = impl_->group->send(header, dst_rank, channel);
    RETURN_IF_ERROR(impl_->Wait(w, about));
    if (data.numel() * data.element_size() <= kInlineBytes) {
      return absl::OkStatus();
    }
    std::vector<at::Tensor> payload{data};
    w = impl_->group->send(payload, dst_rank, channel);
    return impl_->Wait(w, about);
  } catch (const std::exception& e) {
    return PeerError(e, about);
  }
}

absl::StatusOr<std::pair<int64_t, torch::Tensor>> RankGroup::RecvTensor(
    int src_rank, int channel, std::chrono::steady_clock::time_point* sent_at) {
  const std::string about = absl::StrCat("rank ", src_rank);
  try {
    std::vector<at::Tensor> header{torch::zeros({kHeaderBytes}, torch::kByte)};
    c10::intrusive_ptr<c10d::Work> w = impl_->group->recv(header, src_rank, channel);
    RETURN_IF_ERROR(impl_->Wait(w, about));
    const int64_t* h =
        reinterpret_cast<const int64_t*>(header[0].data_ptr<uint8_t>());
    const int64_t dims = h[2];
    if (dims < 0 || dims > kMaxDims || h[1] < 0 ||
        h[1] >= static_cast<int64_t>(c10::ScalarType::NumOptions)) {
      return absl::DataLossError(absl::StrCat(
          "a malformed message header from ", about, " on channel ", channel));
    }
    std::vector<int64_t> shape;
    for (int64_t k = 0; k < dims; ++k) shape.push_back(h[3 + k]);
    torch::Tensor data = torch::empty(
        shape, torch::TensorOptions().dtype(static_cast<c10::ScalarType>(h[1])));
    const int64_t bytes = data.numel() * data.element_size();
    if (bytes > kInlineBytes) {
      std::vector<at::Tensor> payload{data};
      w = impl_->group->recv(payload, src_rank, channel);
      RETURN_IF_ERROR(impl_->Wait(w, about));
    } else if (bytes > 0) {
      std::memcpy(data.data_ptr(), header[0].data_ptr<uint8_t>() + kHeaderWords * 8,
                  bytes);
    }
    if (sent_at != nullptr) {
      *sent_at = std::chrono::steady_clock::time_point(
          std::chrono::nanoseconds(h[kSentAtWord]));
    }
    return std::make_pair(h[0], data);
  } catch (const std::exception& e) {
    return PeerError(e, about);
  }
}

namespace {

absl::Status Reduce(c10d::ProcessGroupGloo& group, std::vector<double>* values,
                    c10d::ReduceOp op) {
  if (values->empty()) return absl::OkStatus();
  std::vector<at::Tensor> t{
      torch::from_blob(values->data(), {static_cast<int64_t>(values->size())},
                       torch::kDouble)
          .clone()};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  try {
    c10::intrusive_ptr<c10d::Work> w = group.allreduce(t, options);
    w->wait();
  } catch (const std::exception& e) {
    return PeerError(e, "a rank, in the end-of-step exchange,");
  }
  std::copy(t[0].data_ptr<double>(), t[0].data_ptr<double>() + values->size(),
            values->begin());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> RankGroup::AddSubgroup(const std::vector<int>& ranks,
                                           const std::string& name) {
  const auto me = std::find(ranks.begin(), ranks.end(), options_.rank);
  if (me == ranks.end() || !std::is_sorted(ranks.begin(), ranks.end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "subgroup ", name, " of ranks ", absl::StrJoin(ranks, ", "),
        ": not ascending, or rank ", options_.rank, " is not among them"));
  }
  try {
    auto gloo = c10d::ProcessGroupGloo::Options::create(
        std::chrono::milliseconds(
            static_cast<int64_t>(options_.timeout_seconds * 1000)));
    gloo->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(options_.bind_host));
    impl_->subgroups.push_back(c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("placer/subgroup/" + name,
                                               impl_->store),
        static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()),
        gloo));
    impl_->subgroup_names.push_back(
        absl::StrCat(name, " (ranks ", absl::StrJoin(ranks, ", "), ")"));
    std::vector<int> others;
    for (int r : ranks) {
      if (r != options_.rank) others.push_back(r);
    }
    impl_->subgroup_peers.push_back(absl::StrCat(
        others.size() == 1 ? "rank " : "one of ranks ",
        absl::StrJoin(others, ", "), " of subgroup ", name));
  } catch (const std::exception& e) {
    return PeerError(e, absl::StrCat("a rank of subgroup ", name, " (ranks ",
                                     absl::StrJoin(ranks, ", "), ")"));
  }
  return static_cast<int>(impl_->subgroups.size()) - 1;
}

absl::StatusOr<std::vector<torch::Tensor>> RankGroup::AllGather(
    int subgroup, const torch::Tensor& tensor) {
  if (subgroup < 0 || subgroup >= static_cast<int>(impl_->subgroups.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("no subgroup ", subgroup));
  }
  // By c10d's all-to-all, this member's tensor to each other member: Gloo's
  // all-gather stages every member's part in one flat buffer and copies it
  // out into the outputs, twice the memory of the parts (a bucket of
  // gradients is most of a replica's memory).
  const int size = impl_->subgroups[subgroup]->getSize();
  const int me = impl_->subgroups[subgroup]->getRank();
  const torch::Tensor cpu = tensor.to(torch::kCPU).contiguous();
  const int64_t bytes = cpu.numel() * cpu.element_size();
  std::vector<torch::Tensor> to(size);
  std::vector<int64_t> from_bytes(size, 0);
  for (int m = 0; m < size; ++m) {
    if (m == me) continue;
    to[m] = cpu;
    from_bytes[m] = bytes;
  }
  ASSIGN_OR_RETURN(std::vector<torch::Tensor> from,
                   AllToAll(subgroup, to, from_bytes));
  std::vector<torch::Tensor> parts;
  for (int m = 0; m < size; ++m) {
    parts.push_back(m == me ? cpu
                            : from[m].view(cpu.scalar_type()).reshape(
                                  cpu.sizes()));
  }
  return parts;
}

class PendingCollective {
 public:
  c10::intrusive_ptr<c10d::Work> work;
  at::Tensor input, output;
  std::vector<int64_t> from_bytes;
  std::string about;
};

absl::StatusOr<std::vector<torch::Tensor>> RankGroup::AllToAll(
    int subgroup, const std::vector<torch::Tensor>& to,
    const std::vector<int64_t>& from_bytes) {
  ASSIGN_OR_RETURN(std::shared_ptr<PendingCollective> pending,
                   StartAllToAll(subgroup, to, from_bytes));
  return FinishAllToAll(*pending);
}

absl::StatusOr<std::shared_ptr<PendingCollective>> RankGroup::StartAllToAll(
    int subgroup, const std::vector<torch::Tensor>& to,
    const std::vector<int64_t>& from_bytes) {
  if (subgroup < 0 || subgroup >= static_cast<int>(impl_->subgroups.size())) {
    return absl::InvalidArgumentError(absl::StrCat("no subgroup ", subgroup));
  }
  c10d::ProcessGroupGloo& group = *impl_->subgroups[subgroup];
  const int size = group.getSize();
  auto pending = std::make_shared<PendingCollective>();
  pending->about = impl_->subgroup_peers[subgroup];
  if (static_cast<int>(to.size()) != size ||
      static_cast<int>(from_bytes.size()) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("an all-to-all over ", to.size(), " and ",
                     from_bytes.size(), " parts in subgroup ",
                     impl_->subgroup_names[subgroup], " of ", size));
  }
  // One input of every part (the part itself when it is the only one, as
  // a two-member all-gather's is: no copy) and one output; parts at an
  // offset that no dtype's view would accept are copied out.
  std::vector<int64_t> send_counts;
  std::vector<torch::Tensor> send_parts;
  for (int m = 0; m < size; ++m) {
    const int64_t bytes =
        to[m].defined() ? to[m].numel() * to[m].element_size() : 0;
    if (bytes > 0) {
      send_parts.push_back(
          to[m].to(torch::kCPU).contiguous().reshape({-1}).view(torch::kByte));
    }
    send_counts.push_back(bytes);
  }
  pending->input = send_parts.empty()       ? torch::empty({0}, torch::kByte)
                   : send_parts.size() == 1 ? send_parts[0]
                                            : torch::cat(send_parts);
  send_parts.clear();
  pending->from_bytes = from_bytes;
  int64_t total = 0;
  for (int64_t n : from_bytes) total += n;
  pending->output = torch::empty({total}, torch::kByte);
  try {
    // Copies: c10d's work takes (moves) the counts it is given.
    std::vector<int64_t> output_counts = from_bytes;
    std::vector<int64_t> input_counts = send_counts;
    pending->work = group.alltoall_base(pending->output, pending->input,
                                        output_counts, input_counts);
  } catch (const std::exception& e) {
    return PeerError(e, pending->about);
  }
  // Abortable from now on (Wait keeps it so until it is done).
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->aborted) {
    pending->work->abort();
    return absl::AbortedError("aborted after a failure");
  }
  impl_->pending.insert(pending->work);
  return pending;
}

absl::StatusOr<std::vector<torch::Tensor>> RankGroup::FinishAllToAll(
    PendingCollective& pending) {
  if (!pending.work) {
    return absl::FailedPreconditionError("an all-to-all finished twice");
  }
  absl::Status waited;
  try {
    waited = impl_->Wait(pending.work, pending.about);
  } catch (const std::exception& e) {
    waited = PeerError(e, pending.about);
  }
  pending.work.reset();
  pending.input = torch::Tensor();
  if (!waited.ok()) return waited;
  std::vector<torch::Tensor> from;
  int64_t at = 0;
  for (int64_t bytes : pending.from_bytes) {
    torch::Tensor part = pending.output.narrow(0, at, bytes);
    from.push_back(at % 8 == 0 ? part : part.clone());
    at += bytes;
  }
  pending.output = torch::Tensor();
  return from;
}

absl::Status RankGroup::SumAcrossRanks(std::vector<double>* values) {
  return Reduce(*impl_->group, values, c10d::ReduceOp::SUM);
}

absl::Status RankGroup::MaxAcrossRanks(std::vector<double>* values) {
  return Reduce(*impl_->group, values, c10d::ReduceOp::MAX);
}

absl::StatusOr<bool> RankGroup::Has(const std::string& key) {
  try {
    return impl_->store->check({key});
  } catch (const std::exception& e) {
    return PeerError(e, "the master (rank 0)");
  }
}

absl::Status RankGroup::Delete(const std::string& key) {
  try {
    impl_->store->deleteKey(key);
  } catch (const std::exception& e) {
    return PeerError(e, "the master (rank 0)");
  }
  return absl::OkStatus();
}

void RankGroup::PublishFailure(const absl::Status& failure) {
  try {
    // "CODE:rank R: message"; compareSet with an empty expected value
    // writes only when the key is absent.
    std::string text = absl::StrCat(static_cast<int>(failure.code()), ":rank ",
                                    options_.rank, ": ", failure.message());
    impl_->store->compareSet(kFailureKey, {},
                             std::vector<uint8_t>(text.begin(), text.end()));
  } catch (const std::exception&) {
    // The master is gone: every rank finds that out on its own.
  }
}

std::optional<absl::Status> RankGroup::PublishedFailure() {
  try {
    if (!impl_->store->check({kFailureKey})) return std::nullopt;
    std::vector<uint8_t> v = impl_->store->get(kFailureKey);
    std::string text(v.begin(), v.end());
    size_t colon = text.find(':');
    int code = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(text.substr(0, colon), &code) || code <= 0 ||
        code > 16) {
      return absl::UnknownError(text);
    }
    return absl::Status(static_cast<absl::StatusCode>(code),
                        text.substr(colon + 1));
  } catch (const std::exception& e) {
    return PeerError(e, "the master (rank 0)");
  }
}

void RankGroup::AbortPending() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->aborted = true;
  for (const auto& w : impl_->pending) {
    try {
      w->abort();
    } catch (const std::exception&) {
    }
  }
}

absl::StatusOr<std::vector<int>> RanksOfDevices(
    const std::vector<int>& process_of_device, int world_size) {
  const int n = static_cast<int>(process_of_device.size());
  std::vector<int> ranks(n);
  std::vector<int> devices_of_rank(world_size, 0);
  for (int d = 0; d < n; ++d) {
    int p = process_of_device[d];
    if (p >= world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", d, " is given process ", p, " but the run has ",
          world_size, " rank(s)"));
    }
    ranks[d] = p >= 0 ? p : static_cast<int>(static_cast<int64_t>(d) *
                                             world_size / n);
    ++devices_of_rank[ranks[d]];
  }
  for (int r = 0; r < world_size; ++r) {
    if (devices_of_rank[r] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, " of ", world_size, " would drive no device (the cluster has ",
          n, ")"));
    }
  }
  return ranks;
}

}  // namespace placer
