// Dynamic loss scaling for fp16 (NOTE [Loss scaling]).
//
// NOTE [Loss scaling]
// fp16 keeps 5 exponent bits: a gradient below 6e-8 flushes to zero and one
// above 65504 overflows. training.precision fp16 therefore multiplies the
// loss by a scale S before backward, so that the gradients flowing back
// through the 16-bit passes (and across stages, in 16 bits) sit in fp16's
// range, and divides the fp32 gradients by S before the update. S is
// dynamic, as PyTorch's GradScaler and Megatron-LM make it: it starts large
// (training.loss_scale.initial, 2^16), halves at every step with an inf or
// NaN gradient on any worker, a step that is then skipped by every worker
// (no update, its gradients dropped), and doubles after
// training.loss_scale.growth_interval (2000) steps in a row without one.
// Every worker takes the same decision (Transport::anyWorker at the
// update), so every worker holds the same S; it is saved in each layer's
// checkpoint file, so a run resumes with the scale it had. Only the
// synchronous schedules take fp16: an asynchronous one updates stages at
// different steps, where a skipped step has no common meaning.
// One process (runtime/reference.h) scales, checks and skips the same way,
// so a pipeline in fp16 equals one process in fp16 step by step.
#pragma once

#include <cstdint>

namespace hydrozoa::runtime {

class LossScale {
 public:
  static constexpr double kGrowth = 2.0, kBackoff = 0.5;  // GradScaler's

  LossScale(double initial, std::int64_t growthInterval) : scale_(initial), growthInterval_(growthInterval) {}

  double value() const { return scale_; }
  // Steps since the last overflow or growth, and steps skipped in all.
  std::int64_t cleanSteps() const { return clean_; }
  std::int64_t skipped() const { return skipped_; }

  // A step's outcome, the same on every worker: `overflow` (an inf or NaN
  // gradient anywhere) skips it and halves the scale; the growth interval's
  // clean step doubles it.
  void update(bool overflow) {
    if (overflow) {
      scale_ *= kBackoff;
      clean_ = 0;
      ++skipped_;
    } else if (++clean_ == growthInterval_) {
      scale_ *= kGrowth;
      clean_ = 0;
    }
  }

  // What a checkpoint holds; restore() takes it back.
  void restore(double scale, std::int64_t clean, std::int64_t skipped) {
    scale_ = scale;
    clean_ = clean;
    skipped_ = skipped;
  }

 private:
  double scale_;
  std::int64_t growthInterval_;
  std::int64_t clean_ = 0, skipped_ = 0;
};

}  // namespace hydrozoa::runtime
