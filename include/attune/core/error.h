#pragma once
// One error model: typed exceptions thrown inside, caught at the CLI / HTTP edge.
//   UsageError   -> exit code 2 (bad flags or specs)
//   Error        -> exit code 1 (runtime failure), message is one line
//   InputError   -> exit code 1, names the file, the record and the field at fault
//   PrivacyError -> a document of another user reached a query (a bug in the caller)
#include <stdexcept>
#include <string>

namespace attune {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UsageError : public Error {
 public:
  using Error::Error;
};

class InputError : public Error {
 public:
  // file: path of the input; record: which record ("record 12 (id \"q7\")", or "line 3");
  // field: the field path ("profile[3].date"); may be empty when not applicable.
  InputError(std::string file, std::string record, std::string field, const std::string& what)
      : Error(format(file, record, field, what)),
        file_(std::move(file)), record_(std::move(record)), field_(std::move(field)) {}
  const std::string& file() const { return file_; }
  const std::string& record() const { return record_; }
  const std::string& field() const { return field_; }

 private:
  static std::string format(const std::string& file, const std::string& record,
                            const std::string& field, const std::string& what) {
    std::string s = file;
    if (!record.empty()) s += ": " + record;
    if (!field.empty()) s += ": field \"" + field + "\"";
    s += ": " + what;
    return s;
  }
  std::string file_, record_, field_;
};

// An error about one field of an options struct ("background", "fit.lr"): the message says
// what is wrong in the library's terms, and field() lets an edge (the CLI, the HTTP API)
// name its own spelling of the option. Base is Error or UsageError (the exit code).
class NamesField {
 public:
  virtual ~NamesField() = default;
  virtual const std::string& field() const = 0;
};

template <class Base>
class FieldError : public Base, public NamesField {
 public:
  FieldError(std::string field, const std::string& what) : Base(what), field_(std::move(field)) {}
  const std::string& field() const override { return field_; }

 private:
  std::string field_;
};

class PrivacyError : public Error {
 public:
  using Error::Error;
};

}  // namespace attune
