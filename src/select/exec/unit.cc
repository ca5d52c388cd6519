#include "select/exec/unit.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "data/sampler.h"
#include "profile/memory_tracker.h"
#include "runtime/checkpoint.h"
#include "runtime/job_data.h"
#include "runtime/optimizer.h"
#include "runtime/stage.h"
#include "runtime/trace.h"

namespace hydrozoa::select {

namespace fs = std::filesystem;

namespace {

// NOTE [One global generator]: building a module draws its initial
// weights from libtorch's global generator, and a forward pass re-seeds it
// per layer for its dropout masks (runtime/stage.h). A worker loads one unit
// while it computes another, so building (the load's) and seeding-then-
// drawing (the forward's) take turns; otherwise a load's draws land between
// a layer's seed and its masks, and the training is no longer the same.
std::mutex gGlobalGenerator;

double unixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

data::SamplerOptions minibatchSampler(const cluster::JobSpec& job, std::int64_t datasetSize) {
  data::SamplerOptions so;
  so.dataset_size = datasetSize;
  so.global_batch = job.global_batch;
  so.replicas = 1;
  so.microbatch_size = job.global_batch;  // one microbatch a step: SHARP's minibatch
  so.seed = job.seed;
  so.shuffle = job.shuffle;
  so.drop_last = job.drop_last;
  return so;
}

namespace {

// Tensors go to a temporary name and are renamed: a file that exists is whole.
Status saveTensor(const torch::Tensor& t, const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    torch::save(t, tmp);
  } catch (const c10::Error& e) {
    std::remove(tmp.c_str());
    return ioError(fmt::format("{}: cannot write: {}", path, e.what_without_backtrace()));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return ioError(fmt::format("{}: cannot write", path));
  }
  return Status();
}

Result<torch::Tensor> loadTensor(const std::string& path) {
  if (!fs::exists(path)) return notFound(fmt::format("{}: missing (a unit's input)", path));
  torch::Tensor t;
  try {
    torch::load(t, path);
  } catch (const c10::Error& e) {
    return ioError(fmt::format("{}: cannot read: {}", path, e.what_without_backtrace()));
  }
  return t;
}

// A state directory written whole or not at all: into a temporary
// directory, renamed into place.
Status saveState(const std::string& dir, const model::Model& shard, torch::optim::Optimizer& optimizer) {
  const std::string tmp = dir + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return ioError(fmt::format("{}: cannot make it: {}", tmp, ec.message()));
  HZ_RETURN_IF_ERROR(runtime::saveStage(tmp, shard, optimizer));
  fs::remove_all(dir, ec);  // a run of this unit before, lost before it said so
  fs::rename(tmp, dir, ec);
  if (ec) return ioError(fmt::format("{}: cannot write the shard's state: {}", dir, ec.message()));
  return Status();
}

std::int64_t fileBytes(const std::string& path) {
  std::error_code ec;
  const auto n = path.empty() ? 0 : fs::file_size(path, ec);
  return ec ? 0 : static_cast<std::int64_t>(n);
}

std::string evalFile(const std::string& dir, int shard, std::int64_t batch) {
  return fmt::format("{}/in-{}-{}.pt", dir, shard, batch);
}

}  // namespace

const char* unitKindName(UnitKind kind) {
  switch (kind) {
    case UnitKind::kForward: return "forward";
    case UnitKind::kLast: return "last";
    case UnitKind::kBackward: return "backward";
    case UnitKind::kEvaluate: return "evaluate";
  }
  return "?";
}

Json unitToJson(const UnitSpec& u) {
  return {{"id", u.id},         {"task", u.task},       {"job", u.job},         {"kind", unitKindName(u.kind)},
          {"shard", u.shard},   {"shards", u.shards},   {"first", u.first},     {"last", u.last},
          {"step", u.step},     {"state", u.state},     {"out_state", u.out_state}, {"input", u.input},
          {"grad", u.grad},     {"output", u.output},   {"eval_dir", u.eval_dir},   {"need", u.need},
          {"batch_bytes", u.batch_bytes}};
}

Result<UnitSpec> unitFromJson(const Json& j) {
  UnitSpec u;
  try {
    u.id = j.at("id").get<std::int64_t>();
    u.task = j.at("task").get<int>();
    u.job = j.at("job").get<std::string>();
    const std::string kind = j.at("kind").get<std::string>();
    bool known = false;
    for (UnitKind k : {UnitKind::kForward, UnitKind::kLast, UnitKind::kBackward, UnitKind::kEvaluate}) {
      if (kind == unitKindName(k)) u.kind = k, known = true;
    }
    if (!known) return invalidArgument(fmt::format("unknown unit kind \"{}\"", kind));
    u.shard = j.at("shard").get<int>();
    u.shards = j.at("shards").get<int>();
    u.first = j.at("first").get<int>();
    u.last = j.at("last").get<int>();
    u.step = j.at("step").get<std::int64_t>();
    u.state = j.at("state").get<std::string>();
    u.out_state = j.at("out_state").get<std::string>();
    u.input = j.at("input").get<std::string>();
    u.grad = j.at("grad").get<std::string>();
    u.output = j.at("output").get<std::string>();
    u.eval_dir = j.at("eval_dir").get<std::string>();
    u.need = j.at("need").get<Bytes>();
    u.batch_bytes = j.at("batch_bytes").get<Bytes>();
  } catch (const Json::exception& e) {
    return invalidArgument(fmt::format("a unit: {}", e.what()));
  }
  if (u.shards < 1 || u.shard < 0 || u.need < 0 || u.batch_bytes < 0 || u.shard >= u.shards || u.first < 0 || u.last < u.first || u.step < 0) {
    return invalidArgument(fmt::format("a unit: shard {} of {}, layers {}-{}, step {}: out of range", u.shard,
                                       u.shards, u.first, u.last, u.step));
  }
  return u;
}

Json resultToJson(const UnitResult& r) {
  return {{"id", r.id},
          {"ok", r.ok},
          {"error", r.error},
          {"loss", r.loss},
          {"eval_loss", r.eval_loss},
          {"eval_accuracy", r.eval_accuracy},
          {"wrote_state", r.wrote_state},
          {"load_begin", r.load_begin},
          {"compute_begin", r.compute_begin},
          {"end", r.end},
          {"peak_bytes", r.peak_bytes}};
}

Result<UnitResult> resultFromJson(const Json& j) {
  UnitResult r;
  try {
    r.id = j.at("id").get<std::int64_t>();
    r.ok = j.at("ok").get<bool>();
    r.error = j.at("error").get<std::string>();
    r.loss = j.at("loss").get<double>();
    r.eval_loss = j.at("eval_loss").get<double>();
    r.eval_accuracy = j.at("eval_accuracy").get<double>();
    r.wrote_state = j.at("wrote_state").get<bool>();
    r.load_begin = j.at("load_begin").get<double>();
    r.compute_begin = j.at("compute_begin").get<double>();
    r.end = j.at("end").get<double>();
    r.peak_bytes = j.at("peak_bytes").get<std::int64_t>();
  } catch (const Json::exception& e) {
    return invalidArgument(fmt::format("a unit's result: {}", e.what()));
  }
  return r;
}

std::int64_t stepsPerEpoch(const cluster::JobSpec& job, std::int64_t datasetSize) {
  return data::EpochSampler(minibatchSampler(job, datasetSize)).stepsPerEpoch();
}

std::int64_t totalSteps(const cluster::JobSpec& job, std::int64_t datasetSize) {
  const std::int64_t all = job.epochs * stepsPerEpoch(job, datasetSize);
  return job.max_steps ? std::min(all, *job.max_steps) : all;
}

Result<const DataCache::Task*> DataCache::task(const std::string& jobPath) {
  if (auto it = tasks_.find(jobPath); it != tasks_.end()) return it->second.get();
  const profile::HostAllocations host;  // the data is in host memory, not the budget
  auto t = std::make_unique<Task>();
  HZ_ASSIGN_OR_RETURN(t->job, cluster::loadJobSpec(jobPath));
  std::unique_lock<std::mutex> lock(gGlobalGenerator);  // NOTE [One global generator]
  HZ_ASSIGN_OR_RETURN(const model::Model first,
                      model::buildModel({t->job.model, t->job.model_options}, {t->job.seed, 0, 0}));
  lock.unlock();
  t->input = first.input;
  t->task = first.task;
  const data::DataSpec ds = runtime::jobDataSpec(t->job, t->input, t->task);
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", ds.kind, ds.path, ds.seq_len, ds.synthetic_train,
                                ds.synthetic_test, ds.seed, static_cast<int>(t->input.kind), t->input.vocab,
                                static_cast<int>(t->task.kind), t->task.classes);
  for (std::int64_t d : t->input.shape) key += fmt::format("|{}", d);
  auto& [train, test] = data_[key];
  if (!train) {
    HZ_ASSIGN_OR_RETURN(train, data::openDataset(ds, data::Split::kTrain));
    HZ_ASSIGN_OR_RETURN(test, data::openDataset(ds, data::Split::kTest));
  }
  t->train = train;
  t->test = test;
  t->steps_per_epoch = stepsPerEpoch(t->job, t->train->size());
  t->total_steps = totalSteps(t->job, t->train->size());
  const Task* out = t.get();
  tasks_[jobPath] = std::move(t);
  return out;
}

