#include "runtime/grad_sync.h"

#include <chrono>

#include "plan/cost/allreduce.h"

namespace hydrozoa::runtime {

GradientSync::GradientSync(Transport* transport, std::vector<std::vector<torch::Tensor>> layerParams,
                           Bytes firstBucketBytes, Bytes bucketBytes, TraceRecorder& trace)
    : transport_(transport && transport->stageReplicas() > 1 ? transport : nullptr),
      layerParams_(std::move(layerParams)),
      bucketOf_(layerParams_.size(), -1),
      ready_(layerParams_.size(), false),
      trace_(trace) {
  if (!transport_) return;
  // The planner costs the same buckets (plan/cost/allreduce.h).
  std::vector<Bytes> bytes;
  for (const auto& params : layerParams_) {
    Bytes n = 0;
    for (const auto& p : params) n += p.numel() * p.element_size();
    bytes.push_back(n);
  }
  for (const std::vector<int>& layers : plan::gradientBuckets(bytes, firstBucketBytes, bucketBytes)) {
    Bucket& b = buckets_.emplace_back();
    b.layers = layers;
    for (int i : layers) {
      b.params.insert(b.params.end(), layerParams_[i].begin(), layerParams_[i].end());
      b.bytes += bytes[i];
      bucketOf_[i] = static_cast<int>(buckets_.size()) - 1;
    }
  }
  for (auto& b : buckets_) b.remaining = static_cast<int>(b.layers.size());
}

void GradientSync::start(Bucket& b) {
  b.started = traceNowUs();
  b.in_place = false;
  std::vector<torch::Tensor> grads;
  grads.reserve(b.params.size());
  // Summed in place where the transport can (shared memory: each gradient
  // straight into the segment and its sum straight back, NOTE [Shared-memory
  // allreduce]); else through one concatenated copy, as DDP's buckets are.
  bool inPlace = true;
  for (auto& p : b.params) {
    const torch::Tensor& g = p.grad();
    inPlace = inPlace && g.defined() && g.is_contiguous() && g.scalar_type() == b.params.front().scalar_type();
  }
  if (inPlace) {
    for (auto& p : b.params) grads.push_back(p.mutable_grad().view({-1}));
    b.work = transport_->allreduceStageParts(grads);
    b.in_place = static_cast<bool>(b.work);
    if (b.in_place) return;
    grads.clear();
  }
  for (auto& p : b.params) {
    grads.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
  }
  b.flat = torch::cat(grads);
  b.work = transport_->allreduceStage(b.flat);
}

void GradientSync::layerReady(int layer) {
  if (!transport_ || ready_[layer]) return;
  ready_[layer] = true;
  const int bi = bucketOf_[layer];
  if (bi < 0) return;
  Bucket& b = buckets_[bi];
  if (--b.remaining == 0) start(b);
}

void GradientSync::finish(double* waited) {
  if (waited) *waited = 0;
  if (!transport_) return;
  for (auto& b : buckets_) {
    if (b.remaining > 0) start(b);  // a layer that was never reported
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    b.work->wait();
    trace_.record("allreduce bucket " + std::to_string(i), "allreduce", TraceThread::kAllreduce, b.started,
                  traceNowUs(), {{"bytes", b.bytes}});
    b.work.reset();
    if (b.in_place) continue;  // the sums are in .grad already
    torch::NoGradGuard guard;
    std::int64_t offset = 0;
    for (auto& p : b.params) {
      const auto n = p.numel();
      torch::Tensor sum = b.flat.narrow(0, offset, n).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(sum);
      } else {
        p.mutable_grad() = sum.clone();
      }
      offset += n;
    }
    b.flat = torch::Tensor();
  }
  if (waited) *waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& b : buckets_) b.remaining = static_cast<int>(b.layers.size());
  std::fill(ready_.begin(), ready_.end(), false);
}

}  // namespace hydrozoa::runtime
