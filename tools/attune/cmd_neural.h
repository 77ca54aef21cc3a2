#pragma once
// The CLI verbs of the neural half (they link torch through the models/train layers).
#include <CLI/CLI.hpp>

namespace attune::cli {

// attune pretrain-encoder: Contriever-style contrastive pretraining of a small BERT encoder.
void add_pretrain_encoder(CLI::App& app, int& rc);

}  // namespace attune::cli
