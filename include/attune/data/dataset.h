#pragma once
// Readers for the dataset formats attune takes in (docs/formats.md):
//  - LaMP: {split}_questions.json + {split}_outputs.json (all seven tasks' profile fields)
//  - corpus JSONL: one {"id","title","text"} passage per line (shared, owner "")
//  - QA JSONL: one {"id","input","output","gold_doc"} per line (KILT-like tasks)
// Bad input (malformed JSON, invalid UTF-8, missing or mistyped fields, duplicate ids,
// outputs that do not match the questions) throws attune::InputError naming the file,
// the record and the field. Readers validate everything before returning, so a caller
// never sees half of a file.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attune/core/types.h"

namespace attune::data {

struct Dataset {
  std::string task;   // "lamp4", "commit_subject", "qa", ...
  std::string split;  // "train", "dev", "test"
  std::vector<Example> examples;
  bool has_outputs = false;  // golds known
  // Files read, and a hash of their bytes (dataset identity for the store).
  std::vector<std::filesystem::path> sources;
  std::string content_hash;
};

// A LaMP questions file and (optionally) its outputs file. Profile items: "id" (string,
// required), "date" ("YYYY-MM-DD", optional), every other key a string field (numbers
// are converted to their decimal text). Each example's user = its id; documents get
// owner = that user. Output ids must be exactly the question ids.
Dataset read_lamp(const std::filesystem::path& questions,
                  const std::optional<std::filesystem::path>& outputs,
                  const std::string& task, const std::string& split);

// A corpus JSONL file: every line {"id": str, "title": str, "text": str, ...}; owner "".
std::vector<Document> read_corpus_jsonl(const std::filesystem::path& file);

// A QA JSONL file: every line {"id", "input", "output", "gold_doc"?}; no profile.
Dataset read_qa_jsonl(const std::filesystem::path& file, const std::string& task,
                      const std::string& split);

// Resolves the CLI's --data layout (CLI.md):
//   DIR/<task>/{split}_questions.json (+ _outputs.json when present), or
//   DIR/<task>_{split}.jsonl (a corpus directory).
Dataset load_split(const std::filesystem::path& data_dir, const std::string& task,
                   const std::string& split);
// The corpus of a corpus directory: the single DIR/*_corpus.jsonl; InputError if none.
std::filesystem::path find_corpus(const std::filesystem::path& data_dir);

// Writers (for the sample data and for tests).
void write_lamp(const Dataset& ds, const std::filesystem::path& questions,
                const std::filesystem::path& outputs);

}  // namespace attune::data
