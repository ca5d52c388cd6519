// A job spec from YAML text, as `hydrozoa train` reads job.yaml (the job
// spec tests' shared helper).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "cluster/job_spec.h"

namespace hydrozoa::cluster {

inline Result<JobSpec> parse(const std::string& yaml) {
  auto j = parseYaml(yaml, "job.yaml");
  EXPECT_TRUE(j.ok()) << j.status().message();
  return parseJobSpec(*j, "job.yaml");
}

}  // namespace hydrozoa::cluster
