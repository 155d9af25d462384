#include "placer/cli/ranks.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "placer/cli/cli_common.h"
#include "placer/cli/host_cores.h"
#include "runtime/cpu_cores.h"

extern char** environ;

namespace placer {
namespace {

constexpr char kArgumentsKey[] = "placer/args";

std::string SelfExecutable() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, n) : std::string("placer_torch");
}

// argv for this binary with `arguments`; `storage` owns the strings.
std::vector<char*> SelfArgv(const std::vector<std::string>& arguments,
                            std::vector<std::string>* storage) {
  *storage = {SelfExecutable()};
  storage->insert(storage->end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& a : *storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// Starts this binary with `arguments` (argv[1:]); the child's pid.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& arguments) {
  std::vector<std::string> storage;
  std::vector<char*> argv = SelfArgv(arguments, &storage);
  const std::string& self = storage[0];
  pid_t pid = 0;
  int err = posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(),
                        environ);
  if (err != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start ", self, ": ", std::strerror(err)));
  }
  return pid;
}

std::vector<std::string> RankArguments(int rank, int world,
                                       const std::string& master) {
  return {absl::StrCat("--rank=", rank), absl::StrCat("--world_size=", world),
          absl::StrCat("--master=", master), "--nproc=1"};
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

bool Failed(int status) {
  return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}

}  // namespace

std::vector<std::string> RerunArguments(
    const std::string& command, const std::vector<std::string>& positional) {
  std::vector<std::string> out = {command};
  out.insert(out.end(), positional.begin(), positional.end());
  for (const absl::CommandLineFlag* flag : PlacerFlags()) {
    const std::string name(flag->Name());
    if (name == "nproc" || name == "world_size" || name == "rank" ||
        name == "master" || name == "bind") {
      continue;  // each rank's own
    }
    if (flag->CurrentValue() != flag->DefaultValue()) {
      out.push_back(absl::StrCat("--", name, "=", flag->CurrentValue()));
    }
  }
  return out;
}

void NoteUnpinnedCpuDevices(const Cluster& cluster) {
  if (!absl::GetFlag(FLAGS_pin_cores) || absl::GetFlag(FLAGS_rank) > 0) return;
  const std::string note =
      UnpinnedNote(cluster, absl::GetFlag(FLAGS_threads), AllowedCores());
  if (!note.empty()) std::cerr << "placer: " << note << "\n";
}

RankSetup::~RankSetup() {
  if (stop_watching != nullptr) *stop_watching = true;
  if (watcher.joinable()) watcher.join();
}

