// Command-line parsing for every sonde binary, mode and subcommand, on CLI11: flags declared one
// way, `--help` per command, errors that name the flag, exit status 2 on a usage error. Flags
// several commands share (logging here, the agent modes' in agent/runtime/agent_flags.h) are
// declared once, so they are spelled and checked the same everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace sonde::cli {

// What parsing said, without touching stdout/stderr. exit_code nullopt: go on; otherwise 0
// after --help or --version (the text in `out`), 2 after a usage error (the message in `err`,
// with a pointer to --help).
struct ParseOutcome {
  std::optional<int> exit_code;
  std::string out;
  std::string err;
};
ParseOutcome parse_args(CLI::App& app, const std::vector<std::string>& args);

// "<command>: <message>" and the pointer to --help: what a usage error prints, also for checks
// a command makes itself after parsing.
std::string usage_error(const CLI::App& app, const std::string& message);

// The same on argv (argv[0] is skipped), printing what it says.
std::optional<int> parse(CLI::App& app, int argc, char** argv);

// A check that a number is above 0, with a message that says so (CLI11's own prints the
// largest double).
CLI::Validator positive();

// --log-level and --log-format. An empty level means "not given" (the caller's default).
struct LogFlags {
  std::string level;
  std::string format = "logfmt";
};
// `level_default` is what the help says an absent --log-level means.
void add_log_flags(CLI::App& app, LogFlags& flags, const std::string& level_default = "info");
// Applies them to the process's logger; an empty level applies `fallback`.
void apply(const LogFlags& flags, const std::string& fallback = "info");

}  // namespace sonde::cli
