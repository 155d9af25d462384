// placer serve [--listen 127.0.0.1:50051] [--state-dir DIR]
//     [--tls-cert C --tls-key K [--tls-ca CA]] [--access FILE] [--insecure]
// placer token NAME --roles read,place
#include <signal.h>

#include <algorithm>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "placer/cli/cli_common.h"
#include "placer/service/access_policy.h"
#include "placer/service/credentials.h"
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
ABSL_FLAG(int32_t, max_searches_per_client, 1,
          "serve: of --max-searches, how many one client's Place and Train "
          "calls may run at once (its others wait), so that one client "
          "cannot hold every slot.");
ABSL_FLAG(int32_t, max_placing_per_client, 32,
          "serve: of --max-placing, how many uncached Place calls one "
          "client may have waiting or searching.");
ABSL_FLAG(double, max_calls_per_second_per_client, 0,
          "serve: calls one client may make per second (a bucket holding "
          "one second's calls); more get RESOURCE_EXHAUSTED. 0: no limit.");
ABSL_FLAG(int64_t, max_state_mb, 1024,
          "serve: size of the cache and reported measurements (in "
          "--state-dir, or in memory), in MiB; least recently used "
          "placements are evicted to stay under it. 0: no limit.");
ABSL_FLAG(std::string, tls_cert, "",
          "serve: the server's PEM certificate chain (TLS); remote: the "
          "client's, for mutual TLS.");