Bytes prefetchBytes(const UnitSpec& u) {
  Bytes state = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(u.state, ec)) state += fileBytes(e.path().string());
  return 2 * state + fileBytes(u.input) + fileBytes(u.grad) + u.batch_bytes;
}

Result<LoadedUnit> loadUnit(const UnitSpec& u, DataCache& cache) {
  LoadedUnit l;
  l.spec = u;
  l.load_begin = unixNow();
  HZ_ASSIGN_OR_RETURN(l.task, cache.task(u.job));
  const cluster::JobSpec& job = l.task->job;
  if (u.step >= l.task->total_steps && u.kind != UnitKind::kEvaluate) {
    return invalidArgument(fmt::format("a unit of step {}, but the task has {} steps", u.step, l.task->total_steps));
  }
  try {
    {
      std::lock_guard<std::mutex> lock(gGlobalGenerator);
      HZ_ASSIGN_OR_RETURN(l.shard, model::buildModel({job.model, job.model_options}, {job.seed, u.first, u.last}));
    }
    l.optimizer = runtime::makeOptimizer(job.optimizer, l.shard->parameters());
    HZ_RETURN_IF_ERROR(runtime::loadStage(u.state, *l.shard, *l.optimizer));
    if (u.kind == UnitKind::kEvaluate) return l;
    if (u.shard == 0 || u.kind == UnitKind::kLast) {
      const data::EpochSampler sampler(minibatchSampler(job, l.task->train->size()));
      const std::int64_t epoch = u.step / l.task->steps_per_epoch, step = u.step % l.task->steps_per_epoch;
      const data::Batch b = l.task->train->get(sampler.indices(epoch, step, 0, 0));
      if (u.shard == 0) l.input = b.inputs;
      l.labels = b.labels;
    }
    if (u.shard > 0) {
      HZ_ASSIGN_OR_RETURN(l.input, loadTensor(u.input));
    }
    if (u.kind == UnitKind::kBackward) {
      HZ_ASSIGN_OR_RETURN(l.grad, loadTensor(u.grad));
    }
  } catch (const c10::Error& e) {
    return unavailable(fmt::format("loading shard {} (layers {}-{}): {}", u.shard, u.first, u.last,
                                         e.what_without_backtrace()));
  }
  return l;
}

