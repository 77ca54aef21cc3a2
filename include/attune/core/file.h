#pragma once
// Whole-file reads and crash-safe whole-file writes, the one implementation every layer uses.
#include <filesystem>
#include <string>
#include <string_view>

namespace attune {

// The file's bytes. InputError naming the path when it is a directory, cannot be opened
// ("cannot open: No such file or directory") or fails mid-read.
std::string read_file(const std::filesystem::path& path);

// Replaces `path` with `bytes` atomically: a temporary file beside it (unique to this
// process), then a rename, so readers see the old or the new file, never a part. Error
// naming the path when it cannot be written; the temporary file is removed then.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace attune
