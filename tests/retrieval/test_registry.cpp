// The retriever-kind registry: layers above retrieval (neural/) add "PREFIX:ARG" kinds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "attune/core/error.h"
#include "attune/retrieval/retriever.h"

namespace attune::retrieval {
namespace {

// Records what the factory was given.
class EchoRetriever final : public Retriever {
 public:
  EchoRetriever(std::string arg, std::uint64_t seed) : arg_(std::move(arg)), seed_(seed) {}
  std::string name() const override { return "echo:" + arg_ + "@" + std::to_string(seed_); }

 protected:
  Ranking do_rank(const Query&, std::span<const Document>, std::size_t) const override { return {}; }

 private:
  std::string arg_;
  std::uint64_t seed_;
};

TEST(Registry, UnregisteredNeuralKindIsAUsageErrorSayingSo) {
  for (const char* spec : {"dense:/models/x", "cross:/models/x", "rrf(bm25,dense:/m)"}) {
    try {
      make_retriever(spec, 0);
      FAIL() << "no throw for " << spec;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("not available"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(make_retriever("nokind:abc", 0), UsageError);
}

TEST(Registry, RegisteredKindBuildsAlsoInsideRrf) {
  register_retriever_kind("echo", [](std::string_view arg, std::uint64_t seed) {
    return std::make_unique<EchoRetriever>(std::string(arg), seed);
  });
  EXPECT_EQ(make_retriever("echo:some/dir", 7)->name(), "echo:some/dir@7");
  EXPECT_EQ(make_retriever(" echo: a ", 1)->name(), "echo:a@1");
  EXPECT_EQ(make_retriever("rrf(bm25,echo:m)", 3)->name(), "rrf(bm25,echo:m@3)");
  EXPECT_THROW(make_retriever("echo:", 0), UsageError);  // no argument
  EXPECT_THROW(register_retriever_kind("", nullptr), UsageError);
  EXPECT_THROW(register_retriever_kind("a:b", [](std::string_view, std::uint64_t) { return std::unique_ptr<Retriever>(); }),
               UsageError);
}

TEST(Registry, ATrainedFolderIsItsMarkersKindAndOtherFoldersAreRefused) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("attune_trained_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "plain");
  fs::create_directories(dir / "bad");
  fs::create_directories(dir / "ok");
  std::ofstream(dir / "bad" / "attune_model.json") << "{\"kind\": 3}";
  std::ofstream(dir / "ok" / "attune_model.json") << "{\"kind\": \"testkind\", \"method\": \"ropg-kd\"}";
  EXPECT_EQ(trained_model_kind("bm25"), "");
  EXPECT_EQ(trained_model_kind((dir / "ok").string()), "testkind");
  try {
    trained_model_kind((dir / "plain").string());
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("dense:"), std::string::npos) << e.what();  // says what to write instead
  }
  try {
    trained_model_kind((dir / "bad").string());
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attune_model.json"), std::string::npos) << e.what();
  }
  // The folder's kind is dispatched like KIND:DIR.
  std::string seen;
  register_retriever_kind("testkind", [&](std::string_view arg, std::uint64_t) {
    seen = std::string(arg);
    return make_retriever("bm25", 0);
  });
  auto r = make_retriever((dir / "ok").string(), 0);
  EXPECT_EQ(seen, (dir / "ok").string());
  EXPECT_EQ(expand_spec(" " + (dir / "ok").string()), "testkind:" + (dir / "ok").string());
  EXPECT_EQ(expand_spec("bm25"), "bm25");
  fs::remove_all(dir);
}

TEST(Registry, AFolderTrainedOnAFirstStagesTopLReranksIt) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("attune_rerank_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "pearl");
  fs::create_directories(dir / "broken");
  std::ofstream(dir / "pearl" / "attune_model.json")
      << R"j({"kind": "echo2", "method": "pearl", "rerank": {"initial": "rrf(bm25,recency)", "top_l": 16}})j";
  std::ofstream(dir / "broken" / "attune_model.json") << R"({"kind": "echo2", "rerank": {"initial": "bm25", "top_l": 0}})";
  register_retriever_kind("echo2", [](std::string_view arg, std::uint64_t seed) {
    return std::make_unique<EchoRetriever>(std::string(arg), seed);
  });
  const std::string p = (dir / "pearl").string();
  EXPECT_EQ(expand_spec(p), "rerank(rrf(bm25,recency),16,echo2:" + p + ")");
  EXPECT_EQ(make_retriever(p, 4)->name(), "rerank(rrf(bm25,recency),16,echo:" + p + "@4)");
  EXPECT_EQ(make_retriever("echo2:" + p, 4)->name(), "echo:" + p + "@4");  // KIND:DIR: the reranker alone
  EXPECT_THROW(make_retriever((dir / "broken").string(), 0), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attune::retrieval
