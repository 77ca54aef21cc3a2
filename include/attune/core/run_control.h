#pragma once
// How a batch job over a dataset runs (feedback collection, evaluation, labelling): one
// group of options embedded in each job's options, set once from the CLI or the HTTP API.
#include <cstddef>
#include <cstdint>

namespace attune {

struct RunControl {
  std::uint64_t seed = 0;   // every random draw of the job (recorded with its outputs)
  std::size_t threads = 0;  // worker threads (0 = all cores)
  std::size_t batch = 32;   // language-model calls per batch (and per store transaction)
  bool progress = true;     // progress lines on stderr
  std::size_t limit = 0;    // only the first N examples (0 = all)
};

}  // namespace attune
