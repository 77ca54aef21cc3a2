// open_store (store.h): the one place that tells a PostgreSQL URL from a SQLite file's path.
#include "attune/store/store.h"

namespace attune::store {

bool is_postgresql_url(const std::string& spec) {
  return spec.rfind("postgresql://", 0) == 0 || spec.rfind("postgres://", 0) == 0;
}

std::unique_ptr<Store> open_store(const std::string& spec) {
  if (is_postgresql_url(spec)) return open_postgresql(spec);
  return open_sqlite(spec);
}

}  // namespace attune::store
