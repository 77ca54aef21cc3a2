#include "attune/models/llama2c_vocab.h"

#include <cstdio>
#include <fstream>

#include "attune/core/error.h"

namespace attune::models {

Llama2cVocab Llama2cVocab::load(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open");
  std::int32_t max_len = 0;
  in.read(reinterpret_cast<char*>(&max_len), 4);
  if (!in || max_len <= 0 || max_len > 1 << 16) throw Error(file.string() + ": not a llama2.c tokenizer file");
  Llama2cVocab v;
  while (true) {
    float score;
    std::int32_t len;
    if (!in.read(reinterpret_cast<char*>(&score), 4)) break;
    if (!in.read(reinterpret_cast<char*>(&len), 4) || len < 0 || len > max_len)
      throw Error(file.string() + ": token " + std::to_string(v.pieces_.size()) + ": bad length");
    std::string piece(static_cast<std::size_t>(len), '\0');
    if (!in.read(piece.data(), len)) throw Error(file.string() + ": token " + std::to_string(v.pieces_.size()) + ": truncated");
    v.pieces_.push_back(std::move(piece));
    v.scores_.push_back(score);
  }
  if (v.pieces_.empty()) throw Error(file.string() + ": no tokens");
  return v;
}

std::string Llama2cVocab::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  std::int32_t prev = 1;  // generation starts after BOS
  for (auto id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= pieces_.size()) throw Error("token id " + std::to_string(id) + " outside the vocabulary");
    if (id == 1 || id == 2) {
      prev = id;
      continue;
    }
    std::string_view p = pieces_[static_cast<std::size_t>(id)];
    if (prev == 1 && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    unsigned byte;
    if (p.size() == 6 && std::sscanf(std::string(p).c_str(), "<0x%02X>", &byte) == 1) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(p);
    }
    prev = id;
  }
  return out;
}

}  // namespace attune::models
