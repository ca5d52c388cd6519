// A stage's share of a checkpoint: one file per layer, named by the layer's
// index in the whole model ("layer-0007.pt"), holding its parameters,
// buffers (BatchNorm statistics) and each parameter's optimizer state. Any
// partition of the model can therefore load any checkpoint.
//
// Files are written to a temporary name and renamed, so a file that exists
// is complete. The checkpoint as a whole (all layers of one step, or none)
// is assembled by the coordinator (cluster/run_dir.h).
#pragma once

#include <torch/torch.h>

#include <string>

#include "core/status.h"
#include "model/model.h"
#include "runtime/loss_scale.h"

namespace hydrozoa::runtime {

std::string layerFileName(int globalLayer);

// Writes every layer of `stage` into `dir` (which must exist). With
// `previous` (the same layers), its parameters too: the weight version
// before the latest, which 2bw's next step still runs on
// (runtime/schedule/two_bw.h). With `scale` (fp16), the loss scale in each
// layer's file (NOTE [Loss scaling]: the same on every worker, so any
// partition finds it).
Status saveStage(const std::string& dir, const model::Model& stage, torch::optim::Optimizer& optimizer,
                 const model::Model* previous = nullptr, const LossScale* scale = nullptr);

// Loads every layer of `stage` from `dir`; errors name the missing or
// mismatching file and tensor. With `previous`, the previous weights into
// it (the latest, where the checkpoint has none). With `scale`, the loss
// scale saved, where the checkpoint has one (one of an fp32 or bf16 run
// starts fp16 at the job's initial scale).
Status loadStage(const std::string& dir, model::Model& stage, torch::optim::Optimizer& optimizer,
                 model::Model* previous = nullptr, LossScale* scale = nullptr);

// The same state in memory (one archive of every layer's, named as their
// files): what replica 0 sends the workers that join a running group
// (NOTE [State for joiners], runtime/worker/stage_setup.cc). `from` names
// the bytes' source in errors.
Result<std::string> saveStageBytes(const model::Model& stage, torch::optim::Optimizer& optimizer,
                                   const LossScale* scale = nullptr);
Status loadStageBytes(const char* data, size_t size, const std::string& from, model::Model& stage,
                      torch::optim::Optimizer& optimizer, LossScale* scale = nullptr);

}  // namespace hydrozoa::runtime
