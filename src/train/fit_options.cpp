#include "attune/train/fit_options.h"

#include <cmath>
#include <sstream>
#include <string>

#include "attune/core/error.h"

namespace attune::train {

namespace {

template <class T>
[[noreturn]] void bad(const char* field, const T& value, const std::string& why) {
  std::ostringstream s;
  s << "fit." << field << " = " << value << ": " << why;
  throw FieldError<UsageError>(std::string("fit.") + field, s.str());
}

}  // namespace

void FitOptions::validate() const {
  if (out.empty()) throw FieldError<UsageError>("fit.out", "fit.out is empty: a training run needs an output folder");
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path o = fs::weakly_canonical(fs::absolute(out, ec), ec);
  for (const auto& in : inputs) {
    if (in.empty()) continue;
    const fs::path i = fs::weakly_canonical(fs::absolute(in, ec), ec);
    const auto rel = o.lexically_relative(i);
    if (o == i || (!rel.empty() && *rel.begin() != ".."))
      throw FieldError<UsageError>("fit.out", "fit.out = " + out.string() + " is " + (o == i ? "" : "inside ") +
                                                  "the model folder the run starts from (" + in.string() +
                                                  "): training would overwrite it; choose another output folder");
  }
  if (epochs == 0) bad("epochs", epochs, "must be positive");
  if (batch_size == 0) bad("batch_size", batch_size, "must be positive");
  if (micro_batch == 0) bad("micro_batch", micro_batch, "must be positive");
  if (micro_batch > batch_size)
    bad("micro_batch", micro_batch, "must not exceed batch_size = " + std::to_string(batch_size) + " (a micro-batch is part of one step's batch)");
  if (!(lr >= 0) || !std::isfinite(lr)) bad("lr", lr, "must be a number >= 0 (0 = learning switched off, a control run)");
  if (!warmup_steps && !(warmup >= 0 && warmup < 1)) bad("warmup", warmup, "must be a fraction in [0, 1)");
  if (!(clip >= 0) || !std::isfinite(clip)) bad("clip", clip, "must be a number >= 0 (0 = no clipping)");
}

}  // namespace attune::train

namespace attune::train {

TargetNormalization parse_target_normalization(const std::string& s) {
  if (s == "none") return TargetNormalization::None;
  if (s == "zscore") return TargetNormalization::ZScore;
  throw UsageError("unknown target normalisation \"" + s + "\" (expected zscore or none)");
}

std::string to_string(TargetNormalization n) { return n == TargetNormalization::ZScore ? "zscore" : "none"; }

}  // namespace attune::train
