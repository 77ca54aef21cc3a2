#include "attune/engine/sources.h"

#include <cstdio>
#include <filesystem>

#include "attune/core/error.h"
#include "attune/core/hash.h"
#include "attune/data/golds.h"
#include "attune/index/corpus_index.h"
#include "attune/neural/dense_corpus.h"
#include "attune/retrieval/cached_index.h"
#include "attune/retrieval/spec.h"

namespace attune::engine {

namespace fs = std::filesystem;

std::unique_ptr<retrieval::CandidateSource> make_source(const DataSpec& d, const tasks::Task& task, store::BlobStore& store,
                                                        bool quiet, std::size_t n) {
  if (!task.uses_corpus()) return std::make_unique<retrieval::ProfileCandidates>(task);
  if (d.data.empty()) throw FieldError<UsageError>("data", "task " + task.name() + " searches a corpus: name its directory");
  const fs::path corpus_file = data::find_corpus(d.data);
  auto corpus = data::read_corpus_jsonl(corpus_file);
  if (corpus.empty()) throw InputError(corpus_file.string(), "", "", "empty corpus: no passages to search");
  Hasher h;
  h.add("corpus-bm25-v1").add(task.name());
  std::vector<std::string> texts;
  texts.reserve(corpus.size());
  for (auto& doc : corpus) {
    doc.text = task.document_text(doc);
    h.add(doc.id).add(doc.text);
    texts.push_back(doc.text);
  }
  auto idx = retrieval::cached_corpus_index(store, "bm25:" + h.hex(), texts, corpus_file.string(), quiet);
  return std::make_unique<retrieval::CorpusCandidates>(task, std::move(corpus), std::move(idx), n);
}

void check_gold_docs(const DataSpec& d, const data::Dataset& ds, const retrieval::CandidateSource& base) {
  const auto* corpus = dynamic_cast<const retrieval::CorpusCandidates*>(&base);
  if (!corpus) return;
  data::check_gold_docs(ds, corpus->corpus(), data::find_corpus(d.data));
}

const retrieval::CandidateSource& Sources::for_spec(const std::string& spec) const {
  auto it = by_spec.find(spec);
  return it == by_spec.end() ? *base : *it->second;
}

std::function<const retrieval::CandidateSource*(const std::string&)> Sources::lookup() const {
  return [this](const std::string& spec) { return &for_spec(spec); };
}

Sources make_sources(const DataSpec& d, const tasks::Task& task, store::BlobStore& store, const ModelOptions& models,
                     bool quiet, const std::vector<std::string>& specs, std::size_t n) {
  Sources out;
  out.base = make_source(d, task, store, quiet, n);
  const auto* bm25 = dynamic_cast<const retrieval::CorpusCandidates*>(out.base.get());
  if (!bm25) return out;  // per-profile task: dense: ranks the profile with exact inner products
  std::map<std::string, const retrieval::CandidateSource*> by_dir;
  models::EncoderOptions eo;
  eo.device = models.device;
  neural::DenseCorpusOptions dopts;
  dopts.n = n;
  dopts.progress = !quiet;
  for (const auto& spec : specs) {
    // rerank(A,L,R) reranks what A ranks: A's candidates (a Pearl folder parses into one).
    const auto tree = retrieval::parse_retriever_spec(spec);
    const auto& first = retrieval::first_stage(tree);
    const auto dirs = retrieval::dense_dirs(first);
    if (dirs.empty() || out.by_spec.count(spec)) continue;
    std::vector<const retrieval::CandidateSource*> parts;
    for (const auto& dir : dirs) {
      auto& src = by_dir[dir];
      if (!src) {
        if (!fs::is_directory(dir)) throw UsageError("retriever \"" + spec + "\": no such model folder \"" + dir + "\"");
        out.owned.push_back(neural::DenseCorpusCandidates::open(task, bm25->corpus(), dir, &store, eo, dopts));
        src = out.owned.back().get();
      }
      parts.push_back(src);
    }
    if (first.kind == retrieval::RetrieverSpec::Kind::Registered) {
      out.by_spec[spec] = parts.front();  // dense:DIR: its own dense top-n
    } else {
      parts.insert(parts.begin(), out.base.get());  // rrf(...): BM25's top-n, then the dense ones
      out.owned.push_back(std::make_unique<retrieval::UnionCandidates>(parts));
      out.by_spec[spec] = out.owned.back().get();
    }
  }
  return out;
}

}  // namespace attune::engine
