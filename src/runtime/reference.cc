#include "runtime/reference.h"

#include <algorithm>
#include <map>
#include <optional>

#include "data/dataset.h"
#include "data/sampler.h"
#include "runtime/optimizer.h"
#include "runtime/stage.h"

namespace hydrozoa::runtime {

namespace {

// The mean loss of `b` through every layer of `m`, each seeded as the
// workers seed it (NOTE [Equivalence with one process], stage.h).
torch::Tensor meanLoss(model::Model& m, const data::Batch& b, std::uint64_t seed, std::int64_t step,
                       std::int64_t stepMicrobatch, const model::TaskSpec& task) {
  torch::Tensor x = b.inputs;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    torch::manual_seed(layerSeed(seed, step, stepMicrobatch, static_cast<int>(i)));
    x = m.layers[i].module->forward(x);
  }
  return model::taskLoss(task, x, b.labels);
}

std::vector<torch::Tensor> cloneAll(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : params) out.push_back(p.detach().clone());
  return out;
}

}  // namespace

Result<ReferenceRun> trainReference(const ReferenceOptions& o) {
  const cluster::JobSpec& job = o.job;
  torch::set_num_threads(job.threads);
  HZ_ASSIGN_OR_RETURN(model::Model m, model::buildModel({job.model, job.model_options}, {job.seed, 0, -1}));
  m.train(true);
  data::DataSpec ds;
  ds.kind = job.dataset;
  ds.path = job.data_path;
  ds.seq_len = m.input.kind == model::InputKind::kTokens ? m.input.shape.at(0) : 0;
  ds.synthetic_train = job.synthetic_train;
  ds.synthetic_test = job.synthetic_test;
  ds.synthetic_input = m.input;
  ds.synthetic_task = m.task;
  ds.seed = job.seed;
  HZ_ASSIGN_OR_RETURN(auto train, data::openDataset(ds, data::Split::kTrain));
  data::SamplerOptions so;
  so.dataset_size = train->size();
  so.global_batch = job.global_batch;
  so.replicas = o.replicas;
  so.microbatch_size = o.microbatch_size;
  so.seed = job.seed;
  so.shuffle = job.shuffle;
  so.drop_last = job.drop_last;
  auto optimizer = makeOptimizer(job.optimizer, m.parameters());
  // With stale weights, the passes run on `previous` (W(t−1)); m holds W(t).
  std::optional<model::Model> previous;
  if (o.stale_weights) {
    HZ_ASSIGN_OR_RETURN(previous, model::buildModel({job.model, job.model_options}, {job.seed, 0, -1}));
    previous->train(true);
  }
  model::Model& work = previous ? *previous : m;
  ReferenceRun run;
  if (!o.weight_stashing_stages.empty()) {
    // PipeDream: `work` holds, layer by layer, the version each stage's
    // passes see; `history` every version still needed, by update count.
    const int p = static_cast<int>(o.weight_stashing_stages.size());
    HZ_ASSIGN_OR_RETURN(model::Model passes, model::buildModel({job.model, job.model_options}, {job.seed, 0, -1}));
    passes.train(true);
    std::vector<int> inFlight;  // per layer: p − (its stage)
    for (size_t i = 0; i < m.layers.size(); ++i) {
      int s = 0;
      while (s + 1 < p && o.weight_stashing_stages[static_cast<size_t>(s + 1)] <= static_cast<int>(i)) ++s;
      inFlight.push_back(p - s);
    }
    std::map<std::int64_t, std::vector<torch::Tensor>> history;
    std::int64_t updates = 0, base = 0, sinceDrain = 0;
    history[0] = cloneAll(m.parameters());
    for (std::int64_t g = 0; g < o.steps; ++g) {
      const data::EpochSampler sampler(so);
      const std::int64_t epoch = g / sampler.stepsPerEpoch(), step = g % sampler.stepsPerEpoch();
      const std::int64_t M = sampler.microbatchesPerStep();
      const double stepSamples = static_cast<double>(sampler.stepSamples(step));
      int rounds = 0;
      for (int r = 0; r < so.replicas; ++r) rounds = std::max(rounds, sampler.microbatches(step, r));
      double loss = 0;
      for (int j = 0; j < rounds; ++j) {
        {
          torch::NoGradGuard guard;
          for (size_t i = 0; i < passes.layers.size(); ++i) {
            const std::int64_t v = base + std::max<std::int64_t>(0, sinceDrain - inFlight[i] + 1);
            const std::vector<torch::Tensor>& version = history.at(v);
            std::int64_t at = 0;
            for (size_t before = 0; before < i; ++before) {
              at += static_cast<std::int64_t>(passes.layers[before].module->parameters().size());
            }
            for (torch::Tensor& t : passes.layers[i].module->parameters()) t.copy_(version[static_cast<size_t>(at++)]);
          }
        }
        double samples = 0;
        for (int r = 0; r < so.replicas; ++r) {
          if (j < sampler.microbatches(step, r)) samples += static_cast<double>(sampler.microbatchSize(step, r, j));
        }
        for (int r = 0; r < so.replicas; ++r) {
          if (j >= sampler.microbatches(step, r)) continue;
          const data::Batch b = train->get(sampler.indices(epoch, step, r, j));
          const torch::Tensor mean = meanLoss(passes, b, job.seed, g, r * M + j, m.task);
          const double n = static_cast<double>(b.labels.size(0));
          (mean * (n / samples)).backward();
          loss += mean.item<double>() * n / stepSamples;
        }
        {
          torch::NoGradGuard guard;
          const std::vector<torch::Tensor> latest = m.parameters(), stashed = passes.parameters();
          for (size_t i = 0; i < latest.size(); ++i) {
            latest[i].mutable_grad() = stashed[i].grad();
            stashed[i].mutable_grad() = torch::Tensor();
          }
        }
        setLearningRate(*optimizer, scheduledLearningRate(job.optimizer, job.lr_schedule, g, epoch, o.steps));
        optimizer->step();
        optimizer->zero_grad();
        history[++updates] = cloneAll(m.parameters());
        history.erase(history.begin(), history.lower_bound(updates - p));
        ++sinceDrain;
      }
      run.losses.push_back(loss);
      bool drains = step + 1 == sampler.stepsPerEpoch() || g + 1 == o.steps;
      for (int r = 0; r < so.replicas && !drains; ++r) drains = sampler.microbatches(step + 1, r) == 0;
      if (drains) {
        base = updates;
        sinceDrain = 0;
      }
    }
    for (size_t l = 0; l < m.layers.size(); ++l) {  // one set of statistics, the passes'
      const std::vector<torch::Tensor> to = m.layers[l].module->buffers(), from = passes.layers[l].module->buffers();
      torch::NoGradGuard guard;
      for (size_t b = 0; b < to.size(); ++b) to[b].copy_(from[b]);
    }
    run.model = std::move(m);
    return run;
  }
  for (std::int64_t g = 0; g < o.steps; ++g) {
    std::int64_t epoch = 0, step = 0;
    double lrFactor = 1;
    if (o.epochs) {
      const cluster::Segment& seg = o.epochs->atStep(g);
      so.replicas = seg.replicas;
      so.global_batch = seg.replicas * o.epochs->perReplicaBatch();
      epoch = o.epochs->epochOf(g);
      step = o.epochs->stepInEpoch(g);
      lrFactor = seg.lr_factor;
    }
    const data::EpochSampler sampler(so);
    if (!o.epochs) {
      epoch = g / sampler.stepsPerEpoch();
      step = g % sampler.stepsPerEpoch();
    }
    const std::int64_t M = sampler.microbatchesPerStep();
    const double stepSamples = static_cast<double>(sampler.stepSamples(step));
    double loss = 0;
    for (int r = 0; r < so.replicas; ++r) {
      for (int mb = 0; mb < sampler.microbatches(step, r); ++mb) {
        const data::Batch b = train->get(sampler.indices(epoch, step, r, mb));
        const torch::Tensor mean = meanLoss(work, b, job.seed, g, r * M + mb, m.task);
        const double weight = static_cast<double>(b.labels.size(0)) / stepSamples;
        (mean * weight).backward();
        loss += mean.item<double>() * weight;
      }
    }
    setLearningRate(*optimizer, lrFactor * scheduledLearningRate(job.optimizer, job.lr_schedule, g, epoch, o.steps));
    if (previous) {
      // The gradient at W(t−1) updates W(t); W(t) is the next step's to run on.
      torch::NoGradGuard guard;
      const std::vector<torch::Tensor> latest = m.parameters(), stale = previous->parameters();
      for (size_t i = 0; i < latest.size(); ++i) {
        latest[i].mutable_grad() = stale[i].grad();
        stale[i].mutable_grad() = torch::Tensor();
        stale[i].copy_(latest[i]);
      }
      for (size_t l = 0; l < m.layers.size(); ++l) {  // one set of statistics, the passes'
        const std::vector<torch::Tensor> to = m.layers[l].module->buffers(), from = previous->layers[l].module->buffers();
        for (size_t b = 0; b < to.size(); ++b) to[b].copy_(from[b]);
      }
    }
    optimizer->step();
    optimizer->zero_grad();
    run.losses.push_back(loss);
  }
  run.model = std::move(m);
  return run;
}

}  // namespace hydrozoa::runtime
