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
// A symlink is written through: its final target is replaced, the link stays. A path that
// exists and is not a regular file (a device such as /dev/null, a FIFO) is written to in
// place, never replaced; a directory is an Error.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Where users name an output file (--out): "-" writes to standard output (Error when the
// write or flush fails, e.g. a full disk or /dev/full), anything else is write_file_atomic.
void write_output(const std::string& path, std::string_view bytes);

// Removes `path` and, when it is a folder, everything under it (symbolic links are removed,
// never followed); nothing to remove is fine. Error naming the entry that cannot be removed.
// What std::filesystem::remove_all does, on POSIX calls: the CUDA libtorch of PyTorch's
// wheels exports a remove_all of its own that crashes (jumps to address 0) once the folder
// is not empty, and a program linked against that libtorch calls it in place of libstdc++'s.
void remove_tree(const std::filesystem::path& path);

}  // namespace attune
