#include "common/cli.h"

#include <cstdlib>
#include <iostream>

#include "common/log.h"

namespace sonde::cli {

ParseOutcome parse_args(CLI::App& app, const std::vector<std::string>& args) {
  ParseOutcome outcome;
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    outcome.out = app.help();
    outcome.exit_code = 0;
  } catch (const CLI::CallForVersion& e) {
    outcome.out = std::string(e.what()) + "\n";
    outcome.exit_code = 0;
  } catch (const CLI::ParseError& e) {
    outcome.err = usage_error(app, e.what());
    outcome.exit_code = 2;
  }
  return outcome;
}

std::string usage_error(const CLI::App& app, const std::string& message) {
  return app.get_name() + ": " + message + "\nRun '" + app.get_name() +
         " --help' for the options.\n";
}

std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  ParseOutcome outcome = parse_args(app, std::vector<std::string>(argv + 1, argv + argc));
  std::cout << outcome.out;
  std::cerr << outcome.err;
  return outcome.exit_code;
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || !(v > 0))
          return "must be above 0, got " + value;
        return "";
      },
      "POSITIVE");
}

void add_log_flags(CLI::App& app, LogFlags& flags, const std::string& level_default) {
  app.add_option("--log-level", flags.level,
                 "debug, info, warn or error (default " + level_default + ")")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_option("--log-format", flags.format, "logfmt or json")
      ->check(CLI::IsMember({"logfmt", "json"}))
      ->capture_default_str();
}

void apply(const LogFlags& flags, const std::string& fallback) {
  // Both were checked by the parser (or the fallback comes from a validated config).
  log::set_level(
      log::parse_level(flags.level.empty() ? fallback : flags.level).value_or(log::Level::kInfo));
  log::set_format(flags.format == "json" ? log::Format::kJson : log::Format::kLogfmt);
}

}  // namespace sonde::cli
