// A model-selection grid (Hydra, seed 004; issue 14 §1; docs/select.md): a
// base job spec and the values to try for some of its fields, expanded into
// one training task per point of their cartesian product.
//
//   base: fashion_mnist_cnn.yaml          # a job spec, relative to this file (or `job: {...}` inline)
//   metric: test_accuracy                 # how the tasks are ranked: test_accuracy (highest first) or loss
//   grid:
//     training.optimizer.lr: [0.05, 0.01] # a field of the job spec, by its dotted path: the values to try
//     model.options.width: [16, 32]
//
// Thread-safety: values and pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cluster/job_spec.h"
#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::select {

inline constexpr size_t kMaxGridPoints = 1024;

struct Grid {
  std::string name;  // the grid's: the base job's name
  Json base;         // the base job spec as written (YAML read as JSON)
  std::string metric = "test_accuracy";
  // Each field varied (a dotted path into the job spec) and its values, in
  // the order of their paths: the last varies fastest.
  std::vector<std::pair<std::string, std::vector<Json>>> axes;
  std::string origin;  // the file, for errors
};

struct GridTask {
  int index = 0;            // 0.. in expansion order
  std::string label;        // "lr=0.05 width=16": the varied fields' last path parts and values
  Json point;               // {"training.optimizer.lr": 0.05, ...}
  cluster::JobSpec spec;    // the base with the point applied, parsed and checked
};

Result<Grid> parseGrid(const Json& j, const std::string& origin, const std::string& baseDir);
Result<Grid> loadGrid(const std::string& path);

// Every point, each a job spec checked as `hydrozoa train` checks one (an
// error names the point and the field). At most kMaxGridPoints.
Result<std::vector<GridTask>> expandGrid(const Grid& grid);

// `json` with the field at dotted `path` set to `value`; an error when a
// part of the path names no object (a misspelt section).
Status setPath(Json* json, const std::string& path, const Json& value);

}  // namespace hydrozoa::select
