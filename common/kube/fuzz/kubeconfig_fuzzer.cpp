// libFuzzer target for the kubeconfig reader: the fuzz bytes are the kubeconfig file, loaded
// with its current context and with a named one. Missing fields, wrong types and bad base64
// must give an Error, never a crash or a hang. The file lives alone in a fresh directory, so
// the relative certificate paths a mutation invents resolve to nothing.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/kube/client_config.h"
#include "common/unique_fd.h"

namespace {
std::string g_path;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string dir = (std::filesystem::temp_directory_path() / "sonde-kubeconfig-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) std::abort();
  g_path = dir + "/config";
  // A path such as /dev/stdin must not wait for a terminal.
  sonde::UniqueFd null(::open("/dev/null", O_RDONLY));
  ::dup2(null.get(), STDIN_FILENO);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    sonde::UniqueFd fd(::open(g_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd.valid()) return 0;
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd.get(), data + done, size - done);
      if (n <= 0) return 0;
      done += static_cast<size_t>(n);
    }
  }
  (void)sonde::kube::kubeconfig_config(g_path);
  (void)sonde::kube::kubeconfig_config(g_path, "ctx");
  (void)sonde::kube::base64_decode(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
