#include "runtime/checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "model/tensor_parallel.h"
#include "runtime/optimizer.h"

namespace hydrozoa::runtime {

std::string layerFileName(int globalLayer) { return fmt::format("layer-{:04d}.pt", globalLayer); }

namespace {

// NOTE [Checkpoints of split layers]
// A layer split over a tensor-parallel group is saved whole: every rank
// takes part in gathering each split tensor (a parameter, its optimizer
// state, its previous weights), in the same order, and rank 0 writes the
// file, as an unsplit stage would. Loading cuts each whole tensor for the
// loading rank (model/tensor_parallel.h shardOf). So a checkpoint does not
// depend on t: a run resumes at any t, or unsplit.

// `t` whole: gathered over the group when it is a slice of parameter `name`.
torch::Tensor whole(const model::Model& stage, const model::LayerModule& module, const std::string& name,
                    const torch::Tensor& t) {
  if (!stage.tensor || stage.tensor->size() == 1) return t;
  const auto dim = module.shardDim(name);
  if (!dim || t.dim() == 0) return t;
  return model::unshard(stage.tensor->allgather(t.detach().contiguous()), *dim);
}

// `saved` (whole) cut for this rank when the model holds a slice of it.
torch::Tensor mine(const model::Model& stage, const model::LayerModule& module, const std::string& name,
                   const torch::Tensor& saved, const torch::Tensor& like) {
  if (!stage.tensor || stage.tensor->size() == 1 || saved.sizes() == like.sizes() || saved.dim() == 0) return saved;
  const auto dim = module.shardDim(name);
  if (!dim || saved.dim() <= dim->dim || saved.size(dim->dim) != like.size(dim->dim) * stage.tensor->size()) {
    return saved;  // the caller names the mismatch
  }
  return model::shardOf(saved, *dim, stage.tensor->rank(), stage.tensor->size());
}

// One layer's tensors (layer `i` of `stage`) into `archive`; every rank of
// a tensor group takes part (NOTE [Checkpoints of split layers]).
void writeLayer(torch::serialize::OutputArchive& archive, const model::Model& stage, size_t i,
                torch::optim::Optimizer& optimizer, const model::Model* previous, const LossScale* scale) {
  if (scale) {
    archive.write("loss_scale", torch::tensor({scale->value(), static_cast<double>(scale->cleanSteps()),
                                               static_cast<double>(scale->skipped())},
                                              torch::kDouble));
  }
  const auto& module = *stage.layers[i].module;
  for (const auto& p : module.named_parameters()) {
    archive.write("param/" + p.key(), whole(stage, module, p.key(), p.value()).detach().cpu());
    for (const auto& [name, t] : optimizerStateOf(optimizer, p.value())) {
      archive.write("optim/" + p.key() + "/" + name, whole(stage, module, p.key(), t).cpu());
    }
  }
  for (const auto& b : module.named_buffers()) archive.write("buffer/" + b.key(), b.value().cpu());
  if (previous) {
    for (const auto& p : previous->layers.at(i).module->named_parameters()) {
      archive.write("previous/" + p.key(), whole(stage, module, p.key(), p.value()).detach().cpu());
    }
  }
}

// Layer `i` of `stage` from `archive` (read from `where`, which errors name).
Status readLayer(torch::serialize::InputArchive& archive, const std::string& where, model::Model& stage, size_t i,
                 torch::optim::Optimizer& optimizer, model::Model* previous, LossScale* scale) {
  torch::Tensor kept;
  if (scale && archive.try_read("loss_scale", kept)) {
    auto at = [&](int k) { return kept[k].item<double>(); };
    if (kept.scalar_type() != torch::kDouble || kept.dim() != 1 || kept.numel() != 3 || !kept.isfinite().all().item<bool>() ||
        at(0) < 1 || at(0) > 0x1p64 || at(1) < 0 || at(1) > 0x1p53 || at(2) < 0 || at(2) > 0x1p53) {
      return parseError(fmt::format("{}: its loss_scale is not [scale from 1 to 2^64, clean steps, skipped steps]",
                                    where));
    }
    scale->restore(at(0), static_cast<std::int64_t>(at(1)), static_cast<std::int64_t>(at(2)));
  }
  auto& module = *stage.layers[i].module;
  for (auto& p : module.named_parameters()) {
    torch::Tensor saved;
    if (!archive.try_read("param/" + p.key(), saved)) {
      return parseError(fmt::format("{}: has no parameter {} (was it saved from another model?)", where, p.key()));
    }
    saved = mine(stage, module, p.key(), saved, p.value());
    if (saved.sizes() != p.value().sizes()) {
      return parseError(fmt::format("{}: parameter {} has shape {} but the model's is {}", where, p.key(),
                                    model::shapeString(saved.sizes().vec()),
                                    model::shapeString(p.value().sizes().vec())));
    }
    p.value().copy_(saved);
    ParamState state;
    for (const char* name : {"momentum_buffer", "step", "exp_avg", "exp_avg_sq"}) {
      torch::Tensor t;
      if (archive.try_read("optim/" + p.key() + "/" + name, t)) {
        state.emplace_back(name, mine(stage, module, p.key(), t, p.value()).to(p.value().device()));
      }
    }
    setOptimizerStateOf(optimizer, p.value(), state);
  }
  for (auto& b : module.named_buffers()) {
    torch::Tensor saved;
    if (archive.try_read("buffer/" + b.key(), saved)) b.value().copy_(saved);
  }
  if (previous) {
    const auto current = module.named_parameters();
    for (auto& p : previous->layers.at(i).module->named_parameters()) {
      torch::Tensor saved;
      if (!archive.try_read("previous/" + p.key(), saved)) saved = current[p.key()];
      saved = mine(stage, module, p.key(), saved, p.value());
      if (saved.sizes() != p.value().sizes()) {
        return parseError(fmt::format("{}: the previous weights' {} have shape {} but the model's is {}", where,
                                      p.key(), model::shapeString(saved.sizes().vec()),
                                      model::shapeString(p.value().sizes().vec())));
      }
      p.value().copy_(saved);
    }
  }
  return Status();
}

}  // namespace

Status saveStage(const std::string& dir, const model::Model& stage, torch::optim::Optimizer& optimizer,
                 const model::Model* previous, const LossScale* scale) {
  // NOTE [Checkpoints of split layers]: only rank 0 of a group writes.
  const bool writes = !stage.tensor || stage.tensor->rank() == 0;
  for (size_t i = 0; i < stage.layers.size(); ++i) {
    const int global = stage.first + static_cast<int>(i);
    const std::string path = dir + "/" + layerFileName(global);
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    try {
      torch::serialize::OutputArchive archive;
      writeLayer(archive, stage, i, optimizer, previous, scale);
      if (!writes) continue;
      archive.save_to(tmp);
    } catch (const c10::Error& e) {
      std::remove(tmp.c_str());
      return ioError(fmt::format("{}: cannot write the checkpoint: {}", path, e.what_without_backtrace()));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      return ioError(fmt::format("{}: cannot write the checkpoint", path));
    }
  }
  return Status();
}

Status loadStage(const std::string& dir, model::Model& stage, torch::optim::Optimizer& optimizer,
                 model::Model* previous, LossScale* scale) {
  torch::NoGradGuard guard;
  for (size_t i = 0; i < stage.layers.size(); ++i) {
    const int global = stage.first + static_cast<int>(i);
    const std::string path = dir + "/" + layerFileName(global);
    if (!std::filesystem::exists(path)) {
      return notFound(fmt::format("{}: missing from the checkpoint (layer {} \"{}\")", path, global,
                                  stage.layers[i].name));
    }
    try {
      torch::serialize::InputArchive archive;
      archive.load_from(path);
      HZ_RETURN_IF_ERROR(readLayer(archive, path, stage, i, optimizer, previous, scale));
    } catch (const c10::Error& e) {
      return parseError(fmt::format("{}: cannot read the checkpoint ({}); is it truncated?", path,
                                    std::string(e.what_without_backtrace()).substr(0, 200)));
    }
  }
  return Status();
}

Result<std::string> saveStageBytes(const model::Model& stage, torch::optim::Optimizer& optimizer,
                                   const LossScale* scale) {
  try {
    torch::serialize::OutputArchive all;
    for (size_t i = 0; i < stage.layers.size(); ++i) {
      torch::serialize::OutputArchive layer;
      writeLayer(layer, stage, i, optimizer, nullptr, scale);
      all.write(layerFileName(stage.first + static_cast<int>(i)), layer);
    }
    std::ostringstream out;
    all.save_to(out);
    return out.str();
  } catch (const c10::Error& e) {
    return internalError(fmt::format("cannot serialize the stage's state: {}", e.what_without_backtrace()));
  }
}

Status loadStageBytes(const char* data, size_t size, const std::string& from, model::Model& stage,
                      torch::optim::Optimizer& optimizer, LossScale* scale) {
  torch::NoGradGuard guard;
  try {
    torch::serialize::InputArchive all;
    all.load_from(data, size);
    for (size_t i = 0; i < stage.layers.size(); ++i) {
      const int global = stage.first + static_cast<int>(i);
      const std::string where = fmt::format("layer {} of {}", global, from);
      torch::serialize::InputArchive layer;
      if (!all.try_read(layerFileName(global), layer)) {
        return notFound(fmt::format("{}: missing (layer \"{}\")", where, stage.layers[i].name));
      }
      HZ_RETURN_IF_ERROR(readLayer(layer, where, stage, i, optimizer, nullptr, scale));
    }
  } catch (const c10::Error& e) {
    return parseError(fmt::format("{}: cannot read the state ({})", from,
                                  std::string(e.what_without_backtrace()).substr(0, 200)));
  }
  return Status();
}

}  // namespace hydrozoa::runtime