ABSL_FLAG(std::string, tls_key, "",
          "serve, remote: the PEM private key of --tls-cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "serve: PEM CA certificates that sign client certificates (mutual "
          "TLS: clients must present one); remote: the CA that signed the "
          "server's certificate (turns TLS on).");
ABSL_FLAG(std::string, access, "",
          "serve: access file of clients, roles and credentials (token "
          "hashes from `placer token`, or cert:NAME); needs TLS. SIGHUP "
          "re-reads it.");
ABSL_FLAG(bool, insecure, false,
          "serve: allow plaintext on an address other machines can reach "
          "(anyone who reaches the port can call everything).");
ABSL_FLAG(std::string, roles, "read",
          "token: the roles of the new token (read, place, train, report).");

namespace placer {

int ServeCommand(const std::vector<std::string>& args) {
  if (!args.empty()) return UsageError("serve takes no arguments");
  ServerOptions options;
  options.address = absl::GetFlag(FLAGS_listen);
  options.state_dir = UserPath(absl::GetFlag(FLAGS_state_dir));
  options.max_threads = absl::GetFlag(FLAGS_max_threads);
  int64_t mb = absl::GetFlag(FLAGS_max_request_mb);
  if (mb < 1 || mb > 2047) return UsageError("--max-request-mb: 1..2047");
  options.max_request_bytes = static_cast<int>(mb << 20);
  const int64_t state_mb = absl::GetFlag(FLAGS_max_state_mb);
  if (state_mb < 0 || state_mb > (int64_t{1} << 40)) {
    return UsageError("--max-state-mb: 0 (no limit) or a size in MiB");
  }
  options.store.max_bytes = state_mb << 20;
  ClientLimitOptions& clients = options.service.clients;
  clients.max_searches = absl::GetFlag(FLAGS_max_searches);
  clients.max_searches_per_client = std::min(
      clients.max_searches, absl::GetFlag(FLAGS_max_searches_per_client));
  clients.max_placing = absl::GetFlag(FLAGS_max_placing);
  clients.max_placing_per_client = std::min(
      clients.max_placing, absl::GetFlag(FLAGS_max_placing_per_client));
  clients.max_calls_per_second_per_client =
      absl::GetFlag(FLAGS_max_calls_per_second_per_client);
  options.service.limits.max_ops = absl::GetFlag(FLAGS_max_ops);
  options.tls.certificate = UserPath(absl::GetFlag(FLAGS_tls_cert));
  options.tls.private_key = UserPath(absl::GetFlag(FLAGS_tls_key));
  options.tls.client_ca = UserPath(absl::GetFlag(FLAGS_tls_ca));
  options.access_file = UserPath(absl::GetFlag(FLAGS_access));
  options.allow_insecure_network = absl::GetFlag(FLAGS_insecure);
  const bool network = !IsLoopbackAddress(options.address);
  if (network && !options.tls.enabled() && !options.allow_insecure_network) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "--listen ", options.address,
        " is reachable from other machines, and without TLS anyone who "
        "reaches it can place, train, read every cached placement and "
        "report measurements: give --tls-cert and --tls-key (with --tls-ca "
        "for client certificates and --access for tokens and roles), or "
        "--insecure to serve plaintext there anyway")));
  }
  if (!options.access_file.empty() && !options.tls.enabled()) {
    return Fail(absl::FailedPreconditionError(
        "--access needs --tls-cert and --tls-key: tokens and client "
        "certificates travel only over TLS"));
  }

  // SIGINT and SIGTERM are taken by sigwait below, in every thread; SIGHUP
  // re-reads the access file.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<PlacementServer>> server =
      PlacementServer::Start(options);
  if (!server.ok()) return Fail(server.status());
  for (const std::string& w : (*server)->warnings()) {
    std::cerr << "placer serve: warning: " << w << "\n";
  }
  if (network && !options.tls.enabled()) {
    std::cerr << "placer serve: WARNING: --insecure: plaintext on "
              << options.address
              << ", open to the network: no encryption and no client "
                 "identity; anyone who reaches the port can place, train, "
                 "read every cached placement and report measurements\n";
  }
  std::string host = options.address.substr(0, options.address.rfind(':'));
  std::string security =
      !options.tls.enabled()
          ? "plaintext"
          : absl::StrCat(
                "TLS",
                options.tls.client_ca.empty() ? ""
                                              : " with client certificates",
                options.access_file.empty()
                    ? ""
                    : ", clients and roles from " + options.access_file);
  std::cerr << "placer serve: listening on " << host << ":" << (*server)->port()
            << " (" << security << "; " << (*server)->cached_placements()
            << " cached placements"
            << (options.state_dir.empty() ? ", in memory only"
                                          : ", state in " + options.state_dir)
            << "); SIGINT or SIGTERM stops it\n";
  int signal = 0;
  while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
    if (absl::Status s = (*server)->ReloadAccess(); !s.ok()) {
      std::cerr << "placer serve: SIGHUP: the access file was not reloaded, "
                   "the old one stays in force: "
                << s.message() << "\n";
    } else {
      std::cerr << "placer serve: SIGHUP: "
                << (options.access_file.empty()
                        ? "no access file to reload"
                        : "access file reloaded from " + options.access_file)
                << "\n";
    }
  }
  std::cerr << "placer serve: signal " << signal
            << ", finishing running calls (5 s at most)\n";
  (*server)->Shutdown(5);
  return 0;
}

int TokenCommand(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    return UsageError("token takes one client NAME (and --roles)");
  }
  absl::StatusOr<Roles> roles = Roles::Parse(absl::GetFlag(FLAGS_roles));
  if (!roles.ok())
    return UsageError(absl::StrCat("--roles: ", roles.status().message()));
  // The line is checked as serve will read it.
  absl::StatusOr<std::string> token = NewToken();
  if (!token.ok()) return Fail(token.status());
  const std::string line = absl::StrCat(args[0], " ", roles->ToString(), " ",
                                        TokenCredential(*token));
  if (absl::StatusOr<AccessPolicy> check =
          AccessPolicy::Parse(line, "the access line");
      !check.ok()) {
    return UsageError(std::string(check.status().message()));
  }
  std::cout << "token (give it to the client, e.g. in a file for remote "
               "--token-file; it is not kept anywhere):\n"
            << *token << "\n"
            << "access file line (add it to serve --access FILE, then "
               "SIGHUP the server):\n"
            << line << "\n";
  return 0;
}

}  // namespace placer
