#include "attune/core/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attune/core/error.h"

namespace attune {

namespace fs = std::filesystem;

std::string read_file(const fs::path& file) {
  std::error_code ec;
  if (fs::is_directory(file, ec)) throw InputError(file.string(), "", "", "is a directory, expected a file");
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) throw InputError(file.string(), "", "", std::string("cannot open: ") + std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  std::size_t n;
  auto size = fs::file_size(file, ec);
  if (!ec) out.reserve(size);
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f);
  const int err = errno;
  std::fclose(f);
  if (failed) throw InputError(file.string(), "", "", std::string("cannot read: ") + std::strerror(err));
  return out;
}

namespace {

// Writes all of `bytes` to `f`, then flushes; false on any failure (errno set).
bool write_all(std::FILE* f, std::string_view bytes) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) return false;
  return std::fflush(f) == 0;
}

// A device, FIFO or socket: written in place (replacing it would turn /dev/null into a file).
void write_in_place(const fs::path& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(path.string() + ": cannot write: " + std::strerror(errno));
  const bool ok = write_all(f, bytes);
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) throw Error(path.string() + ": write failed: " + std::strerror(ok ? errno : err));
}

}  // namespace

void write_file_atomic(const fs::path& path_in, std::string_view bytes) {
  std::error_code ec;
  fs::path path = path_in;
  // Write through links: replace what they point at (a dangling link's target is created).
  for (int hops = 0; fs::is_symlink(fs::symlink_status(path, ec)); ++hops) {
    const fs::path target = fs::read_symlink(path, ec);
    if (ec || hops == 40) throw Error(path_in.string() + ": cannot resolve the symbolic link" + (ec ? ": " + ec.message() : ""));
    path = target.is_absolute() ? target : path.parent_path() / target;
  }
  const auto st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) throw Error(path_in.string() + ": is a directory, expected a file");
    if (!fs::is_regular_file(st)) return write_in_place(path, bytes);
  }
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(path_in.string() + ": cannot write: " + std::strerror(errno));
  const bool ok = write_all(f, bytes);
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    throw Error(path_in.string() + ": write failed: " + std::strerror(ok ? EIO : err));
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(path_in.string() + ": " + ec.message());
  }
}

void write_output(const std::string& path, std::string_view bytes) {
  if (path != "-") return write_file_atomic(path, bytes);
  if (!write_all(stdout, bytes)) throw Error(std::string("standard output: write failed: ") + std::strerror(errno));
}

namespace {
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return ::remove(path) == 0 || errno == ENOENT ? 0 : -1;  // depth-first: a folder is empty by now
}
}  // namespace

void remove_tree(const std::filesystem::path& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw Error(path.string() + ": cannot remove: " + std::strerror(errno));
  }
  if (::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    throw Error(path.string() + ": cannot remove: " + std::strerror(errno));
}

}  // namespace attune
