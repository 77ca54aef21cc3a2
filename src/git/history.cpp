// Reading a git history with libgit2 (git/import.h).
#include <git2.h>
#include <iconv.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <memory>
#include <mutex>
#include <set>

#include "attune/core/error.h"
#include "attune/core/strings.h"
#include "attune/git/import.h"

namespace attune::git {
namespace {

namespace fs = std::filesystem;

void init_once() {
  static std::once_flag once;
  std::call_once(once, [] { git_libgit2_init(); });
}

std::string last_error() {
  const git_error* e = git_error_last();
  return e && e->message ? e->message : "unknown libgit2 error";
}

// RAII for libgit2's handles.
template <class T, void (*Free)(T*)>
struct Handle {
  T* p = nullptr;
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (p) Free(p);
  }
  T** out() { return &p; }
  T* get() const { return p; }
};
using Repo = Handle<git_repository, git_repository_free>;
using Walk = Handle<git_revwalk, git_revwalk_free>;
using CommitH = Handle<git_commit, git_commit_free>;
using Object = Handle<git_object, git_object_free>;
using Mailmap = Handle<git_mailmap, git_mailmap_free>;
using Signature = Handle<git_signature, git_signature_free>;
using Tree = Handle<git_tree, git_tree_free>;
using Diff = Handle<git_diff, git_diff_free>;

// Opens exactly `path` (no search upwards: a wrong folder inside another repository must
// not silently import that one), refusing what cannot give honest histories.
void open_repository(Repo& repo, const fs::path& path) {
  init_once();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(path.string(), "", "", "does not exist");
  if (!fs::is_directory(path, ec)) throw InputError(path.string(), "", "", "is not a folder");
  if (git_repository_open_ext(repo.out(), path.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH, nullptr) != 0)
    throw InputError(path.string(), "", "", "is not a git repository (" + last_error() + ")");
  if (git_repository_is_bare(repo.get()))
    throw InputError(path.string(), "", "",
                     "is a bare repository; run import-git on a clone with a work tree (git clone " + path.string() +
                     " DIR)");
  if (git_repository_is_shallow(repo.get()))
    throw InputError(path.string(), "", "",
                     "is a shallow clone: its history is cut short, and so would every profile be; fetch the whole "
                     "history first (git fetch --unshallow)");
  if (git_repository_is_empty(repo.get()) == 1)
    throw InputError(path.string(), "", "", "has no commits");
}

// A message that is not UTF-8, converted from its declared encoding (Latin-1 when it
// declares none, which is what such old commits nearly always are).
bool to_utf8(std::string& s, const char* declared) {
  if (valid_utf8(s)) return false;
  const char* from = declared && *declared ? declared : "ISO-8859-1";
  const auto bad = reinterpret_cast<iconv_t>(-1);
  iconv_t cd = iconv_open("UTF-8", from);
  if (cd == bad) cd = iconv_open("UTF-8", "ISO-8859-1");
  std::string out(s.size() * 4 + 16, '\0');
  std::size_t rc = static_cast<std::size_t>(-1);
  if (cd != bad) {
    char* in = s.data();
    std::size_t in_left = s.size();
    char* o = out.data();
    std::size_t out_left = out.size();
    rc = iconv(cd, &in, &in_left, &o, &out_left);
    iconv_close(cd);
    out.resize(out.size() - out_left);
  }
  if (rc == static_cast<std::size_t>(-1) || !valid_utf8(out)) {
    // Not in that encoding either: keep the ASCII bytes, drop the rest.
    std::string ascii;
    for (char c : s)
      if (static_cast<unsigned char>(c) < 0x80) ascii += c;
    out = std::move(ascii);
  }
  s = std::move(out);
  return true;
}

std::string collapse(std::string_view s) { return join(split_whitespace(s), " "); }

std::vector<std::string_view> lines_of(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    auto nl = s.find('\n', start);
    if (nl == std::string_view::npos) nl = s.size();
    auto line = s.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    start = nl + 1;
  }
  return out;
}

bool blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); });
}

