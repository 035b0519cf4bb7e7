#include "operator/options.h"

#include <charconv>

namespace sonde::op {

const char* usage_text() {
  return "Usage: sonde-operator [OPTIONS]\n"
         "\n"
         "Reconciles ProfilingPolicy objects into status from the agents' ProfilingNodeReports,\n"
         "and serves /metrics, /healthz and /readyz.\n"
         "\n"
         "Options:\n"
         "  --kubeconfig PATH                 kubeconfig (default: in-cluster, then $KUBECONFIG,\n"
         "                                    then ~/.kube/config)\n"
         "  --namespace NS                    watch policies in NS only (default: all)\n"
         "  --report-namespace NS             where agents write node reports (default: the\n"
         "                                    operator's namespace)\n"
         "  --metrics-address HOST:PORT       /metrics, /healthz, /readyz (default 0.0.0.0:8080)\n"
         "  --workers N                       concurrent reconciles (default 2)\n"
         "  --log-level LEVEL                 debug, info, warn, error (default info)\n"
         "  --report-ttl DUR                  nodes whose node Lease is older than this are\n"
         "                                    stale (default 3m; 0s disables)\n"
         "  --leader-elect=BOOL               Lease leader election (default true)\n"
         "  --leader-election-id NAME         the Lease's name (default sonde-operator)\n"
         "  --leader-election-namespace NS    the Lease's namespace (default: the operator's)\n"
         "  --leader-election-identity ID     this replica's identity (default: hostname_pid)\n"
         "  --lease-duration DUR              default 15s\n"
         "  --renew-deadline DUR              default 10s\n"
         "  --retry-period DUR                default 2s\n"
         "  -h, --help                        show this help\n"
         "  -V, --version                     show the version\n";
}

Result<kube::Duration> parse_duration(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr == text.data() || value < 0) {
    return Error("invalid duration \"" + text + "\" (use e.g. 15s, 500ms)");
  }
  const std::string unit(ptr, end);
  if (unit == "ms") return kube::Duration(std::chrono::milliseconds(value));
  if (unit == "s") return kube::Duration(std::chrono::seconds(value));
  if (unit == "m") return kube::Duration(std::chrono::minutes(value));
  if (unit == "h") return kube::Duration(std::chrono::hours(value));
  return Error("invalid duration \"" + text + "\" (units: ms, s, m, h)");
}

Result<OperatorOptions> parse_options(const std::vector<std::string>& args) {
  OperatorOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto take = [&]() -> Result<std::string> {
      if (has_value) return value;
      if (i + 1 >= args.size()) return Error(flag + ": needs a value");
      return args[++i];
    };
    if (flag == "-h" || flag == "--help") {
      options.help = true;
    } else if (flag == "-V" || flag == "--version") {
      options.version = true;
    } else if (flag == "--leader-elect") {
      const std::string v = has_value ? value : "true";
      if (v != "true" && v != "false") return Error("--leader-elect: must be true or false");
      options.leader_elect = v == "true";
    } else if (flag == "--kubeconfig") {
      ASSIGN_OR_RETURN(options.kubeconfig, take());
    } else if (flag == "--namespace") {
      ASSIGN_OR_RETURN(options.policy_namespace, take());
    } else if (flag == "--report-namespace") {
      ASSIGN_OR_RETURN(options.report_namespace, take());
    } else if (flag == "--metrics-address") {
      ASSIGN_OR_RETURN(options.metrics_address, take());
    } else if (flag == "--log-level") {
      ASSIGN_OR_RETURN(options.log_level, take());
    } else if (flag == "--leader-election-id") {
      ASSIGN_OR_RETURN(options.leader_election_id, take());
    } else if (flag == "--leader-election-namespace") {
      ASSIGN_OR_RETURN(options.leader_election_namespace, take());
    } else if (flag == "--leader-election-identity") {
      ASSIGN_OR_RETURN(options.identity, take());
    } else if (flag == "--workers") {
      ASSIGN_OR_RETURN(const std::string v, take());
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), options.workers);
      if (ec != std::errc() || ptr != v.data() + v.size() || options.workers < 1) {
        return Error("--workers: must be a positive integer, got \"" + v + "\"");
      }
    } else if (flag == "--report-ttl") {
      ASSIGN_OR_RETURN(const std::string v, take());
      auto d = parse_duration(v);
      if (!d.ok()) return d.error().wrap(flag);
      options.report_ttl = *d;
    } else if (flag == "--lease-duration" || flag == "--renew-deadline" ||
               flag == "--retry-period") {
      ASSIGN_OR_RETURN(const std::string v, take());
      auto d = parse_duration(v);
      if (!d.ok()) return d.error().wrap(flag);
      (flag == "--lease-duration"   ? options.lease_duration
       : flag == "--renew-deadline" ? options.renew_deadline
                                    : options.retry_period) = *d;
    } else {
      return Error("unknown option " + flag + " (see --help)");
    }
  }
  return options;
}

}  // namespace sonde::op
