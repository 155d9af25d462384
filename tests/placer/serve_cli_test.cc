// `placer serve`, `remote` and `token` end to end, as a user runs them: the
// cache across a restart, TLS with tokens and roles (certificates made at
// test time), token rotation by SIGHUP, and plaintext refused off loopback.
#include <signal.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "tests/placer/run_placer.h"
#include "tests/placer/test_certificates.h"

namespace placer::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

void StopServe(int pid) {
  RunCommand("kill -TERM " + std::to_string(pid));
  for (int i = 0;
       i < 100 && RunCommand("kill -0 " + std::to_string(pid)).exit_code == 0;
       ++i) {
    usleep(50000);
  }
}

// Starts `placer serve` in the background; returns its pid and address.
std::pair<int, std::string> StartServe(const std::string& state_dir,
                                       const std::string& log,
                                       const std::string& flags = "") {
  RunResult r = RunCommand(
      "placer/placer serve --listen 127.0.0.1:0 "
      "--state-dir " +
      state_dir + " " + flags + " >/dev/null 2>" + log + " & echo $!");
  int pid = std::atoi(r.out.c_str());
  for (int i = 0; i < 200; ++i) {
    RunResult l = RunCommand("cat " + log);
    size_t at = l.out.find("listening on ");
    if (at != std::string::npos) {
      std::string rest = l.out.substr(at + 13);
      return {pid, rest.substr(0, rest.find(' '))};
    }
    usleep(50000);
  }
  return {pid, ""};
}

TEST(ServeCliTest, ServeThenRemotePlaceTrainSimulateGetAcrossARestart) {
  std::string dir = TmpFile("serve_state");
  std::string log = TmpFile("serve.log");
  RunCommand("rm -rf " + dir);
  auto [pid, address] = StartServe(dir, log);
  ASSERT_FALSE(address.empty()) << RunCommand("cat " + log).out;
  const std::string model =
      " zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100 --cluster p100x4"
      " --evaluations 50 --server " +
      address;
  std::string out = TmpFile("remote.json");
  RunResult placed = RunPlacer("remote place" + model + " -o " + out);
  ASSERT_EQ(placed.exit_code, 0) << placed.out;
  EXPECT_THAT(placed.out, HasSubstr("placed in"));
  std::string fp = placed.out.substr(placed.out.find("fingerprint ") + 12, 64);
  RunResult sim = RunPlacer("remote simulate" + model + " --placement " + out);
  ASSERT_EQ(sim.exit_code, 0) << sim.out;
  EXPECT_THAT(sim.out, HasSubstr("simulated step"));
  // One JSON shape per report: remote simulate prints what local simulate
  // does (numbers, device maps), and remote place's row has local place's
  // row's fields.
  const std::string local_model =
      " zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100 --cluster p100x4";
  google::protobuf::Struct remote_sim = Json(
      RunPlacer("remote simulate" + model + " --placement " + out + " --json")
          .out);
  google::protobuf::Struct local_sim = Json(
      RunPlacer("simulate" + local_model + " --placement " + out + " --json")
          .out);
  for (const char* key :
       {"step_seconds", "lower_bound_seconds", "bytes_moved", "out_of_memory",
        "estimated_nodes", "peak_memory_bytes", "busy_seconds"}) {
    ASSERT_TRUE(remote_sim.fields().count(key)) << key;
    ASSERT_TRUE(local_sim.fields().count(key)) << key;
    EXPECT_EQ(remote_sim.fields().at(key).kind_case(),
              local_sim.fields().at(key).kind_case())
        << key;
  }
  EXPECT_DOUBLE_EQ(Number(remote_sim, "step_seconds"),
                   Number(local_sim, "step_seconds"));
  EXPECT_DOUBLE_EQ(Number(remote_sim, "bytes_moved"),
                   Number(local_sim, "bytes_moved"));
  EXPECT_EQ(
      remote_sim.fields().at("peak_memory_bytes").struct_value().fields_size(),
      4);
  // A strategy file: the service simulates the strategy, as simulate does.
  std::string strategy = TmpFile("remote_strategy.json");
  ASSERT_EQ(RunCommand("(placer/placer place" + local_model +
                       " --parallelism data -o " + strategy + ") >/dev/null")
                .exit_code,
            0);
  google::protobuf::Struct remote_strategy =
      Json(RunPlacer("remote simulate" + model + " --placement " + strategy +
                     " --json")
               .out);
  google::protobuf::Struct local_strategy =
      Json(RunPlacer("simulate" + local_model + " --placement " + strategy +
                     " --json")
               .out);
  for (const char* key : {"step_seconds", "seconds_per_batch", "micro_batches",
                          "allreduce_seconds"}) {
    EXPECT_DOUBLE_EQ(Number(remote_strategy, key), Number(local_strategy, key))
        << key;
  }
  EXPECT_EQ(Number(local_strategy, "micro_batches"), 4);
  google::protobuf::Struct remote_place =
      Json(RunPlacer("remote place" + model + " --json").out);
  google::protobuf::Struct local_place =  // stdout only (progress: stderr)
      Json(RunCommand("(placer/placer place" + local_model +
                      " --evaluations 50 --json 2>/dev/null)")
               .out);
  const auto& remote_row =
      remote_place.fields().at("results").list_value().values(0).struct_value();
  const auto& local_row =
      local_place.fields().at("results").list_value().values(0).struct_value();
  for (const auto& [key, value] : local_row.fields()) {
    if (key == "speedup_over_single") continue;  // local --compare's baseline
    EXPECT_TRUE(remote_row.fields().count(key)) << key;
  }
  EXPECT_TRUE(remote_row.fields().count("fingerprint"));
  RunResult train =
      RunPlacer("remote train" + model + " --policy local_search --seed 3");
  ASSERT_EQ(train.exit_code, 0) << train.out;
  EXPECT_THAT(train.out, HasSubstr("evaluations  best"));
  RunResult bad = RunPlacer("remote place" + model + " --policy sorcery");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(bad.out, HasSubstr("unknown policy 'sorcery'"));

  RunCommand("kill -TERM " + std::to_string(pid));
  for (int i = 0;
       i < 100 && RunCommand("kill -0 " + std::to_string(pid)).exit_code == 0;
       ++i) {
    usleep(50000);
  }
  EXPECT_THAT(RunCommand("cat " + log).out, HasSubstr("signal 15"));
  auto [pid2, address2] = StartServe(dir, log);
  ASSERT_FALSE(address2.empty());
  EXPECT_THAT(RunCommand("cat " + log).out, HasSubstr("2 cached placements"));
  RunResult got = RunPlacer("remote get " + fp + " --server " + address2);
  EXPECT_EQ(got.exit_code, 0) << got.out;
  EXPECT_THAT(got.out, HasSubstr("cached"));
  // The server's page of the stored placement, after the restart: the
  // step the placement was answered with.
  const std::string page = TmpFile("remote_report.html");
  RunResult reported = RunPlacer("remote get " + fp + " --server " + address2 +
                                 " --report " + page);
  ASSERT_EQ(reported.exit_code, 0) << reported.out;
  EXPECT_THAT(reported.out, HasSubstr(page + ": HTML report"));
  const std::string step = placed.out.substr(
      placed.out.find("simulated step ") + 15, 8);  // six decimals: 0.xxxxxx
  EXPECT_THAT(RunCommand("cat " + page).out,
              HasSubstr("<td id=\"step_seconds\">" + step + " s</td>"));
  // place --report places and draws in one go; simulate has its own.
  const std::string model2 =
      " zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100 --cluster p100x4"
      " --evaluations 50 --server " + address2;
  RunResult both = RunPlacer("remote place" + model2 + " --policy heft" +
                             " --report " + page);
  ASSERT_EQ(both.exit_code, 0) << both.out;
  EXPECT_THAT(RunCommand("cat " + page).out, HasSubstr("(heft)"));
  RunResult misuse = RunPlacer("remote simulate" + model2 + " --placement " +
                               out + " --report " + page);
  EXPECT_NE(misuse.exit_code, 0);
  EXPECT_THAT(misuse.out, HasSubstr("--report is for place, train and get"));
  RunCommand("kill -TERM " + std::to_string(pid2));
}