// "Key: value" with git's trailer key grammar (letters, digits, '-'; starting with a letter).
bool trailer_line(std::string_view line, std::string* key = nullptr) {
  if (starts_with(line, "(cherry picked from commit ")) return true;
  std::size_t i = 0;
  if (line.empty() || !std::isalpha(static_cast<unsigned char>(line[0]))) return false;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '-')) ++i;
  if (i == 0 || i >= line.size() || line[i] != ':') return false;
  if (key) {
    key->assign(line.substr(0, i));
    std::transform(key->begin(), key->end(), key->begin(), [](unsigned char c) { return std::tolower(c); });
  }
  return true;
}

const std::set<std::string>& known_trailers() {
  static const std::set<std::string> k = {
      "signed-off-by", "reviewed-by",  "acked-by",     "tested-by",       "reported-by",    "suggested-by",
      "helped-by",     "co-authored-by", "co-developed-by", "cc",         "change-id",      "mentored-by",
      "noticed-by",    "requested-by", "thanks-to",    "based-on-patch-by", "original-patch-by", "reviewed-on",
      "message-id",    "link",         "fixes",        "closes",          "bug",            "approved-by",
      "improved-by",   "inspired-by",  "contributions-by", "sponsored-by", "git-svn-id",    "bisected-by",
      "diagnosed-by",  "analyzed-by",  "confirmed-by", "backported-from", "cherry-picked-from"};
  return k;
}

}  // namespace

std::string strip_trailers(std::string_view body) {
  auto lines = lines_of(body);
  // Trailer paragraphs at the end: every non-blank line a trailer (or a continuation line
  // starting with whitespace after one).
  std::size_t end = lines.size();
  while (true) {
    while (end > 0 && blank(lines[end - 1])) --end;
    if (end == 0) break;
    std::size_t begin = end;
    while (begin > 0 && !blank(lines[begin - 1])) --begin;
    bool all = true, any_known = false;
    for (std::size_t i = begin; i < end && all; ++i) {
      const bool cont = i > begin && std::isspace(static_cast<unsigned char>(lines[i][0]));
      std::string key;
      all = cont || trailer_line(lines[i], &key);
      if (all && !cont) any_known = any_known || key.empty() || known_trailers().count(key);
    }
    // As git's interpret-trailers: a closing "Note: ..." paragraph is prose, not a trailer block.
    if (!all || !any_known) break;
    end = begin;
  }
  std::string out;
  for (std::size_t i = 0; i < end; ++i) {
    std::string key;
    if (trailer_line(lines[i], &key) && (key.empty() || known_trailers().count(key))) continue;
    out.append(lines[i]);
    out += '\n';
  }
  return collapse(out);
}

