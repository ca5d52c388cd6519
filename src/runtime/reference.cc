#include "runtime/reference.h"

#include <optional>

#include "data/dataset.h"
#include "data/sampler.h"
#include "runtime/optimizer.h"
#include "runtime/stage.h"

namespace hydrozoa::runtime {

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
        torch::Tensor x = b.inputs;
        for (size_t i = 0; i < work.layers.size(); ++i) {
          torch::manual_seed(layerSeed(job.seed, g, r * M + mb, static_cast<int>(i)));
          x = work.layers[i].module->forward(x);
        }
        const torch::Tensor mean = model::taskLoss(m.task, x, b.labels);
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
