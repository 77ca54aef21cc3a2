#include "attune/core/hash.h"
#include "attune/store/llm_cache.h"

namespace attune::store {

// Length-prefixed parts (Hasher), so no two different keys share a digest by concatenation.
std::string CacheKey::digest() const { return Hasher().add(model).add(kind).add(prompt).add(target).hex(); }

}  // namespace attune::store
