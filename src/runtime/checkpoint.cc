#include "runtime/checkpoint.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "runtime/optimizer.h"

namespace hydrozoa::runtime {

std::string layerFileName(int globalLayer) { return fmt::format("layer-{:04d}.pt", globalLayer); }

Status saveStage(const std::string& dir, const model::Model& stage, torch::optim::Optimizer& optimizer,
                 const model::Model* previous) {
  for (size_t i = 0; i < stage.layers.size(); ++i) {
    const int global = stage.first + static_cast<int>(i);
    const std::string path = dir + "/" + layerFileName(global);
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    try {
      torch::serialize::OutputArchive archive;
      const auto& module = *stage.layers[i].module;
      for (const auto& p : module.named_parameters()) {
        archive.write("param/" + p.key(), p.value().detach().cpu());
        for (const auto& [name, t] : optimizerStateOf(optimizer, p.value())) {
          archive.write("optim/" + p.key() + "/" + name, t.cpu());
        }
      }
      for (const auto& b : module.named_buffers()) archive.write("buffer/" + b.key(), b.value().cpu());
      if (previous) {
        for (const auto& p : previous->layers.at(i).module->named_parameters()) {
          archive.write("previous/" + p.key(), p.value().detach().cpu());
        }
      }
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
                 model::Model* previous) {
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
      auto& module = *stage.layers[i].module;
      for (auto& p : module.named_parameters()) {
        torch::Tensor saved;
        if (!archive.try_read("param/" + p.key(), saved)) {
          return parseError(fmt::format("{}: has no parameter {} (was it saved from another model?)", path, p.key()));
        }
        if (saved.sizes() != p.value().sizes()) {
          return parseError(fmt::format("{}: parameter {} has shape {} but the model's is {}", path, p.key(),
                                        model::shapeString(saved.sizes().vec()),
                                        model::shapeString(p.value().sizes().vec())));
        }
        p.value().copy_(saved);
        ParamState state;
        for (const char* name : {"momentum_buffer", "step", "exp_avg", "exp_avg_sq"}) {
          torch::Tensor t;
          if (archive.try_read("optim/" + p.key() + "/" + name, t)) state.emplace_back(name, t.to(p.value().device()));
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
          if (saved.sizes() != p.value().sizes()) {
            return parseError(fmt::format("{}: the previous weights' {} have shape {} but the model's is {}", path,
                                          p.key(), model::shapeString(saved.sizes().vec()),
                                          model::shapeString(p.value().sizes().vec())));
          }
          p.value().copy_(saved);
        }
      }
    } catch (const c10::Error& e) {
      return parseError(fmt::format("{}: cannot read the checkpoint ({}); is it truncated?", path,
                                    std::string(e.what_without_backtrace()).substr(0, 200)));
    }
  }
  return Status();
}

}  // namespace hydrozoa::runtime
