// The sonde custom resources, as the operator addresses them (crds/ holds their definitions
// and crds/README.md the report object's shape).
#pragma once

#include "common/kube/resource.h"

namespace sonde::op {

inline const kube::ResourceType kProfilingPolicies{"sonde.dev", "v1alpha1", "profilingpolicies",
                                                   true};
inline const kube::ResourceType kProfilingNodeReports{"sonde.dev", "v1alpha1",
                                                      "profilingnodereports", true};

}  // namespace sonde::op