namespace {

Status evaluate(LoadedUnit& l, runtime::StageExecutor& ex, UnitResult* r) {
  const UnitSpec& u = l.spec;
  const data::Dataset& test = *l.task->test;
  const std::int64_t n = test.size(), batch = l.task->job.global_batch;
  const bool last = u.shard + 1 == u.shards;
  double lossSum = 0, correct = 0, count = 0;
  for (std::int64_t b = 0; b * batch < n; ++b) {
    std::vector<std::int64_t> indices;
    for (std::int64_t i = b * batch; i < std::min(n, (b + 1) * batch); ++i) indices.push_back(i);
    data::Batch data;
    if (u.shard == 0 || last) data = test.get(indices);
    torch::Tensor input = data.inputs;
    if (u.shard > 0) {
      HZ_ASSIGN_OR_RETURN(input, loadTensor(evalFile(u.eval_dir, u.shard, b)));
    }
    torch::Tensor out;
    {
      std::lock_guard<std::mutex> lock(gGlobalGenerator);
      out = ex.evaluate(input);
    }
    if (!last) {
      HZ_RETURN_IF_ERROR(saveTensor(out, evalFile(u.eval_dir, u.shard + 1, b)));
      continue;
    }
    const torch::Tensor logits = out.reshape({-1, out.size(-1)});
    const torch::Tensor labels = data.labels.reshape({-1});
    lossSum += torch::nn::functional::cross_entropy(
                   logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                   .item<double>();
    correct += logits.argmax(1).eq(labels).sum().item<double>();
    count += static_cast<double>(labels.numel());
  }
  if (last && count > 0) {
    r->eval_loss = lossSum / count;
    r->eval_accuracy = correct / count;
  }
  return Status();
}

Status compute(LoadedUnit& l, UnitResult* r) {
  const UnitSpec& u = l.spec;
  const cluster::JobSpec& job = l.task->job;
  torch::set_num_threads(job.threads);
  runtime::TraceRecorder trace(false);
  const bool last = u.shard + 1 == u.shards;
  runtime::StageExecutor ex(std::move(*l.shard), last, job.seed, trace);
  l.shard.reset();
  if (u.kind == UnitKind::kEvaluate) return evaluate(l, ex, r);
  const auto writeState = [&]() -> Status {
    HZ_RETURN_IF_ERROR(saveState(u.out_state, ex.model(), *l.optimizer));
    r->wrote_state = true;
    return Status();
  };
  if (u.kind == UnitKind::kForward) {
    ex.setRecompute(true);  // no graph: the backward unit runs the forward again
    torch::Tensor out;
    {
      std::lock_guard<std::mutex> lock(gGlobalGenerator);
      out = ex.forward(0, l.input, u.step, 0);
    }
    HZ_RETURN_IF_ERROR(saveTensor(out, u.output));
    bool buffers = false;
    for (const auto& layer : ex.model().layers) buffers = buffers || !layer.module->buffers().empty();
    if (buffers) HZ_RETURN_IF_ERROR(writeState());  // BatchNorm's statistics moved
    return Status();
  }
  // The backward of a shard whose forward ran in an earlier unit: the
  // forward again (autograd on), its statistics put back afterwards.
  std::vector<torch::Tensor> buffers, kept;
  if (u.kind == UnitKind::kBackward) {
    for (const auto& layer : ex.model().layers) {
      for (const torch::Tensor& b : layer.module->buffers()) {
        buffers.push_back(b);
        kept.push_back(b.clone());
      }
    }
  }
  // One minibatch a step: its loss weight n / N is 1 (NOTE [Equivalence with one process], runtime/stage.h).
  {
    std::lock_guard<std::mutex> lock(gGlobalGenerator);
    (void)ex.forward(0, l.input, u.step, 0, l.labels, 1.0, u.kind == UnitKind::kLast ? &r->loss : nullptr);
  }
  const torch::Tensor gradIn = ex.backward(0, l.grad);
  {
    torch::NoGradGuard guard;
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(kept[i]);
  }
  const std::int64_t epoch = u.step / l.task->steps_per_epoch;
  runtime::setLearningRate(*l.optimizer, runtime::scheduledLearningRate(job.optimizer, job.lr_schedule, u.step, epoch,
                                                                        l.task->total_steps));
  l.optimizer->step();
  l.optimizer->zero_grad();
  HZ_RETURN_IF_ERROR(writeState());
  if (!u.output.empty()) HZ_RETURN_IF_ERROR(saveTensor(gradIn, u.output));
  return Status();
}

}  // namespace

UnitResult computeUnit(LoadedUnit& l) {
  UnitResult r;
  r.id = l.spec.id;
  r.load_begin = l.load_begin;
  r.compute_begin = unixNow();
  Status s;
  try {
    s = compute(l, &r);
  } catch (const c10::Error& e) {
    s = unavailable(e.what_without_backtrace());
  }
  if (!s.ok()) {
    const UnitResult f = failedUnit(l.spec, s);
    r.ok = false;
    r.error = f.error;
  }
  l = LoadedUnit();  // its memory back before it says so
  r.end = unixNow();
  r.peak_bytes = profile::MemoryTracker::instance().peak();
  return r;
}

UnitResult failedUnit(const UnitSpec& u, const Status& why) {
  UnitResult r;
  r.id = u.id;
  r.ok = false;
  r.error = fmt::format("{} unit of shard {} (layers {}-{}), step {}: {}", unitKindName(u.kind), u.shard, u.first,
                        u.last, u.step, why.message());
  r.load_begin = r.compute_begin = r.end = unixNow();
  return r;
}

UnitResult runUnit(const UnitSpec& u, DataCache& cache) {
  auto l = loadUnit(u, cache);
  return l.ok() ? computeUnit(*l) : failedUnit(u, l.status());
}

Status writeInitialState(const cluster::JobSpec& job, const std::vector<std::pair<int, int>>& shards,
                         const std::vector<std::string>& dirs) {
  const profile::HostAllocations host;
  for (size_t k = 0; k < shards.size(); ++k) {
    HZ_ASSIGN_OR_RETURN(model::Model shard, model::buildModel({job.model, job.model_options},
                                                              {job.seed, shards[k].first, shards[k].second}));
    auto optimizer = runtime::makeOptimizer(job.optimizer, shard.parameters());
    HZ_RETURN_IF_ERROR(saveState(dirs.at(k), shard, *optimizer));
  }
  return Status();
}

}  // namespace hydrozoa::select