History read_git_history(const fs::path& path, const ReadOptions& options) {
  Repo repo;
  open_repository(repo, path);
  History h;
  fs::path abs = fs::absolute(path).lexically_normal();
  if (abs.filename().empty()) abs = abs.parent_path();  // "repo/" -> "repo"
  h.repository = abs.string();
  Object target;
  if (git_revparse_single(target.out(), repo.get(), options.revision.c_str()) != 0)
    throw InputError(path.string(), "", "", "unknown revision \"" + options.revision + "\" (" + last_error() + ")");
  Object peeled;
  if (git_object_peel(peeled.out(), target.get(), GIT_OBJECT_COMMIT) != 0)
    throw InputError(path.string(), "", "", "\"" + options.revision + "\" does not name a commit");
  const git_oid start = *git_object_id(peeled.get());
  char hex[GIT_OID_HEXSZ + 1];
  h.head = git_oid_tostr(hex, sizeof hex, &start);

  Mailmap mailmap;
  if (git_mailmap_from_repository(mailmap.out(), repo.get()) != 0) mailmap.p = nullptr;  // no mailmap: names as written
  Walk walk;
  if (git_revwalk_new(walk.out(), repo.get()) != 0 || git_revwalk_push(walk.get(), &start) != 0)
    throw Error("import-git: cannot walk " + path.string() + ": " + last_error());
  git_revwalk_sorting(walk.get(), GIT_SORT_NONE);
  git_oid oid;
  int rc;
  while ((rc = git_revwalk_next(&oid, walk.get())) == 0) {
    CommitH c;
    if (git_commit_lookup(c.out(), repo.get(), &oid) != 0)
      throw Error("import-git: cannot read commit " + std::string(git_oid_tostr(hex, sizeof hex, &oid)) + ": " + last_error());
    HistoryCommit hc;
    hc.sha = git_oid_tostr(hex, sizeof hex, &oid);
    hc.parents = git_commit_parentcount(c.get());
    Signature sig;
    if (git_commit_author_with_mailmap(sig.out(), c.get(), mailmap.get()) != 0)
      throw Error("import-git: commit " + hc.sha + ": cannot read its author: " + last_error());
    hc.author_name = sig.get()->name ? sig.get()->name : "";
    hc.author_email = sig.get()->email ? sig.get()->email : "";
    hc.time = static_cast<std::int64_t>(sig.get()->when.time);
    const char* raw = git_commit_message_raw(c.get());
    std::string msg = raw ? raw : "";
    const char* enc = git_commit_message_encoding(c.get());
    bool converted = to_utf8(msg, enc);
    converted = to_utf8(hc.author_name, enc) || converted;
    converted = to_utf8(hc.author_email, enc) || converted;
    if (converted) ++h.reencoded;
    // The subject is the first paragraph (git's %s), the description everything after it.
    const auto lines = lines_of(msg);
    std::size_t i = 0;
    while (i < lines.size() && blank(lines[i])) ++i;
    std::string subject;
    for (; i < lines.size() && !blank(lines[i]); ++i) subject += std::string(lines[i]) + " ";
    std::string body;
    for (; i < lines.size(); ++i) body += std::string(lines[i]) + "\n";
    hc.subject = collapse(subject);
    hc.description = strip_trailers(body);
    h.commits.push_back(std::move(hc));
    if (options.progress && options.progress_every && h.commits.size() % options.progress_every == 0)
      options.progress(h.commits.size());
  }
  if (rc != GIT_ITEROVER) throw Error("import-git: walking " + path.string() + " failed: " + last_error());
  if (options.progress) options.progress(h.commits.size());
  std::sort(h.commits.begin(), h.commits.end(), [](const HistoryCommit& a, const HistoryCommit& b) {
    return a.time != b.time ? a.time < b.time : a.sha < b.sha;
  });
  return h;
}

std::vector<std::vector<std::string>> changed_files(const fs::path& path, const std::vector<std::string>& shas,
                                                    std::size_t limit) {
  Repo repo;
  open_repository(repo, path);
  std::vector<std::vector<std::string>> out;
  out.reserve(shas.size());
  for (const auto& sha : shas) {
    git_oid oid;
    CommitH c;
    if (git_oid_fromstr(&oid, sha.c_str()) != 0 || git_commit_lookup(c.out(), repo.get(), &oid) != 0)
      throw InputError(path.string(), "", "", "unknown commit " + sha);
    Tree tree, parent_tree;
    if (git_commit_tree(tree.out(), c.get()) != 0) throw Error("import-git: commit " + sha + ": " + last_error());
    if (git_commit_parentcount(c.get()) > 0) {
      CommitH parent;
      if (git_commit_parent(parent.out(), c.get(), 0) != 0 || git_commit_tree(parent_tree.out(), parent.get()) != 0)
        throw Error("import-git: commit " + sha + ": cannot read its parent: " + last_error());
    }
    Diff diff;
    if (git_diff_tree_to_tree(diff.out(), repo.get(), parent_tree.get(), tree.get(), nullptr) != 0)
      throw Error("import-git: commit " + sha + ": cannot diff: " + last_error());
    std::vector<std::string> files;
    const std::size_t n = git_diff_num_deltas(diff.get());
    for (std::size_t i = 0; i < n; ++i) {
      const git_diff_delta* d = git_diff_get_delta(diff.get(), i);
      const char* p = d->new_file.path ? d->new_file.path : d->old_file.path;
      if (p) {
        std::string f = p;
        to_utf8(f, nullptr);
        files.push_back(std::move(f));
      }
    }
    std::sort(files.begin(), files.end());
    if (limit && files.size() > limit) files.resize(limit);
    out.push_back(std::move(files));
  }
  return out;
}

}  // namespace attune::git
