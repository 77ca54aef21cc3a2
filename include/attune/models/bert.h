#pragma once
// BERT-family encoders (BERT, MiniLM, Contriever, bge, e5 all share this graph): learned
// word + position + token-type embeddings with LayerNorm, post-LN transformer layers with
// GELU, optional tanh pooler and a sequence-classification head (cross-encoders).
// Module names are the Hugging Face names, so load_module() reads a transformers folder
// directly. Includes torch: the torch-free facade is models/encoder.h.
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "attune/models/bert_native.h"
#include "attune/models/config.h"
#include "attune/models/safetensors.h"

namespace attune::models {

struct BertConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t hidden_size = 256;
  std::int64_t num_layers = 4;
  std::int64_t num_heads = 4;
  std::int64_t intermediate_size = 1024;
  std::int64_t max_positions = 512;
  std::int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  std::string hidden_act = "gelu";  // gelu (erf) | gelu_new / gelu_pytorch_tanh (tanh) | relu
  std::int64_t pad_token_id = 0;
  std::int64_t num_labels = 0;  // > 0: BertForSequenceClassification head (classifier.*)

  // model_type "bert" (or a Bert* architecture); Error naming config.json and the key for
  // an unsupported model_type / activation / position_embedding_type or a bad shape.
  static BertConfig from(const ConfigFile& c);
  // config.json of a BertModel (architectures ["BertModel"]).
  nlohmann::json to_json() const;
};

struct BertEmbeddingsImpl;
struct BertEncoderImpl;
struct BertPoolerImpl;

// BertModel. Parameter names are HF's: embeddings.{word_embeddings, position_embeddings,
// token_type_embeddings, LayerNorm}, encoder.layer.N.attention.self.{query,key,value},
// encoder.layer.N.attention.output.{dense,LayerNorm}, encoder.layer.N.intermediate.dense,
// encoder.layer.N.output.{dense,LayerNorm}, pooler.dense (only when with_pooler).
// Dropout is not modelled (inference graph; training runs without dropout).
struct BertModelImpl : torch::nn::Module {
  BertModelImpl(const BertConfig& c, bool with_pooler);
  // ids/type_ids [B, L] int64, mask [B, L] (1 = token, 0 = padding; any dtype). Returns
  // the last hidden states [B, L, H]. Padding never influences the real tokens' states.
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& type_ids, const torch::Tensor& mask);
  // tanh(pooler.dense(h[:, 0])) [B, H]; Error when built without the pooler.
  torch::Tensor pool(const torch::Tensor& hidden);
  bool has_pooler() const { return pooler != nullptr; }
  // HF's init: normal(0, stddev) for linear and embedding weights, zero biases, unit LayerNorm.
  void init_weights(double stddev = 0.02);
  BertConfig cfg;
  std::shared_ptr<BertEmbeddingsImpl> embeddings;
  std::shared_ptr<BertEncoderImpl> encoder;
  std::shared_ptr<BertPoolerImpl> pooler;
};
TORCH_MODULE(BertModel);

// A copy of the model's weights for BertNative (models/bert_native.h), the CPU inference
// path the encoders take: float32, the query|key|value projection fused and pre-scaled.
BertNativeWeights bert_native_weights(const BertModel& model);

enum class Pooling { Auto, Mean, Cls };
// "mean" | "cls" | "auto"; UsageError otherwise.
Pooling parse_pooling(const std::string& s);
const char* pooling_name(Pooling p);

// Pooled sentence embeddings [B, H] from hidden [B, L, H] and mask [B, L]: mean over the
// mask, or the first ([CLS]) token; L2-normalised when `normalize`.
torch::Tensor pool_embeddings(const torch::Tensor& hidden, const torch::Tensor& mask, Pooling pooling, bool normalize);

// What a sentence-transformers folder says about pooling (1_Pooling/config.json) and
// normalisation (modules.json has a Normalize module), and sentence_bert_config.json's
// max_seq_length (0 when absent). Defaults: Mean, no normalisation. Error naming the file
// for an unsupported pooling mode (max, mean_sqrt_len, weighted).
struct PoolingSpec {
  Pooling pooling = Pooling::Mean;
  bool normalize = false;
  std::size_t max_seq_length = 0;
};
PoolingSpec read_pooling_spec(const std::filesystem::path& dir);

// A BERT loaded from a Hugging Face folder: config.json + safetensors weights, with or
// without the "bert." prefix; pooler and classifier loaded when present (classifier
// required when config num_labels > 0 and `classifier`). Errors name the folder and tensor.
struct LoadedBert {
  BertModel model{nullptr};
  torch::nn::Linear classifier{nullptr};  // null unless loaded
};
LoadedBert load_bert(const std::filesystem::path& dir, const torch::Device& device, bool classifier = false);

struct SaveBertOptions {
  std::filesystem::path tokenizer_dir;  // tokenizer files copied from here (when present)
  Pooling pooling = Pooling::Mean;
  bool normalize = false;
  std::size_t max_seq_length = 0;       // sentence_bert_config.json when > 0
  nlohmann::json attune_metadata;       // written as attune_train.json when not null
  // Set: a BertForSequenceClassification folder (a cross-encoder: the model needs its
  // pooler; weights bert.* + classifier.*, config num_labels = the classifier's outputs).
  torch::nn::Linear classifier{nullptr};
};
// Writes a Hugging Face / sentence-transformers folder: config.json (BertModel),
// model.safetensors, tokenizer files, modules.json, 1_Pooling/config.json,
// sentence_bert_config.json, attune_train.json. Creates `dir`.
void save_bert(const BertModel& model, const std::filesystem::path& dir, const SaveBertOptions& opts);

}  // namespace attune::models
