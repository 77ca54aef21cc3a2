#pragma once
// Small helpers for the data tests: a temporary directory, writing files, and checking that
// an InputError names the file, the record and the field.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "attune/core/error.h"
#include "attune/core/types.h"

namespace attune::test {

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "attune-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  // Writes `content` (bytes, as given) to `name` and returns the path.
  std::filesystem::path write(const std::string& name, const std::string& content) const {
    auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << content;
    return p;
  }

 private:
  std::filesystem::path path_;
};

// Runs fn, expects an InputError whose message contains every one of `parts`.
inline void expect_input_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected attune::InputError, nothing was thrown";
  } catch (const InputError& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing \"" << p << "\" in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected attune::InputError, got: " << e.what();
  }
}

inline void expect_same_document(const Document& a, const Document& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.owner, b.owner);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.fields, b.fields);
  EXPECT_EQ(a.date, b.date);
}

inline void expect_same_example(const Example& a, const Example& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.input, b.input);
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.gold_docs, b.gold_docs);
  EXPECT_EQ(a.agent, b.agent);
  ASSERT_EQ(a.profile.size(), b.profile.size()) << "example " << a.id;
  for (std::size_t i = 0; i < a.profile.size(); ++i) expect_same_document(a.profile[i], b.profile[i]);
}

}  // namespace attune::test
