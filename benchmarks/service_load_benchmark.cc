// Load test of the placement service: many concurrent clients asking for
// cached placements over loopback gRPC, against the gRPC health check (a
// call that does no work) under the same load as the baseline.
//
//   bazel run //benchmarks:service_load_benchmark
//
// One server in this process (state in memory); GNMT-4 (6,618 forward ops)
// placed once on p100x4, so each cached answer carries the whole placement
// (about 230 KB). Each benchmark runs `clients` threads over 4 channels,
// each making `calls` calls, closed loop or paced at an offered rate;
// counters are latency percentiles in ms over every call, calls per second,
// and calls that failed (they must be 0).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "placer/service/server.h"
#include "placer/service/service.grpc.pb.h"

namespace placer {
namespace {

using Clock = std::chrono::steady_clock;

struct Fixture {
  std::unique_ptr<PlacementServer> server;
  std::string address;
  proto::PlaceRequest request;
  std::string fingerprint;
};

Fixture& Shared() {
  static Fixture* f = [] {
    auto* f = new Fixture;
    ServerOptions options;
    options.address = "127.0.0.1:0";
    f->server = std::move(*PlacementServer::Start(options));
    f->address = absl::StrCat("127.0.0.1:", f->server->port());
    f->request.mutable_model()->set_zoo("gnmt4");
    f->request.mutable_cluster()->set_preset("p100x4");
    f->request.mutable_options()->set_policy("m_etf");
    auto stub = proto::PlacementService::NewStub(grpc::CreateChannel(
        f->address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    proto::PlaceResponse response;
    grpc::Status s = stub->Place(&context, f->request, &response);
    if (!s.ok()) {
      fprintf(stderr, "placing failed: %s\n", s.error_message().c_str());
      std::abort();
    }
    f->fingerprint = response.fingerprint();
    fprintf(stderr, "placed gnmt4 (%zu bytes of response) as %s\n",
            response.ByteSizeLong(), f->fingerprint.c_str());
    return f;
  }();
  return *f;
}

enum Call { kHealth = 0, kGetPlacement = 1, kCachedPlace = 2 };

const char* Method(Call call) {
  switch (call) {
    case kHealth: return "/grpc.health.v1.Health/Check";
    case kGetPlacement: return "/placer.proto.PlacementService/GetPlacement";
    case kCachedPlace: return "/placer.proto.PlacementService/Place";
  }
  return "";
}

// One unary call over raw bytes: the answer is received whole but not
// parsed, so the latency is the server's and the network's, not the cost of
// parsing a 230 KB message on a client sharing the two cores.
// Returns the answer's size in bytes, or -1 when the call failed.
int64_t RawCall(grpc::GenericStub& generic, const char* method,
                const std::string& request_bytes) {
  grpc::ClientContext context;
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&context, method, grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = s;
                      done = true;
                      cv.notify_one();
                    });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return status.ok() ? static_cast<int64_t>(response.Length()) : -1;
}

// Args: call, clients, calls per client, offered calls per second over all
// clients (0: closed loop, each client calls again as soon as answered).
// Paced latencies count from when a call was due, not when it was sent, so
// a slow answer delaying the next call is not hidden.
void BM_Load(benchmark::State& state) {
  Fixture& f = Shared();
  const Call call = static_cast<Call>(state.range(0));
  const int clients = static_cast<int>(state.range(1));
  const int calls = static_cast<int>(state.range(2));
  const double rate = static_cast<double>(state.range(3));
  constexpr int kChannels = 4;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < kChannels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", c);  // distinct connections
    args.SetMaxReceiveMessageSize(64 << 20);
    channels.push_back(grpc::CreateCustomChannel(
        f.address, grpc::InsecureChannelCredentials(), args));
  }
  std::string request_bytes;
  if (call == kGetPlacement) {
    proto::GetPlacementRequest get;
    get.set_fingerprint(f.fingerprint);
    request_bytes = get.SerializeAsString();
  } else if (call == kCachedPlace) {
    request_bytes = f.request.SerializeAsString();
  }
  for (auto _ : state) {
    std::vector<std::vector<double>> latencies(clients);
    std::vector<int> failures(clients, 0);
    Clock::time_point start = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&, t] {
        grpc::GenericStub generic(channels[t % kChannels]);
        for (int i = 0; i < calls; ++i) {
          Clock::time_point due = Clock::now();
          if (rate > 0) {
            // Client t calls at t/rate, (t + clients)/rate, ...
            due = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(
                                  (t + static_cast<double>(i) * clients) / rate));
            std::this_thread::sleep_until(due);
          }
          int64_t bytes = RawCall(generic, Method(call), request_bytes);
          // A placement answer is the whole placement, not a few bytes.
          bool ok = bytes >= (call == kHealth ? 0 : 100000);
          latencies[t].push_back(
              std::chrono::duration<double, std::milli>(Clock::now() - due)
                  .count());
          if (!ok) ++failures[t];
        }
      });
    }
    for (std::thread& t : threads) t.join();
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> all;
    int failed = 0;
    for (int t = 0; t < clients; ++t) {
      all.insert(all.end(), latencies[t].begin(), latencies[t].end());
      failed += failures[t];
    }
    std::sort(all.begin(), all.end());
    auto pct = [&](double p) {
      return all[std::min(all.size() - 1,
                          static_cast<size_t>(p * (all.size() - 1) + 0.5))];
    };
    state.counters["p50_ms"] = pct(0.50);
    state.counters["p99_ms"] = pct(0.99);
    state.counters["max_ms"] = all.back();
    state.counters["calls_per_s"] = all.size() / seconds;
    state.counters["failed"] = failed;
  }
  state.SetLabel(call == kHealth         ? "health check (baseline)"
                 : call == kGetPlacement ? "GetPlacement"
                                         : "Place, cached");
}

BENCHMARK(BM_Load)
    ->ArgNames({"call", "clients", "calls", "rate"})
    // Closed loop: saturation throughput and latency.
    ->Args({kHealth, 64, 300, 0})
    ->Args({kGetPlacement, 64, 300, 0})
    ->Args({kCachedPlace, 64, 300, 0})
    // Paced: 64 clients together offering 500 calls per second.
    ->Args({kHealth, 64, 40, 500})
    ->Args({kGetPlacement, 64, 40, 500})
    ->Args({kCachedPlace, 64, 40, 500})
    // Four times that.
    ->Args({kHealth, 64, 40, 2000})
    ->Args({kGetPlacement, 64, 40, 2000})
    ->Args({kCachedPlace, 64, 40, 2000})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace placer

BENCHMARK_MAIN();
