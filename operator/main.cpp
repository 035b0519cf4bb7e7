// sonde-operator: reconciles ProfilingPolicy objects into status (see issue 7).
#include <cstdio>
#include <string_view>

#include "common/version.h"

int main(int argc, char** argv) {
  std::string_view arg = argc > 1 ? argv[1] : "";
  if (arg == "-V" || arg == "--version") {
    std::printf("sonde-operator %s\n", sonde::kVersion);
    return 0;
  }
  std::printf("Usage: sonde-operator [--help] [--version]\n");
  return arg == "-h" || arg == "--help" ? 0 : 2;
}
