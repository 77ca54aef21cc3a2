#pragma once
// Tiny BERT folders for tests: a WordPiece vocab.txt and random weights, written with the
// models layer's own save_bert.
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>
#include <vector>

#include "attune/models/bert.h"

namespace attune::testing {

inline const std::vector<std::string>& tiny_words() {
  static const std::vector<std::string> w = {"the", "cat", "sat", "on", "mat", "dog", "ran", "fast", "a", "red", "blue",
                                             "apple", "tree", "car", "house", "green", "small", "big", "river", "stone",
                                             "debian", "package", "library", "kernel", "network", "server", "client",
                                             "file", "system", "python"};
  return w;
}

// [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then tiny_words() from id 5.
inline void write_tiny_vocab(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / "vocab.txt");
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) out << s << "\n";
  for (const auto& w : tiny_words()) out << w << "\n";
}

inline models::BertConfig tiny_config() {
  models::BertConfig c;
  c.vocab_size = 5 + static_cast<std::int64_t>(tiny_words().size());
  c.hidden_size = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.intermediate_size = 16;
  c.max_positions = 32;
  c.type_vocab_size = 2;
  c.layer_norm_eps = 1e-12;
  return c;
}

// Every parameter random (LayerNorm weights around 1) so each term of the forward matters.
inline models::BertModel random_bert(const models::BertConfig& c, bool pooler, std::uint64_t seed) {
  torch::manual_seed(seed);
  models::BertModel m(c, pooler);
  torch::NoGradGuard g;
  for (auto& item : m->named_parameters()) {
    item.value().uniform_(-0.5, 0.5);
    if (item.key().find("LayerNorm.weight") != std::string::npos) item.value().add_(1.0);
  }
  m->eval();
  return m;
}

// A dense-encoder folder with the tiny vocab.
inline void write_tiny_encoder(const std::filesystem::path& dir, models::Pooling pooling, bool normalize, std::uint64_t seed = 1) {
  write_tiny_vocab(dir);
  models::SaveBertOptions so;
  so.pooling = pooling;
  so.normalize = normalize;
  models::save_bert(random_bert(tiny_config(), false, seed), dir, so);
}

inline std::filesystem::path fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("attune_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace attune::testing
