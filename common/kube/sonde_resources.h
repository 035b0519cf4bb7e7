// sonde's own custom resources (definitions in crds/, the report's shape in crds/README.md),
// shared by the operator and the agent.
#pragma once

#include "common/kube/resource.h"

namespace sonde::kube {

inline const ResourceType kProfilingPolicies{"sonde.dev", "v1alpha1", "profilingpolicies", true};
inline const ResourceType kClusterProfilingPolicies{"sonde.dev", "v1alpha1",
                                                    "clusterprofilingpolicies", false};
inline const ResourceType kProfilingNodeReports{"sonde.dev", "v1alpha1", "profilingnodereports",
                                                true};

}  // namespace sonde::kube
