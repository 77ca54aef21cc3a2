#pragma once
// The OpenAPI 3 document of `attune serve` (docs/openapi.json, compiled in), served at /openapi.json.
namespace attune::serve {
const char* openapi_document();
}