// `placer token`'s two lines: the token, and the access file's line.
std::pair<std::string, std::string> NewToken(const std::string& name,
                                             const std::string& roles) {
  RunResult r = RunPlacer("token " + name + " --roles " + roles);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end; (end = r.out.find('\n', start)) != std::string::npos;
       start = end + 1) {
    lines.push_back(r.out.substr(start, end - start));
  }
  EXPECT_EQ(lines.size(), 4u) << r.out;
  if (lines.size() != 4) return {"", ""};
  EXPECT_THAT(lines[3], HasSubstr(name + " " + roles + " sha256:"));
  EXPECT_THAT(lines[3], Not(HasSubstr(lines[1])));
  return {lines[1], lines[3]};
}

TEST(ServeCliTest, TlsTokensAndRolesThroughRemoteAndRotationBySighup) {
  const std::string dir = TmpFile("serve_tls");
  RunCommand("rm -rf " + dir + " && mkdir -p " + dir);
  TestCertificateAuthority ca(dir, "ca");
  PemFiles server = ca.IssueServer("server");
  auto [ci_token, ci_line] = NewToken("ci", "read,place");
  auto [reader_token, reader_line] = NewToken("reader", "read");
  ASSERT_FALSE(ci_token.empty());
  const std::string access = dir + "/access";
  RunCommand("printf '%s\\n%s\\n' '" + ci_line + "' '" + reader_line + "' > " +
             access);
  RunCommand("printf '%s' '" + ci_token + "' > " + dir + "/ci.token");
  RunCommand("printf '%s' '" + reader_token + "' > " + dir + "/reader.token");
  const std::string log = dir + "/serve.log";
  auto [pid, address] =
      StartServe(dir + "/state", log,
                 "--tls-cert " + server.certificate + " --tls-key " +
                     server.private_key + " --access " + access);
  ASSERT_FALSE(address.empty()) << RunCommand("cat " + log).out;
  EXPECT_THAT(RunCommand("cat " + log).out,
              HasSubstr("TLS, clients and roles from " + access));
  // The log never holds a token.
  const std::string model =
      " zoo:gnmt2:batch=8,seq_len=4,hidden=64,vocab=100 --cluster p100x4"
      " --policy expert --server " +
      address + " --tls-ca " + ca.ca_file();
  RunResult placed =
      RunPlacer("remote place" + model + " --token-file " + dir + "/ci.token");
  ASSERT_EQ(placed.exit_code, 0) << placed.out;
  const std::string fp =
      placed.out.substr(placed.out.find("fingerprint ") + 12, 64);
  // The reader reads (PLACER_TOKEN), and may not place.
  RunResult got =
      RunCommand("PLACER_TOKEN=" + reader_token + " placer/placer remote get " +
                 fp + " --server " + address + " --tls-ca " + ca.ca_file());
  EXPECT_EQ(got.exit_code, 0) << got.out;
  RunResult denied = RunPlacer("remote place" + model + " --token-file " + dir +
                               "/reader.token");
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_THAT(denied.out, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(denied.out, HasSubstr("needs role 'place'"));
  RunResult anonymous = RunPlacer("remote place" + model);
  EXPECT_EQ(anonymous.exit_code, 1);
  EXPECT_THAT(anonymous.out, HasSubstr("UNAUTHENTICATED"));
  // Plaintext to a TLS port, and a token without TLS.
  RunResult plain =
      RunPlacer("remote get " + fp + " --server " + address + " --deadline 5");
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_THAT(plain.out, HasSubstr("UNAVAILABLE"));
  RunResult clear = RunPlacer("remote get " + fp + " --server " + address +
                              " --token-file " + dir + "/ci.token");
  EXPECT_EQ(clear.exit_code, 1);
  EXPECT_THAT(clear.out, HasSubstr("only over TLS"));

  // Rotation: ci gets a new token; SIGHUP; the old one stops working.
  auto [new_token, new_line] = NewToken("ci", "read,place");
  RunCommand("printf '%s\\n%s\\n' '" + new_line + "' '" + reader_line + "' > " +
             access);
  RunCommand("printf '%s' '" + new_token + "' > " + dir + "/new.token");
  RunCommand("kill -HUP " + std::to_string(pid));
  for (int i = 0; i < 100; ++i) {
    if (RunCommand("cat " + log).out.find("access file reloaded") !=
        std::string::npos) {
      break;
    }
    usleep(50000);
  }
  EXPECT_THAT(RunCommand("cat " + log).out, HasSubstr("access file reloaded"));
  RunResult revoked =
      RunPlacer("remote get " + fp + model.substr(model.find(" --server")) +
                " --token-file " + dir + "/ci.token");
  EXPECT_EQ(revoked.exit_code, 1);
  EXPECT_THAT(revoked.out, HasSubstr("UNAUTHENTICATED"));
  RunResult renewed =
      RunPlacer("remote get " + fp + model.substr(model.find(" --server")) +
                " --token-file " + dir + "/new.token");
  EXPECT_EQ(renewed.exit_code, 0) << renewed.out;
  StopServe(pid);
  const std::string server_log = RunCommand("cat " + log).out;
  for (const std::string& secret : {ci_token, reader_token, new_token}) {
    EXPECT_THAT(server_log, Not(HasSubstr(secret)));
  }
}

TEST(ServeCliTest, PlaintextOffLoopbackNeedsInsecureAndSaysSo) {
  RunResult refused = RunPlacer("serve --listen 0.0.0.0:0");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.out, HasSubstr("--insecure"));
  EXPECT_THAT(refused.out, HasSubstr("--tls-cert"));
  EXPECT_THAT(refused.out, HasSubstr("--tls-key"));
  RunResult tokens_in_clear =
      RunPlacer("serve --listen 127.0.0.1:0 --access /nonexistent");
  EXPECT_EQ(tokens_in_clear.exit_code, 1);
  EXPECT_THAT(tokens_in_clear.out, HasSubstr("--access needs --tls-cert"));
  const std::string log = TmpFile("insecure.log");
  RunResult started = RunCommand(
      "placer/placer serve --listen 0.0.0.0:0 --insecure >/dev/null 2>" + log +
      " & echo $!");
  const int pid = std::atoi(started.out.c_str());
  std::string out;
  for (int i = 0; i < 200 && out.find("listening on") == std::string::npos;
       ++i) {
    usleep(50000);
    out = RunCommand("cat " + log).out;
  }
  StopServe(pid);
  EXPECT_THAT(out, HasSubstr("WARNING: --insecure: plaintext on 0.0.0.0:0"));
  EXPECT_THAT(out, HasSubstr("listening on 0.0.0.0:"));
  RunResult bad_roles = RunPlacer("token ci --roles read,admin");
  EXPECT_EQ(bad_roles.exit_code, 2);
  EXPECT_THAT(bad_roles.out, HasSubstr("unknown role 'admin'"));
}

}  // namespace
}  // namespace placer::test
