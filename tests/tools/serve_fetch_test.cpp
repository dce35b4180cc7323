// `kvstream serve` and `kvstream fetch` as a user runs them, on loopback with the tiny real model: a fetch at
// a fixed level and one by the kvstream policy, each verified with the quality meter; a server with a secret
// refuses a fetcher without it, and an unknown context is refused with its name; KV dumps served without a
// model, and dumps that do not fit refused. The server is a child process, stopped (bounded) when the test
// ends.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cluster/process.h"
#include "common/half.h"
#include "kvstream/cuda.h"
#include "kvstream/kv_dump.h"
#include "tests/test_files.h"
#include "tests/tools/json_lines.h"
#include "tests/tools/run_shell.h"

namespace {

using kvstream::testing::JsonLines;
using kvstream::testing::Refuses;
using kvstream::testing::RunShell;

// A running `kvstream serve` on 127.0.0.1 at a free port, in chunks of 64 tokens, with `flags`.
class Server {
 public:
  explicit Server(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {KVSTREAM_CLI,     "serve", "--listen",     "127.0.0.1:0",
                                     "--chunk-tokens", "64",    "--duration-s", "120"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto child = kvstream::cluster::Spawn(argv);
    if (!child.ok()) {
      error_ = child.status().ToString();
      return;
    }
    child_ = *child;
    auto out = kvstream::cluster::ReadUntil(child_, "serving", 60);
    if (!out.ok()) {
      error_ = out.status().ToString();
      return;
    }
    // "serving 2 context(s) of model M on 127.0.0.1:PORT (model hash ...)"
    const size_t at = out->find("127.0.0.1:");
    if (at == std::string::npos) {
      error_ = "no address in: " + *out;
      return;
    }
    port_ = std::stoi(out->substr(at + 10));
  }
  ~Server() {
    if (child_.pid > 0) kvstream::cluster::Reap(child_, 10, true);
  }
  const std::string& error() const { return error_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  kvstream::cluster::Child child_;
  std::string error_;
  int port_ = 0;
};

TEST(ServeFetch, FetchesVerifiesAndRefuses) {
  kvstream::testing::TempDir secret_dir;
  const std::string secret = secret_dir / "secret";
  std::ofstream(secret) << "a shared secret of the test\n";
  Server server({"--model", "stories260K", "--tokens", "128", "--contexts", "2", "--threads", "1", "--secret-file", secret});
  ASSERT_EQ(server.error(), "");
  const std::string fetch = std::string(KVSTREAM_CLI) + " fetch --connect " + server.address() + " --secret-file " + secret +
                            " --model stories260K --threads 1";

  // A fixed level, verified: 2 chunks of 64 tokens, smaller than fp16's 2 x 64 x layers x channels x 2 x 2.
  std::string out;
  ASSERT_EQ(RunShell(fetch + " --context 1 --level L2 --verify --eval-tokens 32", &out), 0) << out;
  EXPECT_NE(out.find("policy fixed-L2"), std::string::npos) << out;
  EXPECT_NE(out.find("verify: "), std::string::npos) << out;
  EXPECT_NE(out.find("top-1 agreement"), std::string::npos) << out;

  // The kvstream policy, twice on one connection, as JSON.
  out.clear();
  ASSERT_EQ(RunShell(fetch + " --context 0 --repeat 2 --decode-threads 2 --json", &out), 0) << out;
  const std::vector<nlohmann::json> fetches = JsonLines(out, "{\"context\"");
  ASSERT_EQ(fetches.size(), 2u) << out;
  const nlohmann::json& last = fetches.back();
  EXPECT_EQ(last["context"], "0");
  EXPECT_EQ(last["policy"], "kvstream");
  EXPECT_GT(last["bytes"].get<double>(), 0);
  EXPECT_GT(last["kv_ready_ms"].get<double>(), 0);
  EXPECT_GT(last["last_byte_ms"].get<double>(), 0);
  EXPECT_LE(last["last_byte_ms"].get<double>(), last["kv_ready_ms"].get<double>());
  EXPECT_GT(last["decode_ms"].get<double>(), 0);
  EXPECT_EQ(last["path"], "host");
  EXPECT_EQ(last["device"], "cpu");

  // Into GPU memory: where there is no GPU, one clear line before anything is fetched.
  if (!kvstream::GpuAvailable()) {
    EXPECT_TRUE(Refuses(fetch + " --context 0 --level int8 --device cuda:0", "fetch --device cuda:0: "));
  }
  EXPECT_TRUE(Refuses(fetch + " --context 0 --device tpu", "expected cpu, cuda or cuda:N"));

  // Without the secret, and for a context that is not served: refused, saying why.
  EXPECT_TRUE(Refuses(std::string(KVSTREAM_CLI) + " fetch --connect " + server.address() + " --context 0 --level int8",
                      "PermissionDenied"));
  EXPECT_TRUE(Refuses(fetch + " --context 7 --level int8", "NotFound: sender: context '7' is not registered"));
}

// `kvstream kv dump`'s archive served by `serve --kv-dump` with no model: the fetched fp16 KV scores as the
// text's own (its window 0), the token ids give the text level, `fetch --out` writes it back as a dump, and
// dumps that do not fit are refused.
TEST(ServeFetch, ServesKvDumps) {
  kvstream::testing::TempDir dir;
  const std::string dump = dir / "kv.npz";
  std::string out;
  const std::string kv_dump = std::string(KVSTREAM_CLI) + " kv dump --model stories260K --tokens 128 --threads 1 " +
                              "--text /usr/share/common-licenses/GPL-3 --out " + dump;
  ASSERT_EQ(RunShell(kv_dump, &out), 0) << out;
  Server server({"--kv-dump", dump + "," + dump});
  ASSERT_EQ(server.error(), "");
  const std::string fetch =
      std::string(KVSTREAM_CLI) + " fetch --connect " + server.address() + " --model stories260K --threads 1";
  out.clear();
  ASSERT_EQ(RunShell(fetch + " --context 1 --level fp16 --verify --window 0 --eval-tokens 32", &out), 0) << out;
  EXPECT_NE(out.find("128 tokens, 2 chunks"), std::string::npos) << out;
  EXPECT_NE(out.find("top-1 agreement 1.0000"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(RunShell(fetch + " --context 0 --level text", &out), 0) << out;
  EXPECT_NE(out.find("policy fixed-text"), std::string::npos) << out;

  // Fetched back into a dump at fp16: the served KV rounded to fp16, bit for bit.
  out.clear();
  ASSERT_EQ(RunShell(fetch + " --context 0 --level fp16 --out " + (dir / "fetched.npz"), &out), 0) << out;
  auto served = kvstream::ReadKvDump(dump), fetched = kvstream::ReadKvDump(dir / "fetched.npz");
  ASSERT_TRUE(served.ok() && fetched.ok()) << served.status().ToString() << fetched.status().ToString();
  ASSERT_EQ(fetched->keys.size(), served->keys.size());
  EXPECT_TRUE(fetched->token_ids.empty());
  for (const auto& [a, b] : {std::pair{&served->keys, &fetched->keys}, std::pair{&served->values, &fetched->values}}) {
    std::vector<float> x(a->size() / 4), y(x.size());
    std::memcpy(x.data(), a->data(), a->size());
    std::memcpy(y.data(), b->data(), b->size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], kvstream::HalfToFloat(kvstream::FloatToHalf(x[i]))) << i;
  }
  EXPECT_TRUE(Refuses(std::string(KVSTREAM_CLI) + " fetch --connect " + server.address() + " --context 0 --out " +
                          (dir / "x.npz"),
                      "--out needs --model"));

  const std::string serve = std::string(KVSTREAM_CLI) + " serve --listen 127.0.0.1:0 --duration-s 1 --kv-dump ";
  EXPECT_TRUE(Refuses(serve + dump + " --model tinystories656k --threads 1", "--kv-dump " + dump + ": layers = 5, the model"));
  EXPECT_TRUE(Refuses(serve + dump + " --text /usr/share/common-licenses/GPL-3", "--text chooses text windows"));
  EXPECT_TRUE(Refuses(serve + "/usr/share/common-licenses/GPL-3", "not a ZIP archive"));
}

}  // namespace
