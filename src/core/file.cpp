#include "attune/core/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
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

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw Error(path.string() + ": cannot write");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(path.string() + ": write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error(path.string() + ": " + ec.message());
  }
}

}  // namespace attune
