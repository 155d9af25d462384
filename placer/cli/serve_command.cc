// placer serve [--listen 127.0.0.1:50051] [--state-dir DIR]
#include <signal.h>

#include <iostream>

#include "absl/flags/flag.h"
#include "placer/cli/cli_common.h"
#include "placer/service/server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "serve: address to listen on; loopback unless opened explicitly "
          "(e.g. 0.0.0.0:50051); port 0 picks a free port.");
ABSL_FLAG(std::string, state_dir, "",
          "serve: directory for the placement cache and reported "
          "measurements (kept across restarts); empty: in memory only.");
ABSL_FLAG(int32_t, max_threads, 128,
          "serve: calls handled at once; more are refused with "
          "RESOURCE_EXHAUSTED until one finishes.");
ABSL_FLAG(int32_t, max_searches, 2,
          "serve: placements computed at once (cached answers do not wait).");
ABSL_FLAG(int32_t, max_placing, 128,
          "serve: uncached Place calls waiting or searching at once; more "
          "are refused with RESOURCE_EXHAUSTED (server busy).");
ABSL_FLAG(int32_t, max_request_mb, 256,
          "serve: largest request accepted, in MiB (RESOURCE_EXHAUSTED above).");
ABSL_FLAG(int64_t, max_ops, 2000000,
          "serve: largest model placed, in forward ops.");

namespace placer {

int ServeCommand(const std::vector<std::string>& args) {
  if (!args.empty()) return UsageError("serve takes no arguments");
  ServerOptions options;
  options.address = absl::GetFlag(FLAGS_listen);
  options.state_dir = absl::GetFlag(FLAGS_state_dir).empty()
                          ? ""
                          : UserPath(absl::GetFlag(FLAGS_state_dir));
  options.max_threads = absl::GetFlag(FLAGS_max_threads);
  int64_t mb = absl::GetFlag(FLAGS_max_request_mb);
  if (mb < 1 || mb > 2047) return UsageError("--max-request-mb: 1..2047");
  options.max_request_bytes = static_cast<int>(mb << 20);
  options.service.max_concurrent_searches = absl::GetFlag(FLAGS_max_searches);
  options.service.max_placing = absl::GetFlag(FLAGS_max_placing);
  options.service.limits.max_ops = absl::GetFlag(FLAGS_max_ops);

  // SIGINT and SIGTERM are taken by sigwait below, in every thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<PlacementServer>> server =
      PlacementServer::Start(options);
  if (!server.ok()) return Fail(server.status());
  for (const std::string& w : (*server)->warnings()) {
    std::cerr << "placer serve: warning: " << w << "\n";
  }
  std::string host = options.address.substr(0, options.address.rfind(':'));
  std::cerr << "placer serve: listening on " << host << ":" << (*server)->port()
            << " (" << (*server)->cached_placements() << " cached placements"
            << (options.state_dir.empty() ? ", in memory only"
                                          : ", state in " + options.state_dir)
            << "); SIGINT or SIGTERM stops it\n";
  int signal = 0;
  sigwait(&signals, &signal);
  std::cerr << "placer serve: signal " << signal
            << ", finishing running calls (5 s at most)\n";
  (*server)->Shutdown(5);
  return 0;
}

}  // namespace placer
