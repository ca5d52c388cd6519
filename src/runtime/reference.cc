#include "runtime/reference.h"

#include <algorithm>
#include <map>
#include <optional>

#include "data/dataset.h"
#include "data/sampler.h"
#include "runtime/job_data.h"
#include "runtime/loss_scale.h"
#include "runtime/optimizer.h"
#include "runtime/precision.h"
#include "runtime/schedule/pipedream.h"
#include "runtime/stage.h"

namespace hydrozoa::runtime {

namespace {

// The mean loss of `b` through every layer of `m`, each seeded as the
// workers seed it (NOTE [Equivalence with one process], stage.h), under the
// job's autocast as theirs (NOTE [Mixed precision], precision.h).
torch::Tensor meanLoss(model::Model& m, const data::Batch& b, const cluster::JobSpec& job, std::int64_t step,
                       std::int64_t stepMicrobatch, const model::TaskSpec& task) {
  const Autocast autocast(precisionType(job.precision).value(), c10::DeviceType::CPU);
  torch::Tensor x = b.inputs;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    torch::manual_seed(layerSeed(job.seed, step, stepMicrobatch, static_cast<int>(i)));
    x = m.layers[i].module->forward(x);
  }
  return model::taskLoss(task, x, b.labels);
}

std::vector<torch::Tensor> cloneAll(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& p : params) out.push_back(p.detach().clone());
  return out;
}

// The stage each layer of `m` is on, its stages starting at `firsts`.
std::vector<int> stageOfLayers(const model::Model& m, const std::vector<int>& firsts) {
  std::vector<int> stage;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    int s = 0;
    while (s + 1 < static_cast<int>(firsts.size()) && firsts[static_cast<size_t>(s + 1)] <= static_cast<int>(i)) ++s;
    stage.push_back(s);
  }
  return stage;
}

// ReferenceOptions::stage_replicas. First the weights each microbatch's
// passes see on each stage, from the schedule's order on each replica (as
// the step executor runs it); then the microbatches, each as soon as the
// versions it needs exist, and each stage's updates as their groups fill.
Result<ReferenceRun> trainRoundRobin(const ReferenceOptions& o, model::Model m, const data::Dataset& train,
                                     const data::SamplerOptions& so) {
  const cluster::JobSpec& job = o.job;
  const std::vector<int>& r = o.stage_replicas;
  const size_t P = r.size();
  const data::EpochSampler sampler(so);
  const std::int64_t perEpoch = sampler.stepsPerEpoch();
  auto microbatchesAt = [&](std::int64_t g) { return sampler.stepMicrobatches(g % perEpoch); };
  auto drainsAfter = [&](std::int64_t g) { return (g + 1) % perEpoch == 0 || g + 1 == o.steps; };

  // version[(g, k)][s]: stage s's updates before microbatch k of step g;
  // first[g][s]: stage s's updates before step g.
  std::map<std::pair<std::int64_t, int>, std::vector<std::int64_t>> version;
  std::vector<std::vector<std::int64_t>> first;
  std::vector<std::int64_t> updates(P, 0);
  const PipeDreamSchedule schedule;
  std::vector<std::vector<int>> carried(P);
  for (size_t s = 0; s < P; ++s) carried[s].assign(static_cast<size_t>(r[s]), 0);
  for (std::int64_t g = 0; g < o.steps; ++g) {
    const int K = microbatchesAt(g), next = drainsAfter(g) ? 0 : microbatchesAt(g + 1);
    first.push_back(updates);
    for (size_t s = 0; s < P; ++s) {
      for (int j = 0; j < r[s]; ++j) {
        const PipelineShape shape = PipelineShape{static_cast<int>(s), static_cast<int>(P), 1, 0, r, j}.forStep(K);
        int& c = carried[s][static_cast<size_t>(j)];
        std::int64_t done = updates[s];
        for (const Action& a : schedule.actions(shape, c, next)) {
          if (a.kind == ActionKind::kOptimizerStep) ++done;
          if (a.kind != ActionKind::kForward) continue;
          std::vector<std::int64_t>& v = version[{g + a.step, a.microbatch * r[s] + j}];
          v.resize(P, 0);
          v[s] = done;
        }
        c = next > 0 ? schedule.carriedInto(shape, next) : 0;
      }
      updates[s] += (K + r[s] - 1) / r[s];
    }
  }

  // Each stage's parameters (in the model's order), optimizer and versions,
  // and the copy of the model the passes run on.
  const std::vector<int> stageOf = stageOfLayers(m, o.weight_stashing_stages);
  HZ_ASSIGN_OR_RETURN(model::Model passes, model::buildModel({job.model, job.model_options}, {job.seed, 0, -1}));
  passes.train(true);
  std::vector<std::vector<torch::Tensor>> params(P), passParams(P);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto s = static_cast<size_t>(stageOf[i]);
    for (const torch::Tensor& t : m.layers[i].module->parameters()) params[s].push_back(t);
    for (const torch::Tensor& t : passes.layers[i].module->parameters()) passParams[s].push_back(t);
  }
  std::vector<std::unique_ptr<torch::optim::Optimizer>> optimizers;
  std::vector<std::map<std::int64_t, std::vector<torch::Tensor>>> history(P);
  for (size_t s = 0; s < P; ++s) {
    optimizers.push_back(makeOptimizer(job.optimizer, params[s]));
    history[s][0] = cloneAll(params[s]);
  }
  std::vector<std::int64_t> applied(P, 0);
  ReferenceRun run;
  for (std::int64_t g = 0; g < o.steps; ++g) {
    const std::int64_t epoch = g / perEpoch, step = g % perEpoch;
    const int K = microbatchesAt(g);
    const double stepSamples = static_cast<double>(sampler.stepSamples(step));
    // Per stage and update of the step: the gradients summed (each
    // microbatch's weighted by its samples), the samples, the microbatches in.
    struct Group {
      std::vector<torch::Tensor> grad;
      double samples = 0;
      int in = 0;
    };
    std::vector<std::map<int, Group>> groups(P);
    std::vector<bool> done(static_cast<size_t>(K), false);
    double loss = 0;
    for (int left = K; left > 0; --left) {
      // The first microbatch whose versions exist on every stage.
      int k = 0;
      const std::vector<std::int64_t>* needs = nullptr;
      for (; k < K; ++k) {
        if (done[static_cast<size_t>(k)]) continue;
        needs = &version.at({g, k});
        bool ready = true;
        for (size_t s = 0; s < P; ++s) ready = ready && (*needs)[s] <= applied[s];
        if (ready) break;
      }
      if (k == K) return internalError("round-robin reference: no microbatch can run (a schedule deadlock)");
      done[static_cast<size_t>(k)] = true;
      {
        torch::NoGradGuard guard;
        for (size_t s = 0; s < P; ++s) {
          const std::vector<torch::Tensor>& v = history[s].at((*needs)[s]);
          for (size_t i = 0; i < v.size(); ++i) passParams[s][i].copy_(v[i]);
        }
      }
      const data::Batch b = train.get(sampler.indices(epoch, step, 0, k));
      const double n = static_cast<double>(b.labels.size(0));
      const torch::Tensor mean = meanLoss(passes, b, job, g, k, m.task);
      (mean * n).backward();
      loss += mean.item<double>() * n / stepSamples;
      for (size_t s = 0; s < P; ++s) {
        Group& group = groups[s][k / r[s]];
        for (size_t i = 0; i < passParams[s].size(); ++i) {
          torch::Tensor& grad = passParams[s][i].mutable_grad();
          torch::Tensor mine = grad.defined() ? grad.detach().clone() : torch::zeros_like(passParams[s][i]);
          if (group.grad.size() <= i) {
            group.grad.push_back(mine);
          } else {
            group.grad[i] += mine;
          }
          grad = torch::Tensor();
        }
        group.samples += n;
        ++group.in;
        // The stage's next updates whose groups are full, in order.
        for (;;) {
          const int u = static_cast<int>(applied[s] - first[static_cast<size_t>(g)][s]);
          auto it = groups[s].find(u);
          if (it == groups[s].end() || it->second.in < std::min(r[s], K - u * r[s])) break;
          {
            torch::NoGradGuard guard;
            for (size_t i = 0; i < params[s].size(); ++i) {
              params[s][i].mutable_grad() = it->second.grad[i] / it->second.samples;
            }
          }
          setLearningRate(*optimizers[s], scheduledLearningRate(job.optimizer, job.lr_schedule, g, epoch, o.steps));
          optimizers[s]->step();
          optimizers[s]->zero_grad();
          history[s][++applied[s]] = cloneAll(params[s]);
          groups[s].erase(it);
        }
      }
    }
    run.losses.push_back(loss);
  }
  run.model = std::move(m);
  return run;
}

}  // namespace

