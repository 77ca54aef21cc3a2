#pragma once
// The error for a spec that names no retriever, shared by the parser (spec.cpp) and the
// factory (retriever.cpp, for a PREFIX nobody registered); private to the layer.
#include <string_view>

#include "attune/core/error.h"

namespace attune::retrieval {

// UsageError "unknown retriever spec \"SPEC\" (expected none, random, ...)".
UsageError unknown_spec_error(std::string_view spec);

}  // namespace attune::retrieval
