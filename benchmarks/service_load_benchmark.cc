// Load test of the placement service: many concurrent clients asking for
// cached placements over loopback gRPC, against the gRPC health check (a
// call that does no work) under the same load as the baseline; each in
// plaintext and over TLS with a bearer token checked on every call.
//
//   bazel run //benchmarks:service_load_benchmark
//
// Two servers in this process (state in memory): one plaintext, one with
// TLS (certificates made at start, EC P-256) and an access file whose
// client holds the read and place roles. GNMT-4 (6,618 forward ops) placed
// once on each on p100x4, so each cached answer carries the whole placement
// (about 230 KB). Each benchmark runs `clients` threads over 4 channels,
// each making `calls` calls, closed loop or paced at an offered rate;
// counters are latency percentiles in ms over every call, calls per second,
// and calls that failed (they must be 0).
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "placer/service/access_policy.h"
#include "placer/service/credentials.h"
#include "placer/service/server.h"
#include "placer/service/service.grpc.pb.h"
#include "tests/placer/test_certificates.h"

namespace placer {
namespace {

using Clock = std::chrono::steady_clock;

enum Security { kPlaintext = 0, kTlsToken = 1 };

struct Server {
  std::unique_ptr<PlacementServer> server;
  std::string address;
  std::string fingerprint;
  ClientTlsFiles tls;  // not enabled for plaintext
  std::string token;
};

struct Fixture {
  Server servers[2];  // by Security
  proto::PlaceRequest request;
  std::unique_ptr<test::TestCertificateAuthority> ca;
};

std::shared_ptr<grpc::Channel> NewChannel(const Server& s,
                                          grpc::ChannelArguments args) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      NewChannelCredentials(s.tls, s.token, &args);
  if (!credentials.ok()) {
    fprintf(stderr, "credentials: %s\n",
            std::string(credentials.status().message()).c_str());
    std::abort();
  }
  return grpc::CreateCustomChannel(s.address, *credentials, args);
}

void StartAndPlace(Server& s, ServerOptions options,
                   const proto::PlaceRequest& request) {
  options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<PlacementServer>> started =
      PlacementServer::Start(options);
  if (!started.ok()) {
    fprintf(stderr, "server: %s\n",
            std::string(started.status().message()).c_str());
    std::abort();
  }
  s.server = std::move(*started);
  s.address = absl::StrCat("127.0.0.1:", s.server->port());
  auto stub =
      proto::PlacementService::NewStub(NewChannel(s, grpc::ChannelArguments()));
  grpc::ClientContext context;
  proto::PlaceResponse response;
  grpc::Status status = stub->Place(&context, request, &response);
  if (!status.ok()) {
    fprintf(stderr, "placing failed: %s\n", status.error_message().c_str());
    std::abort();
  }
  s.fingerprint = response.fingerprint();
  fprintf(stderr, "placed gnmt4 (%zu bytes of response) as %s%s\n",
          response.ByteSizeLong(), s.fingerprint.c_str(),
          s.tls.enabled() ? " over TLS with a token" : "");
}

Fixture& Shared() {
  static Fixture* f = [] {
    auto* f = new Fixture;
    f->request.mutable_model()->set_zoo("gnmt4");
    f->request.mutable_cluster()->set_preset("p100x4");
    f->request.mutable_options()->set_policy("m_etf");
    StartAndPlace(f->servers[kPlaintext], ServerOptions(), f->request);

    char dir_template[] = "/tmp/placer_load_XXXXXX";
    const std::string dir = mkdtemp(dir_template);
    f->ca = std::make_unique<test::TestCertificateAuthority>(dir, "ca");
    test::PemFiles pem = f->ca->IssueServer("server");
    Server& secure = f->servers[kTlsToken];
    secure.token = *NewToken();
    std::ofstream(dir + "/access")
        << "bench read,place " << TokenCredential(secure.token) << "\n";
    secure.tls.ca = f->ca->ca_file();
    ServerOptions options;
    options.tls.certificate = pem.certificate;
    options.tls.private_key = pem.private_key;
    options.access_file = dir + "/access";
    StartAndPlace(secure, options, f->request);
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
  const Security security = static_cast<Security>(state.range(4));
  const Server& server = f.servers[security];
  constexpr int kChannels = 4;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < kChannels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", c);  // distinct connections
    args.SetMaxReceiveMessageSize(64 << 20);
    channels.push_back(NewChannel(server, args));
  }
  std::string request_bytes;
  if (call == kGetPlacement) {
    proto::GetPlacementRequest get;
    get.set_fingerprint(server.fingerprint);
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
  state.SetLabel(
      absl::StrCat(call == kHealth         ? "health check (baseline)"
                   : call == kGetPlacement ? "GetPlacement"
                                           : "Place, cached",
                   security == kTlsToken ? ", TLS + token" : ", plaintext"));
}

// Each load in plaintext, then over TLS with a token, one after the other.
void Loads(benchmark::internal::Benchmark* b) {
  // Closed loop: saturation throughput and latency; paced: 64 clients
  // together offering 500 calls per second, then four times that.
  for (int64_t rate : {0, 500, 2000}) {
    for (int64_t security : {kPlaintext, kTlsToken}) {
      for (int64_t call : {kHealth, kGetPlacement, kCachedPlace}) {
        b->Args({call, 64, rate == 0 ? 300 : 40, rate, security});
      }
    }
  }
}

BENCHMARK(BM_Load)
    ->ArgNames({"call", "clients", "calls", "rate", "tls"})
    ->Apply(Loads)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace placer

BENCHMARK_MAIN();