Result<ReferenceRun> trainReference(const ReferenceOptions& o) {
  const cluster::JobSpec& job = o.job;
  HZ_RETURN_IF_ERROR(precisionType(job.precision).status());  // meanLoss() takes it as valid
  // NOTE [Loss scaling]: the synchronous schedules' updates only.
  std::optional<LossScale> lossScale;
  if (job.precision == "fp16") {
    if (o.stale_weights || !o.weight_stashing_stages.empty()) {
      return invalidArgument("the reference runs fp16 for the synchronous schedules only");
    }
    lossScale.emplace(job.loss_scale_initial, job.loss_scale_growth_interval);
  }
  torch::set_num_threads(job.threads);
  HZ_ASSIGN_OR_RETURN(model::Model m, model::buildModel({job.model, job.model_options}, {job.seed, 0, -1}));
  m.train(true);
  const data::DataSpec ds = jobDataSpec(job, m.input, m.task);
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
  if (!o.stage_replicas.empty()) {
    if (o.stage_replicas.size() != o.weight_stashing_stages.size()) {
      return invalidArgument("the reference needs each stage's first layer and replicas");
    }
    so.replicas = 1;
    return trainRoundRobin(o, std::move(m), *train, so);
  }
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
      inFlight.push_back(o.vertical_sync ? p : p - s);
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
          const torch::Tensor mean = meanLoss(passes, b, job, g, r * M + j, m.task);
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
        const torch::Tensor mean = meanLoss(work, b, job, g, r * M + mb, m.task);
        const double weight = static_cast<double>(b.labels.size(0)) / stepSamples;
        (lossScale ? mean * weight * lossScale->value() : mean * weight).backward();
        loss += mean.item<double>() * weight;
      }
    }
    setLearningRate(*optimizer, lrFactor * scheduledLearningRate(job.optimizer, job.lr_schedule, g, epoch, o.steps));
    run.losses.push_back(loss);
    if (lossScale) {
      torch::NoGradGuard guard;
      const bool skip = unscaleGradients(m.parameters(), 1 / lossScale->value());
      lossScale->update(skip);
      run.loss_scales.push_back(lossScale->value());
      if (skip) {
        optimizer->zero_grad();
        continue;
      }
    }
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
  }
  run.model = std::move(m);
  return run;
}

}  // namespace hydrozoa::runtime
