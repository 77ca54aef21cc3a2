#pragma once
// The content identity of a model folder, for cache keys (generations, feedback, stored
// embeddings): a SHA-256 over every file that defines the model, read in full, so two
// folders that differ anywhere (a fine-tune that froze the first and last layers, a LoRA
// merge) never share a key. Each file's digest is kept beside it in
// DIR/.attune-content-hash.json, keyed by size, modification time and inode, so a folder is
// read in full once, not at every load; a folder that cannot be written (read-only
// weights) is hashed again in each process. Torch-free.
#include <filesystem>
#include <string>
#include <vector>

namespace attune {

// 64 hex digits. Error naming the folder when it has no weights (*.safetensors, *.bin) or a
// file cannot be read.
std::string model_content_hash(const std::filesystem::path& dir);

// The files model_content_hash covers, relative to `dir`, sorted: every regular file at the
// top level and in the sentence-transformers module folders ("1_Pooling", ...), except
// hidden files (the digest cache, a training lock). Other subfolders (a training run's
// checkpoint/) are not the model.
std::vector<std::string> model_content_files(const std::filesystem::path& dir);

}  // namespace attune
