#pragma once
// The blobs role of the store: named binary values (e.g. "bm25:<corpus hash>", a corpus
// index). Implementations may be called from several threads; every put is one transaction.
#include <optional>
#include <string>
#include <vector>

namespace attune::store {

class BlobStore {
 public:
  virtual ~BlobStore() = default;

  // The bytes stored under key (possibly empty); nullopt when absent.
  virtual std::optional<std::string> blob_get(const std::string& key) = 0;
  // Writes the bytes under key, replacing what was there.
  virtual void blob_put(const std::string& key, const std::string& value) = 0;
  // Removes the key; false when there was none.
  virtual bool blob_delete(const std::string& key) = 0;
  // Every stored key that starts with `prefix`, in byte order (all keys for "").
  virtual std::vector<std::string> blob_keys(const std::string& prefix) = 0;
};

}  // namespace attune::store
