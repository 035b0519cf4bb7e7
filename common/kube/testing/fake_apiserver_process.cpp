#include "common/kube/testing/fake_apiserver_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

extern char** environ;

// LeakSanitizer hook for the test binaries that link this file. cpprestsdk leaves pplx task
// objects of aborted requests (a dropped or cancelled watch) referenced from its own thread
// pool at exit, and its pooled TLS connections keep OpenSSL objects alive past exit; both are
// inside the libraries' machinery, not in sonde.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libcpprest.so\nleak:pplx::details::_Task_impl\nleak:libcrypto.so\n"
         "leak:libssl.so\n";
}

namespace sonde::kube::testing {
namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fake API server: %s\n", what.c_str());
  std::abort();
}

}  // namespace

FakeApiServer::FakeApiServer(const Options& options)
    : tls_(!options.tls_cert_file.empty()), token_(options.token) {
  int out[2];
  if (pipe(out) != 0) fail("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<std::string> args = {"python3", SONDE_FAKE_APISERVER, "--exit-with-parent"};
  if (tls_) {
    args.push_back("--tls-cert=" + options.tls_cert_file);
    args.push_back("--tls-key=" + options.tls_key_file);
  }
  if (!token_.empty()) args.push_back("--token=" + token_);
  if (!options.rbac_file.empty()) {
    args.push_back("--rbac=" + options.rbac_file);
    for (const auto& identity : options.identities) args.push_back("--identity=" + identity);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawnp(&pid_, "python3", &actions, nullptr, argv.data(), environ) != 0) {
    fail("cannot start python3 " SONDE_FAKE_APISERVER);
  }
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  FILE* stream = fdopen(out[0], "r");
  if (stream == nullptr || std::fscanf(stream, "PORT %d", &port_) != 1) {
    fail("did not print its port");
  }
  std::fclose(stream);
  ApiClientOptions client_options;
  client_options.retry.max_attempts = 1;
  client_options.qps = 0;  // test plumbing, not a client under test
  client_options.user_agent = "fake-control";
  ClientConfig control_config = client_config();
  control_config.insecure_skip_tls_verify = true;  // the control endpoints are test plumbing
  control_client_ = std::make_unique<ApiClient>(control_config, client_options);
}

FakeApiServer::~FakeApiServer() {
  control_client_.reset();
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

ClientConfig FakeApiServer::client_config() const {
  ClientConfig config;
  config.server = url();
  config.bearer_token = token_;
  config.default_namespace = "default";
  return config;
}

void FakeApiServer::write_kubeconfig(const std::string& path, const std::string& token) const {
  std::ofstream out(path);
  out << "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
      << "clusters:\n- name: fake\n  cluster:\n    server: " << url() << "\n"
      << "users:\n- name: fake\n  user:\n    token: " << token << "\n"
      << "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
      << "    namespace: sonde-system\n";
}

Json FakeApiServer::control(const std::string& what, const Json& body) {
  auto response = control_client_->send("POST", "/_fake/" + what, body.dump(), "application/json",
                                        /*retry=*/false);
  if (!response.ok() || response->status != 200) fail("control " + what + " failed");
  return Json::parse(response->body);
}

Json FakeApiServer::requests() {
  auto response = control_client_->send("GET", "/_fake/requests", "", "", false);
  if (!response.ok() || response->status != 200) fail("reading the request log failed");
  return Json::parse(response->body)["requests"];
}

void FakeApiServer::clear_requests() {
  auto response = control_client_->send("DELETE", "/_fake/requests", "", "", false);
  if (!response.ok() || response->status != 200) fail("clearing the request log failed");
}

}  // namespace sonde::kube::testing