absl::StatusOr<std::unique_ptr<RankSetup>> JoinRanks(
    const Cluster& cluster, const std::vector<std::string>& arguments) {
  auto setup = std::make_unique<RankSetup>();
  const int nproc = absl::GetFlag(FLAGS_nproc);
  const int world =
      absl::GetFlag(FLAGS_world_size) > 0 ? absl::GetFlag(FLAGS_world_size) : nproc;
  const int rank = absl::GetFlag(FLAGS_rank);
  if (nproc < 1) return absl::InvalidArgumentError("--nproc must be at least 1");
  if (world < nproc) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world-size ", world, " is less than --nproc ", nproc));
  }
  if (rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank ", rank, " is not in [0, ", world, ")"));
  }
  setup->rank = rank;
  if (world == 1) return setup;
  // A rank whose peer died gets EPIPE from its sockets (Gloo's writes as
  // well as the store's) and reports it naming the peer, instead of being
  // killed without a word by SIGPIPE's default action.
  signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<std::pair<std::string, int>> master =
      ParseHostPort(absl::GetFlag(FLAGS_master));
  if (!master.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master: ", master.status().message()));
  }
  std::vector<int> process;
  for (const Device& d : cluster.devices()) process.push_back(d.process);
  absl::StatusOr<std::vector<int>> ranks = RanksOfDevices(process, world);
  if (!ranks.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster ", cluster.name(), ": ", ranks.status().message()));
  }
  setup->rank_of_device = *ranks;
  if (rank == 0) {
    const std::string warning =
        BusyCoresWarning(cluster, *ranks, nproc, absl::GetFlag(FLAGS_threads),
                         static_cast<int>(std::thread::hardware_concurrency()));
    if (!warning.empty()) std::cerr << "placer: " << warning << "\n";
  }

  RankGroupOptions options;
  options.master_host = master->first;
  options.master_port = master->second;
  options.rank = rank;
  options.world_size = world;
  options.bind_host = absl::GetFlag(FLAGS_bind);
  options.timeout_seconds = absl::GetFlag(FLAGS_rank_timeout).seconds;
  absl::Status spawn_error;
  if (rank == 0) {
    options.initial_values[kArgumentsKey] =
        absl::StrJoin(arguments, std::string(1, '\0'));
    options.on_listening = [&](int port) {
      const std::string address = absl::StrCat(master->first, ":", port);
      for (int r = 1; r < nproc && spawn_error.ok(); ++r) {
        std::vector<std::string> child = arguments;
        for (std::string& a : RankArguments(r, world, address)) {
          child.push_back(std::move(a));
        }
        child.push_back(absl::StrCat("--bind=", options.bind_host));
        absl::StatusOr<pid_t> pid = Spawn(child);
        if (!pid.ok()) {
          spawn_error = pid.status();
          break;
        }
        setup->children.push_back({r, *pid});
        std::cerr << "rank " << r << ": pid " << *pid << "\n";
      }
      if (world > nproc) {
        std::cerr << "waiting for ranks " << nproc << ".." << world - 1
                  << ": placer worker --rank R --world-size " << world
                  << " --master " << address << "\n";
      }
    };
  }
  absl::StatusOr<std::shared_ptr<RankGroup>> group = RankGroup::Create(options);
  if (!spawn_error.ok() || !group.ok()) {
    for (const auto& [r, pid] : setup->children) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    setup->children.clear();
    return spawn_error.ok() ? group.status() : spawn_error;
  }
  setup->group = *group;
  if (!setup->children.empty()) {
    // A local rank that dies fails the run at once, named.
    setup->stop_watching = std::make_unique<std::atomic<bool>>(false);
    RankSetup* s = setup.get();
    setup->watcher = std::thread([s] {
      std::vector<char> done(s->children.size(), 0);
      while (!*s->stop_watching) {
        for (size_t k = 0; k < s->children.size(); ++k) {
          if (done[k]) continue;
          int status = 0;
          // WNOWAIT: FinishRanks reaps it and reads the status again.
          siginfo_t info;
          std::memset(&info, 0, sizeof(info));
          if (waitid(P_PID, s->children[k].second, &info,
                     WEXITED | WNOHANG | WNOWAIT) != 0 ||
              info.si_pid == 0) {
            continue;
          }
          done[k] = 1;
          status = info.si_code == CLD_EXITED ? (info.si_status << 8)
                                              : (info.si_status & 0x7f);
          if (Failed(status)) {
            s->group->PublishFailure(absl::UnavailableError(absl::StrCat(
                "rank ", s->children[k].first, " (pid ", s->children[k].second,
                ") ", DescribeExit(status))));
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  return setup;
}

absl::Status FinishRanks(RankSetup& setup, absl::Status status) {
  if (setup.group != nullptr) {
    if (status.ok()) {
      status = setup.group->Finish();
    } else {
      // The other ranks stop at once instead of waiting on this one.
      setup.group->PublishFailure(status);
    }
  }
  if (setup.stop_watching != nullptr) *setup.stop_watching = true;
  if (setup.watcher.joinable()) setup.watcher.join();
  // The local ranks stop on their own (each has the rank timeout); past
  // that (and 2 s), they are killed.
  const double patience =
      (setup.group != nullptr ? setup.group->timeout_seconds() : 30) + 2;
  const auto start = std::chrono::steady_clock::now();
  absl::Status first_child;
  for (const auto& [r, pid] : setup.children) {
    int wstatus = 0;
    while (waitpid(pid, &wstatus, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() - start >
          std::chrono::milliseconds(static_cast<int64_t>(patience * 1000))) {
        kill(pid, SIGKILL);
        waitpid(pid, &wstatus, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (Failed(wstatus) && first_child.ok()) {
      first_child = absl::AbortedError(
          absl::StrCat("rank ", r, " (pid ", pid, ") ", DescribeExit(wstatus)));
    }
  }
  setup.children.clear();
  setup.group.reset();
  return status.ok() ? first_child : status;
}

int WorkerCommand(const std::vector<std::string>& args) {
  if (!args.empty()) return UsageError("worker takes no MODEL: rank 0 sends the run");
  const int rank = absl::GetFlag(FLAGS_rank);
  const int world = absl::GetFlag(FLAGS_world_size);
  if (world < 2 || rank < 1 || rank >= world) {
    return UsageError(
        "worker needs --rank R (1..W-1) and --world-size W (at least 2)");
  }
  absl::StatusOr<std::pair<std::string, int>> master =
      ParseHostPort(absl::GetFlag(FLAGS_master));
  if (!master.ok()) return Fail(master.status());
  if (master->second == 0) {
    return UsageError("worker needs --master HOST:PORT, as rank 0 printed it");
  }
  absl::StatusOr<std::string> run = RankGroup::ReadFromMaster(
      master->first, master->second, kArgumentsKey,
      absl::GetFlag(FLAGS_rank_timeout).seconds);
  if (!run.ok()) return Fail(run.status());
  std::vector<std::string> arguments = absl::StrSplit(*run, '\0');
  for (std::string& a :
       RankArguments(rank, world, absl::GetFlag(FLAGS_master))) {
    arguments.push_back(std::move(a));
  }
  arguments.push_back(absl::StrCat("--bind=", absl::GetFlag(FLAGS_bind)));
  arguments.push_back(absl::StrCat(
      "--rank_timeout=", AbslUnparseFlag(absl::GetFlag(FLAGS_rank_timeout))));
  std::vector<std::string> storage;
  std::vector<char*> argv = SelfArgv(arguments, &storage);
  execv(storage[0].c_str(), argv.data());
  return Fail(absl::InternalError(
      absl::StrCat("cannot start ", storage[0], ": ", std::strerror(errno))));
}

}  // namespace placer
