#pragma once
// Private helpers shared by the readers in src/data: reading a file, parsing JSON with an
// error that names the file, record and field, and typed field access. Not installed:
// nlohmann/json stays out of the public headers.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attune::data::detail {

using nlohmann::json;


// Offset of the first byte that is not valid UTF-8, or npos when all of `s` is valid.
std::size_t first_invalid_utf8(std::string_view s);

// "line L, column C (byte offset B)" for a 0-based byte offset into `text` (column in bytes, 1-based).
std::string describe_offset(std::string_view text, std::size_t offset);

// How a parse failure's position in the JSON tree is named in the error.
enum class Layout {
  kRecordArray,  // top level is an array of records: "record N (id "x")", field "profile[3].date"
  kGoldsObject,  // {"task", "golds": [records]}: "golds[N] (id "x")", field "output"
  kLine,         // one JSONL line: record given by the caller ("line N"), field "title"
};

// Parses `text` (a whole file, or one JSONL line) and returns the DOM. On a syntax error
// or invalid UTF-8 throws InputError naming `file`, the record and field being parsed
// (found by re-parsing with a path tracker) and the line/column/byte of the fault.
// `base_offset` and `line_record` are used for JSONL lines: the byte offset of the line
// in the file and the record name ("line 12").
json parse_json(std::string_view text, const std::filesystem::path& file, Layout layout,
                std::size_t base_offset = 0, const std::string& line_record = {},
                std::string_view whole_file = {});

// `record N (id "x")`, with the id left out when empty.
std::string record_name(const std::string& prefix, std::size_t index, const std::string& id);

// Typed access to one object's fields; errors name the file, the record and `prefix + key`.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string file, std::string record, std::string prefix = {})
      : obj_(obj), file_(std::move(file)), record_(std::move(record)), prefix_(std::move(prefix)) {}

  bool has(const char* key) const;
  // A required string.
  std::string string(const char* key) const;
  // A required id: a non-empty string, or an integer converted to its decimal text.
  std::string id(const char* key) const;
  // A required string, or a number converted to decimal text.
  std::string text(const char* key) const;
  // An optional string; nullopt when the key is absent.
  std::optional<std::string> optional_string(const char* key) const;

  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  std::string path(const std::string& key) const { return prefix_ + key; }
  const json& get(const char* key) const;  // required: InputError "missing" when absent
  const std::string& file() const { return file_; }
  const std::string& record() const { return record_; }

 private:
  const json& obj_;
  std::string file_, record_, prefix_;
};

// Calls fn(line_number, object) for every non-blank line of a JSONL file's `bytes`, each
// parsed as one JSON object; errors name the file and "line N" (jsonl.cpp).
void for_each_line(const std::string& bytes, const std::filesystem::path& file,
                   const std::function<void(std::size_t, const json&)>& fn);

// The golds of a LaMP outputs file `root`: calls fn(position, id, output, reader of the
// record) for each, after checking the top level, the id (no duplicates) and the output
// (lamp.cpp).
void for_each_gold(const json& root, const std::string& file,
                   const std::function<void(std::size_t, std::string, std::string, const FieldReader&)>& fn);

// `s` as a JSON string literal for messages (invalid UTF-8 replaced).
std::string json_quote(const std::string& s);
// JSON type names for messages: "a string", "an object", "null", ...
std::string type_name(const json& v);
// A JSON number as decimal text: integers (and integral floats below 2^53) without ".0",
// other floats in their shortest round-trip form.
std::string number_text(const json& v);
// True for "YYYY-MM-DD" with month 01-12 and day 01-31.
bool valid_date_shape(std::string_view s);

}  // namespace attune::data::detail
