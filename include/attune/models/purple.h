#pragma once
// A trained PURPLE record selector for inference (torch-free facade over
// models/purple_net.h): the propensity of each candidate record for one query.
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attune/core/device.h"

namespace attune::models {

class PurpleModel {
 public:
  // The frozen encoder, purple.json and purple_head.safetensors of `dir` on `device`.
  // Error naming the file when a part is missing or malformed.
  static std::shared_ptr<const PurpleModel> load(const std::filesystem::path& dir, const Device& device);
  ~PurpleModel();
  // One propensity in (0, 1) per record, read together (a record's propensity depends on
  // the other records of the list unless the model is pointwise). Thread-safe.
  std::vector<float> propensities(std::string_view query, std::span<const std::string> records) const;
  // The profile size the model was trained to select.
  std::size_t k() const;
  // w when the folder was trained with the learned initial prior: its order is
  // log f + w * retrieval::initial_prior_z(the first stage's scores), which
  // rerank(FIRST, L, purple:DIR) computes; nullopt for 003's selector (f alone).
  std::optional<double> initial_prior_weight() const;
  std::string id() const;  // "purple:" + the folder

  struct Impl;
  explicit PurpleModel(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace attune::models
