// Helpers shared by the HPACK and HTTP/2 tests: hex strings and the output of the ground-truth
// scripts (Debian's python3-hpack and python3-h2).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace sonde::agent::testing {

// "8286 84be" -> {0x82, 0x86, 0x84, 0xbe}; spaces and newlines are skipped.
inline std::vector<uint8_t> unhex(std::string_view text) {
  std::vector<uint8_t> out;
  int high = -1;
  for (const char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0) continue;
    if (high < 0) {
      high = digit;
    } else {
      out.push_back(static_cast<uint8_t>(high * 16 + digit));
      high = -1;
    }
  }
  return out;
}

inline std::string as_string(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

// The standard output of `command`, split in lines; a failed command fails the test.
inline std::vector<std::string> command_lines(const std::string& command) {
  std::vector<std::string> lines;
  FILE* pipe = popen(command.c_str(), "r");  // NOLINT(cert-env33-c): a fixed test script
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return lines;
  }
  std::string current;
  char buffer[65536];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      if (buffer[i] == '\n') {
        lines.push_back(std::move(current));
        current.clear();
      } else {
        current.push_back(buffer[i]);
      }
    }
  }
  if (!current.empty()) lines.push_back(std::move(current));
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << command << " failed (python3-h2 and python3-hpack installed?)";
  return lines;
}

}  // namespace sonde::agent::testing
