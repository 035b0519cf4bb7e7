#include "common/kube/client_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace sonde::kube {
namespace {

class ClientConfigTest : public ::testing::Test {
 protected:
  ClientConfigTest() {
    dir_ = std::filesystem::temp_directory_path() /
           ("sonde-kube-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  ~ClientConfigTest() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream((dir_ / name).string()) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

TEST_F(ClientConfigTest, InClusterReadsTheServiceAccount) {
  write("token", "tok-123\n");
  write("ca.crt", "-----BEGIN CERTIFICATE-----\n");
  write("namespace", "sonde-system");
  auto config = in_cluster_config("10.96.0.1", "443", dir_.string());
  ASSERT_TRUE(config.ok()) << config.error().message();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->bearer_token, "tok-123");
  EXPECT_EQ(config->bearer_token_file, (dir_ / "token").string());
  EXPECT_EQ(config->default_namespace, "sonde-system");
  EXPECT_EQ(config->ca_pem, "-----BEGIN CERTIFICATE-----\n");

  auto v6 = in_cluster_config("fd00::1", "6443", dir_.string());
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->server, "https://[fd00::1]:6443");
}

TEST_F(ClientConfigTest, InClusterFailsClearlyOutsideACluster) {
  auto config = in_cluster_config("", "", dir_.string());
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  auto no_token = in_cluster_config("10.0.0.1", "443", (dir_ / "missing").string());
  ASSERT_FALSE(no_token.ok());
  EXPECT_NE(no_token.error().message().find("token"), std::string::npos);
}

TEST_F(ClientConfigTest, KubeconfigPicksTheContextAndDecodesData) {
  write("ca.pem", "CA FROM FILE");
  const std::string path = write("config", R"(apiVersion: v1
kind: Config
current-context: kind
clusters:
- name: kind-cluster
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: SGVsbG8gQ0E=
- name: other
  cluster:
    server: https://other:443
    certificate-authority: ca.pem
users:
- name: kind-user
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: token-user
  user:
    token: abc
contexts:
- name: kind
  context: {cluster: kind-cluster, user: kind-user, namespace: team-a}
- name: other
  context: {cluster: other, user: token-user}
)");
  auto config = kubeconfig_config(path);
  ASSERT_TRUE(config.ok()) << config.error().message();
  EXPECT_EQ(config->server, "https://127.0.0.1:6443");
  EXPECT_EQ(config->ca_pem, "Hello CA");
  EXPECT_EQ(config->client_cert_pem, "CERT");
  EXPECT_EQ(config->client_key_pem, "KEY");
  EXPECT_EQ(config->default_namespace, "team-a");

  auto other = kubeconfig_config(path, "other");
  ASSERT_TRUE(other.ok()) << other.error().message();
  EXPECT_EQ(other->ca_pem, "CA FROM FILE") << "relative paths resolve next to the kubeconfig";
  EXPECT_EQ(other->bearer_token, "abc");
  EXPECT_EQ(other->default_namespace, "default");

  auto missing = kubeconfig_config(path, "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("\"nope\" not found"), std::string::npos);
}

TEST_F(ClientConfigTest, KubeconfigRejectsExecPlugins) {
  const std::string path = write("config", R"(current-context: c
clusters: [{name: k, cluster: {server: "https://x"}}]
users: [{name: u, user: {exec: {command: aws}}}]
contexts: [{name: c, context: {cluster: k, user: u}}]
)");
  auto config = kubeconfig_config(path);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message().find("exec"), std::string::npos);
}

// Shapes yaml-cpp answers with exceptions (a map where a string belongs, a subscript of a
// scalar, broken YAML) and bad data: each is an Error naming the file, never an exception.
TEST_F(ClientConfigTest, MalformedKubeconfigsAreErrorsNotExceptions) {
  const char* const kMalformed[] = {
      "current-context: [c]\n",
      "current-context: c\ncontexts: oops\n",
      "current-context: c\ncontexts: [{name: {x: 1}, context: {cluster: k}}]\n",
      "current-context: c\ncontexts: [{name: c, context: {cluster: [k]}}]\n"
      "clusters: [{name: k, cluster: {server: x}}]\n",
      "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
      "clusters: [{name: k, cluster: {server: x, certificate-authority-data: \"%%%\"}}]\n",
      "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n"
      "clusters: [{name: k, cluster: {server: {a: b}}}]\n",
      "current-context: c\n  bad indentation: [\n",
      "\t\x01\xff",
  };
  for (const char* text : kMalformed) {
    const std::string path = write("config", text);
    Result<ClientConfig> config = Error("not run");
    EXPECT_NO_THROW(config = kubeconfig_config(path)) << text;
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_NE(config.error().message().find(path), std::string::npos) << config.error().message();
  }
}

TEST(Base64Test, Decodes) {
  EXPECT_EQ(*base64_decode("c29uZGU="), "sonde");
  EXPECT_EQ(*base64_decode("c29uZGU"), "sonde");
  EXPECT_FALSE(base64_decode("***").ok());
}

}  // namespace
}  // namespace sonde::kube
