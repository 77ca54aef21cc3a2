#pragma once
// Vocabulary types shared by every layer (PISA's type_alias.hpp in spirit).
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace attune {

using DocId = std::string;
using UserId = std::string;
using ExampleId = std::string;
using Score = double;

// Named text fields of a document, e.g. {"title": ..., "text": ...}. Values are strings;
// readers convert numeric fields (LaMP-3 "score") to their decimal text.
using Fields = std::map<std::string, std::string>;

// One retrievable item: a profile entry of one user, or a passage of a shared corpus.
struct Document {
  DocId id;
  // The user whose profile holds this document; empty for a shared-corpus passage.
  // The retrieval layer refuses to rank a document for a query of another user.
  UserId owner;
  // The text retrieval sees (the task builds it from the fields, e.g. title + " " + text).
  std::string text;
  Fields fields;
  // "YYYY-MM-DD" when the source gives one; compared as a string.
  std::optional<std::string> date;

  // The value of a field, or nullptr when the document has no such field.
  const std::string* field(const std::string& name) const {
    auto it = fields.find(name);
    return it == fields.end() ? nullptr : &it->second;
  }
};

// One query of a task: the input, the gold output (empty when unknown), the user's profile.
struct Example {
  ExampleId id;
  // Whose profile this is. LaMP files carry no user ids: each question is its own user,
  // so readers set user = id unless the source names a user.
  UserId user;
  std::string input;
  std::string output;
  std::vector<Document> profile;
  // For corpus tasks: ids of the passages that hold the answer (for R@k); else empty.
  std::vector<DocId> gold_docs;
  // The RAG agent that asked (IUM); empty for single-agent data.
  std::string agent;
};

// A ranked list over a candidate span: positions into the candidates, best first,
// with the matching ids and scores (same length).
struct Ranking {
  std::vector<std::size_t> indices;
  std::vector<DocId> ids;
  std::vector<Score> scores;
  std::size_t size() const { return indices.size(); }
};

}  // namespace attune
