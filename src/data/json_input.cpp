#include "json_input.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <vector>

#include "attune/core/error.h"

namespace attune::data::detail {

namespace fs = std::filesystem;

std::size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    // Fast path: 8 ASCII bytes at a time.
    if (i + 8 <= n) {
      std::uint64_t block;
      std::memcpy(&block, p + i, 8);
      if ((block & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string describe_offset(std::string_view text, std::size_t offset) {
  if (offset > text.size()) offset = text.size();
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < offset; ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1) +
         " (byte offset " + std::to_string(offset) + ")";
}

std::string record_name(const std::string& prefix, std::size_t index, const std::string& id) {
  std::string s = prefix + " " + std::to_string(index);
  if (!id.empty()) s += " (id " + json(id).dump(-1, ' ', false, json::error_handler_t::replace) + ")";
  return s;
}

namespace {

std::string golds_record(std::size_t index, const std::string& id) {
  std::string s = "golds[" + std::to_string(index) + "]";
  if (!id.empty()) s += " (id " + json(id).dump(-1, ' ', false, json::error_handler_t::replace) + ")";
  return s;
}

// Follows the parser's callbacks to know, when it fails, which record and field it was in.
struct PathTracker {
  struct Frame {
    bool is_array = false;
    std::size_t index = 0;  // arrays: number of completed elements = index of the current one
    std::string key;        // objects: the current key
    std::string id;         // objects: the value of "id" once seen
  };
  std::vector<Frame> stack;

  void completed_child() {
    if (!stack.empty() && stack.back().is_array) ++stack.back().index;
  }

  bool on_event(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        stack.push_back(Frame{false, 0, {}, {}});
        break;
      case json::parse_event_t::array_start:
        stack.push_back(Frame{true, 0, {}, {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        completed_child();
        break;
      case json::parse_event_t::key:
        if (!stack.empty() && parsed.is_string()) stack.back().key = parsed.get<std::string>();
        break;
      case json::parse_event_t::value:
        if (!stack.empty() && !stack.back().is_array && stack.back().key == "id") {
          if (parsed.is_string()) stack.back().id = parsed.get<std::string>();
          else if (parsed.is_number_integer()) stack.back().id = parsed.dump();
        }
        completed_child();
        break;
    }
    return true;
  }

  // The field path of frames [from, end): "profile[3].date".
  std::string field_from(std::size_t from) const {
    std::string out;
    for (std::size_t i = from; i < stack.size(); ++i) {
      const Frame& f = stack[i];
      if (f.is_array) {
        out += "[" + std::to_string(f.index) + "]";
      } else {
        if (f.key.empty()) break;
        if (!out.empty()) out += ".";
        out += f.key;
      }
    }
    return out;
  }

  void locate(Layout layout, const std::string& line_record, std::string& record, std::string& field) const {
    record.clear();
    field.clear();
    switch (layout) {
      case Layout::kRecordArray:
        if (stack.empty()) return;
        if (!stack[0].is_array) {
          field = field_from(0);
          return;
        }
        record = record_name("record", stack[0].index,
                             stack.size() > 1 && !stack[1].is_array ? stack[1].id : std::string());
        field = field_from(1);
        return;
      case Layout::kGoldsObject:
        if (stack.size() >= 2 && !stack[0].is_array && stack[0].key == "golds" && stack[1].is_array) {
          record = golds_record(stack[1].index,
                                stack.size() > 2 && !stack[2].is_array ? stack[2].id : std::string());
          field = field_from(2);
        } else {
          field = field_from(0);
        }
        return;
      case Layout::kLine:
        record = line_record;
        if (!stack.empty() && !stack[0].is_array && !stack[0].id.empty())
          record += " (id " + json(stack[0].id).dump(-1, ' ', false, json::error_handler_t::replace) + ")";
        field = field_from(0);
        return;
    }
  }
};

// "syntax error while parsing value - invalid literal; last read: 'h'" from nlohmann's
// "[json.exception.parse_error.101] parse error at line 1, column 1: syntax error ...".
std::string parse_detail(const char* what) {
  std::string_view s(what);
  auto col = s.find(", column ");
  if (col != std::string_view::npos) {
    auto colon = s.find(": ", col);
    if (colon != std::string_view::npos) return std::string(s.substr(colon + 2));
  }
  auto bracket = s.find("] ");
  if (bracket != std::string_view::npos) return std::string(s.substr(bracket + 2));
  return std::string(s);
}

bool blank(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return false;
  return true;
}

}  // namespace

json parse_json(std::string_view text, const fs::path& file, Layout layout, std::size_t base_offset,
                const std::string& line_record, std::string_view whole_file) {
  if (whole_file.empty()) whole_file = text;
  // A UTF-8 byte order mark is allowed at the start of a file.
  if (base_offset == 0 && text.substr(0, 3) == "\xEF\xBB\xBF") {
    text.remove_prefix(3);
    base_offset = 3;
  }
  if (blank(text))
    throw InputError(file.string(), layout == Layout::kLine ? line_record : "", "",
                     "not JSON: the file is empty");
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& first) {
    // Slow path, only on failure: parse again following the path, to say where it broke.
    PathTracker tracker;
    std::string detail = parse_detail(first.what());
    std::size_t err = first.byte > 0 ? first.byte - 1 : 0;
    try {
      json::parser_callback_t cb = [&tracker](int depth, json::parse_event_t ev, json& parsed) {
        return tracker.on_event(depth, ev, parsed);
      };
      json ignored = json::parse(text.begin(), text.end(), cb);
      (void)ignored;
    } catch (const json::parse_error& again) {
      detail = parse_detail(again.what());
      err = again.byte > 0 ? again.byte - 1 : 0;
    }
    std::string record, field;
    tracker.locate(layout, line_record, record, field);
    std::size_t bad = first_invalid_utf8(text);
    if (bad != std::string_view::npos && bad <= err)
      throw InputError(file.string(), record, field,
                       "invalid UTF-8 at " + describe_offset(whole_file, base_offset + bad));
    bool looks_like_json = text.find_first_not_of(" \t\r\n") != std::string_view::npos &&
                           std::string_view("[{\"-0123456789tfn").find(
                               text[text.find_first_not_of(" \t\r\n")]) != std::string_view::npos;
    throw InputError(file.string(), record, field,
                     std::string(looks_like_json ? "JSON syntax error" : "not JSON") + " at " +
                         describe_offset(whole_file, base_offset + err) + ": " + detail);
  }
}

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

std::string number_text(const json& v) {
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  double d = v.get<double>();
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9007199254740992.0)
    return std::to_string(static_cast<std::int64_t>(d));
  return v.dump();
}

bool valid_date_shape(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (s[i] < '0' || s[i] > '9') return false;
  int month = (s[5] - '0') * 10 + (s[6] - '0');
  int day = (s[8] - '0') * 10 + (s[9] - '0');
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

// ---- FieldReader ----------------------------------------------------------------------

void FieldReader::fail(const std::string& key, const std::string& what) const {
  throw InputError(file_, record_, path(key), what);
}

bool FieldReader::has(const char* key) const { return obj_.find(key) != obj_.end(); }

const json& FieldReader::get(const char* key) const {
  auto it = obj_.find(key);
  if (it == obj_.end()) fail(key, "missing required field");
  return *it;
}

std::string FieldReader::string(const char* key) const {
  const json& v = get(key);
  if (!v.is_string()) fail(key, "expected a string, got " + type_name(v));
  return v.get<std::string>();
}

std::string FieldReader::id(const char* key) const {
  const json& v = get(key);
  std::string s;
  if (v.is_string()) s = v.get<std::string>();
  else if (v.is_number_integer()) s = number_text(v);
  else fail(key, "expected a string (or an integer) id, got " + type_name(v));
  if (s.empty()) fail(key, "empty id");
  return s;
}

std::string FieldReader::text(const char* key) const {
  const json& v = get(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return number_text(v);
  fail(key, "expected a string or a number, got " + type_name(v));
}

std::optional<std::string> FieldReader::optional_string(const char* key) const {
  auto it = obj_.find(key);
  if (it == obj_.end()) return std::nullopt;
  if (!it->is_string()) fail(key, "expected a string, got " + type_name(*it));
  return it->get<std::string>();
}

std::string json_quote(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace attune::data::detail
