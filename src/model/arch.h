// Architectures as plain values: a model is an ordered chain of named,
// partitionable layers, each described by its kind and sizes.
//
// This half of src/model is pure C++ (no libtorch): from an Arch we know every
// layer's input and output shape, parameter count, forward FLOPs and an
// estimate of the activation memory it keeps for backward. The planner can
// therefore predict costs of models too large to instantiate here (BERT on a
// K80), and src/model/build.h realises the very same Arch as libtorch modules,
// so the two can never describe different networks.
//
// Shapes are per sample (no batch dimension). FLOPs count a multiply-add as 2.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"

namespace hydrozoa::model {

using Shape = std::vector<std::int64_t>;

std::int64_t numel(const Shape& shape);
std::string shapeString(const Shape& shape);  // "3x224x224"

// Conv -> [BatchNorm] -> [ReLU] -> [MaxPool]. VGG/AlexNet layers, ResNet stems.
struct ConvSpec {
  std::int64_t in = 0, out = 0, kernel = 3, stride = 1, padding = 1;
  bool bias = true, batch_norm = false, relu = true;
  std::int64_t pool_kernel = 0, pool_stride = 0, pool_padding = 0;  // pool_kernel 0: no pooling
};

// [Dropout] -> [AdaptiveAvgPool to pool_h x pool_w] -> [Flatten] -> Linear -> [ReLU|Tanh].
// Without flatten, the linear map applies to the last dimension.
struct LinearSpec {
  std::int64_t in = 0, out = 0;
  bool bias = true, relu = false, flatten = false;
  double dropout = 0;
  std::int64_t pool_h = 0, pool_w = 0;  // 0: no pooling
};

// ResNet basic block (ResNet-18/34): two 3x3 convs with a shortcut.
struct BasicBlockSpec {
  std::int64_t in = 0, out = 0, stride = 1;
};

// ResNet bottleneck (ResNet-50/101/152): 1x1, 3x3 (strided), 1x1 with out = 4 * width.
struct BottleneckSpec {
  std::int64_t in = 0, width = 0, out = 0, stride = 1;
};

// Token (+ position, + segment) embedding, optional LayerNorm and dropout.
// Input: token ids [seq]. Output: [seq, hidden].
struct EmbeddingSpec {
  std::int64_t vocab = 0, hidden = 0, max_positions = 0, type_vocab = 0;
  bool layer_norm = false;
  double dropout = 0;
};

// A transformer block: multi-head self-attention and a GELU MLP, post-norm
// (BERT) or pre-norm (GPT-2); causal attention for decoders.
struct TransformerSpec {
  std::int64_t hidden = 0, heads = 0, ffn = 0;
  bool causal = false, pre_norm = false;
  double dropout = 0;
};

// Sequence classification head: first token -> [dense + tanh pooler] -> linear.
struct SequenceClassifierSpec {
  std::int64_t hidden = 0, classes = 0;
  bool pooler = true;
};

// Language-model head: [LayerNorm] -> linear to the vocabulary (no bias).
struct LmHeadSpec {
  std::int64_t hidden = 0, vocab = 0;
  bool final_norm = true;
};

using LayerParams = std::variant<ConvSpec, LinearSpec, BasicBlockSpec, BottleneckSpec, EmbeddingSpec,
                                 TransformerSpec, SequenceClassifierSpec, LmHeadSpec>;

struct LayerSpec {
  std::string name;
  LayerParams params;
};

enum class InputKind { kImage, kTokens };

struct InputSpec {
  InputKind kind = InputKind::kImage;
  Shape shape;             // [C, H, W] for images, [seq] for tokens
  std::int64_t vocab = 0;  // tokens only
};

enum class TaskKind { kClassification, kLanguageModel };

struct TaskSpec {
  TaskKind kind = TaskKind::kClassification;
  std::int64_t classes = 0;  // classes, or vocabulary size for language models
};

struct Arch {
  std::string name;                                        // "resnet34"
  std::vector<std::pair<std::string, std::string>> options;  // resolved, for display and profiles
  InputSpec input;
  TaskSpec task;
  std::vector<LayerSpec> layers;
};

// What the planner needs to know about one layer, from shapes alone.
struct LayerAnalysis {
  std::string name;
  std::string kind;  // "conv", "linear", "basic_block", ...
  Shape input_shape, output_shape;
  std::int64_t parameters = 0;
  std::int64_t largest_parameter = 0;  // elements of the largest parameter tensor
  double forward_flops = 0;          // per sample
  double backward_flops = 0;         // per sample (gradients of inputs and weights)
  std::int64_t output_bytes = 0;     // per sample: what a stage boundary here sends
  std::int64_t stashed_bytes = 0;    // per sample: estimate of what autograd keeps (incl. output)
  std::int64_t memory_traffic_bytes = 0;  // per sample: activation bytes read+written, forward
};

// Analyses every layer of `arch` in order. Throws InternalError when shapes do
// not chain (a bug in a zoo builder, not a user error: options are validated
// before an Arch is built).
std::vector<LayerAnalysis> analyze(const Arch& arch);

std::int64_t totalParameters(const Arch& arch);
const char* kindName(const LayerParams& params);
// Every kindName, in the order of LayerParams.
const std::vector<std::string>& layerKinds();

// NOTE [What tensor parallelism splits]
// Split t ways (model/tensor_parallel.h, docs/tensor_parallel.md): a
// transformer block's heads and MLP width, an embedding's vocabulary, a
// language-model head's vocabulary. Every other layer is replicated on the t
// ranks. Whether `kind` is one of the split kinds:
bool tensorSplit(const std::string& kind);
// The sizes t must divide in `arch` (heads, hidden and ffn of every block,
// the vocabulary of its embedding and head; each the gcd over the layers)
// and their greatest common divisor: t is valid exactly when it divides that.
// The one statement of the constraint, for the runtime and the planner.
struct TensorSplitSizes {
  std::int64_t gcd = 0;  // 0: no layer is split (no transformer block)
  std::vector<std::pair<std::string, std::int64_t>> sizes;  // {"heads", 4}, {"hidden", 256}, {"ffn", 1024}, {"vocab", 1024}
};
TensorSplitSizes tensorSplitSizes(const Arch& arch);
// OK when `arch` can be split t ways; otherwise one line naming the size t
// does not divide and every valid t ("tensor parallelism 3 does not divide
// heads=4 of gpt: use 1, 2 or 4", as `hydrozoa plan` words it).
Status checkTensorParallel(const Arch& arch, int t);

}  // namespace hydrozoa::model
