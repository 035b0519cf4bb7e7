// The client against an HTTPS fake API server that requires a bearer token, as in-cluster:
// the CA from the configuration is trusted, an unknown CA is refused, the token is sent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/kube/api_client.h"
#include "common/kube/tests/fake_fixture.h"

namespace sonde::kube::testing {
namespace {

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "sonde-kube-tls-" + std::to_string(getpid()));
    std::filesystem::create_directories(*dir_);
    for (const char* name : {"server", "other"}) {
      const std::string cmd =
          "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=" + std::string(name) +
          " -addext subjectAltName=IP:127.0.0.1 -keyout " + *dir_ + "/" + name + ".key -out " +
          *dir_ + "/" + name + ".crt 2>/dev/null";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make a test certificate";
    }
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string read(const std::string& name) {
    std::ifstream in(*dir_ + "/" + name);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  static FakeApiServer::Options options() {
    return {*dir_ + "/server.crt", *dir_ + "/server.key", "sa-token"};
  }
  static std::string* dir_;
};
std::string* TlsTest::dir_ = nullptr;

TEST_F(TlsTest, TrustsTheConfiguredCaAndSendsTheToken) {
  FakeApiServer fake(options());
  ClientConfig config = fake.client_config();
  ASSERT_EQ(config.server.rfind("https://", 0), 0u);
  config.ca_pem = read("server.crt");
  ApiClient client(config, test_client_options());
  auto created = client.create(kWidgets, "a", widget("a", "one", 1));
  ASSERT_TRUE(created.ok()) << created.error().message();

  // Watches go over TLS too.
  int events = 0;
  WatchOptions watch;
  watch.resource_version = "0";
  // The stream ends at the first event (on_event returns false); the timeout only bounds a
  // server that never sends it, and is long enough for a TLS handshake on a loaded machine.
  watch.timeout_seconds = 10;
  Status streamed = client.watch(kWidgets, "", watch, [&](WatchEvent) {
    ++events;
    return false;
  });
  EXPECT_TRUE(streamed.ok()) << streamed.error().message();
  EXPECT_EQ(events, 1);
}

TEST_F(TlsTest, RefusesAServerSignedByAnotherCa) {
  FakeApiServer fake(options());
  ClientConfig config = fake.client_config();
  config.ca_pem = read("other.crt");
  ApiClient client(config, test_client_options());
  auto result = client.get(kWidgets, "a", "one");
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(is_transport(result.error())) << result.error().message();
}

TEST_F(TlsTest, WithoutTheTokenTheServerSays401) {
  FakeApiServer fake(options());
  ClientConfig config = fake.client_config();
  config.ca_pem = read("server.crt");
  config.bearer_token.clear();
  ApiClient client(config, test_client_options());
  auto result = client.get(kWidgets, "a", "one");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code(), 401);
}

}  // namespace
}  // namespace sonde::kube::testing
