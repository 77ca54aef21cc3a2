#pragma once
// Golds, predictions and label lists as `attune metrics` and the label checks read them,
// and where an example's gold was read, for errors found after reading (a gold that is not
// a label, a gold_doc that is not in the corpus). docs/formats.md.
#include <filesystem>
#include <string>
#include <vector>

#include "attune/data/dataset.h"

namespace attune::data {

// A LaMP outputs file alone ({"task", "golds": [{"id", "output"}]}): ids strings or
// integers, outputs strings or numbers, a duplicate id an error. The examples have only
// id, user (= id) and output; sources = {outputs}.
Dataset read_golds(const std::filesystem::path& outputs, const std::string& task, const std::string& split);

// A prediction of `attune metrics`: one JSONL line {"id", "output"}.
struct Prediction {
  std::string id, output;
  std::string record;  // "line 3 (id \"q7\")"
};
// Predictions JSONL: id a string or an integer, output a string or a number; a duplicate
// id is an error naming both lines.
std::vector<Prediction> read_predictions(const std::filesystem::path& file);

// A label list: a JSON array of distinct non-empty strings (numbers are read as their
// text), stripped of surrounding whitespace; at least one. InputError naming the file and
// the entry ("record 3") otherwise.
std::vector<std::string> read_label_list(const std::filesystem::path& file);

// Where example i's gold output was read: the gold file (the last of ds.sources) and the
// record there ("golds[3] (id \"q7\")" in an outputs file, "line 4 (id \"q7\")" in a JSONL
// file), found by reading the file again (for error messages only). Without a source file:
// the task and split, and `example "q7"`.
struct GoldPlace {
  std::string file, record;
};
GoldPlace gold_place(const Dataset& ds, std::size_t i);

// Every gold_doc of `ds` must be a passage of `corpus` (read from `corpus_file`):
// InputError naming the example's file and line, the field (gold_doc, gold_doc[k]) and the
// id otherwise.
void check_gold_docs(const Dataset& ds, const std::vector<Document>& corpus,
                     const std::filesystem::path& corpus_file);

}  // namespace attune::data
