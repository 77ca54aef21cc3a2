#pragma once
// The datasets role of the store: imported datasets (their users, documents and examples),
// read back whole. Implementations may be called from several threads; every write is one
// transaction, so a killed process leaves either all of a call or none.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attune/data/dataset.h"

namespace attune::store {

struct ImportResult {
  std::int64_t dataset_id = 0;
  bool already_present = false;  // same task, split and content hash: nothing written
  std::size_t users = 0, documents = 0, examples = 0;
};

struct DatasetInfo {
  std::int64_t id = 0;
  std::string task, split, content_hash;
  std::size_t users = 0, documents = 0, examples = 0;
};

class DatasetStore {
 public:
  virtual ~DatasetStore() = default;

  // Writes a dataset (its users, documents and examples) in one transaction; a dataset
  // with the same task, split and content hash is left untouched (already_present).
  // Error naming the example when one cannot be written; nothing is imported then.
  virtual ImportResult import_dataset(const data::Dataset& ds) = 0;
  // Every imported dataset, in import order; empty when none.
  virtual std::vector<DatasetInfo> datasets() = 0;
  // Reads the newest import of task/split back (examples with their profiles); nullopt
  // when absent.
  virtual std::optional<data::Dataset> load_dataset(const std::string& task, const std::string& split) = 0;
};

}  // namespace attune::store
