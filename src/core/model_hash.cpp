#include "attune/core/model_hash.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/sha256.h"

namespace attune {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCache = ".attune-content-hash.json";

struct Stamp {
  std::uint64_t size = 0, mtime_ns = 0, inode = 0;
  bool operator==(const Stamp&) const = default;
};

Stamp stamp_of(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) throw Error(p.string() + ": cannot stat: " + std::strerror(errno));
  return {static_cast<std::uint64_t>(st.st_size),
          static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(st.st_mtim.tv_nsec),
          static_cast<std::uint64_t>(st.st_ino)};
}

std::string file_digest(const fs::path& p) {
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) throw Error(p.string() + ": cannot open: " + std::strerror(errno));
  Sha256 h;
  std::string buf(1 << 20, '\0');
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.update(std::string_view(buf.data(), n));
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw Error(p.string() + ": cannot read");
  return h.hex();
}

// Digests of unchanged files, shared by every caller in the process (read-only folders).
std::mutex memo_mu;
std::map<std::string, std::pair<Stamp, std::string>>& memo() {
  static std::map<std::string, std::pair<Stamp, std::string>> m;
  return m;
}

bool module_folder(const std::string& name) {
  const auto us = name.find('_');
  return us != std::string::npos && us > 0 &&
         std::all_of(name.begin(), name.begin() + static_cast<std::ptrdiff_t>(us), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

std::vector<std::string> model_content_files(const fs::path& dir) {
  std::vector<std::string> files;
  try {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      if (e.is_regular_file()) {
        files.push_back(name);
      } else if (e.is_directory() && module_folder(name)) {
        for (const auto& s : fs::directory_iterator(e.path()))
          if (s.is_regular_file() && s.path().filename().string()[0] != '.')
            files.push_back(name + "/" + s.path().filename().string());
      }
    }
  } catch (const fs::filesystem_error& e) {
    throw Error(dir.string() + ": cannot list the model folder (" + e.code().message() + ")");
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string model_content_hash(const fs::path& dir) {
  const auto files = model_content_files(dir);
  if (std::none_of(files.begin(), files.end(), [](const std::string& f) {
        const auto ext = fs::path(f).extension().string();
        return ext == ".safetensors" || ext == ".bin";
      }))
    throw Error(dir.string() + ": no weights file (*.safetensors) to identify the model by");
  nlohmann::json cache = nlohmann::json::object();
  try {
    if (fs::is_regular_file(dir / kCache)) cache = nlohmann::json::parse(read_file(dir / kCache));
  } catch (const std::exception&) {
    cache = nlohmann::json::object();  // a damaged cache is recomputed
  }
  if (!cache.is_object() || cache.value("version", 0) != 1 || !cache.contains("files") || !cache["files"].is_object())
    cache = {{"version", 1}, {"files", nlohmann::json::object()}};
  bool changed = false;
  Sha256 all;
  all.add("attune-model-content-v1");
  nlohmann::json kept = nlohmann::json::object();
  for (const auto& f : files) {
    const fs::path p = dir / f;
    const Stamp s = stamp_of(p);
    const std::string key = fs::absolute(p).lexically_normal().string();
    std::string digest;
    {
      std::lock_guard<std::mutex> lock(memo_mu);
      auto it = memo().find(key);
      if (it != memo().end() && it->second.first == s) digest = it->second.second;
    }
    const auto& c = cache["files"];
    if (digest.empty() && c.contains(f) && c[f].is_object() && c[f].value("size", std::uint64_t{0}) == s.size &&
        c[f].value("mtime_ns", std::uint64_t{0}) == s.mtime_ns && c[f].value("inode", std::uint64_t{0}) == s.inode &&
        c[f].contains("sha256") && c[f]["sha256"].is_string() && c[f]["sha256"].get<std::string>().size() == 64)
      digest = c[f]["sha256"].get<std::string>();
    if (digest.empty()) {
      digest = file_digest(p);
      if (stamp_of(p) != s) throw Error(p.string() + ": changed while it was being read; try again");
      changed = true;
    }
    {
      std::lock_guard<std::mutex> lock(memo_mu);
      memo()[key] = {s, digest};
    }
    kept[f] = {{"size", s.size}, {"mtime_ns", s.mtime_ns}, {"inode", s.inode}, {"sha256", digest}};
    all.add(f).add(digest);
  }
  if (changed || kept != cache["files"]) {
    try {  // best effort: a read-only folder is simply hashed again next time
      write_file_atomic(dir / kCache, nlohmann::json({{"version", 1}, {"files", kept}}).dump(1) + "\n");
    } catch (const std::exception&) {
    }
  }
  return all.hex();
}

}  // namespace attune
