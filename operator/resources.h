// The sonde custom resources under the operator's namespace.
#pragma once

#include "common/kube/sonde_resources.h"

namespace sonde::op {

using kube::kClusterProfilingPolicies;
using kube::kProfilingNodeReports;
using kube::kProfilingPolicies;

}  // namespace sonde::op
