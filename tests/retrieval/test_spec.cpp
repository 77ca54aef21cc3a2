// Retriever specs parsed once into a typed tree: literal tables of spec strings and their
// canonical text, kinds, dense model folders and first stages; malformed specs and their
// messages; trained-model folders (attune_model.json written into a temp dir).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "attune/core/error.h"
#include "attune/retrieval/spec.h"

namespace attune::retrieval {
namespace {

using Kind = RetrieverSpec::Kind;

// The message's text after the spec, for an unknown spec.
const std::string kExpected =
    "\" (expected none, random, recency, bm25, rrf(spec,spec,...), rerank(spec,L,spec) or a registered KIND:ARG such "
    "as dense:DIR)";
const std::string kRerankExpected =
    " (expected rerank(INITIAL,L,RERANKER) or rerank(INITIAL,L,RERANKER,fuse=S:W), e.g. rerank(bm25,16,cross:DIR))";

// The UsageError message of parse_retriever_spec(spec); "" when it parses.
std::string parse_error(const std::string& spec) {
  try {
    parse_retriever_spec(spec);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// The UsageError message of make_retriever(spec); "" when it builds.
std::string make_error(const RetrieverSpec& spec) {
  try {
    make_retriever(spec, 0);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Spec, CanonicalTextAndKinds) {
  const struct {
    const char* spec;
    const char* canonical;
    Kind kind;
  } table[] = {
      {"none", "none", Kind::None},
      {" random ", "random", Kind::Random},
      {"\trecency\n", "recency", Kind::Recency},
      {"bm25", "bm25", Kind::Bm25},
      {"rrf(bm25)", "rrf(bm25)", Kind::Rrf},
      {"rrf(bm25, recency)", "rrf(bm25,recency)", Kind::Rrf},
      {"rrf( bm25 , rrf(recency,random) )", "rrf(bm25,rrf(recency,random))", Kind::Rrf},
      {"rerank(bm25, 16, cross:/m)", "rerank(bm25,16,cross:/m)", Kind::Rerank},
      {"rerank(bm25,016,recency)", "rerank(bm25,16,recency)", Kind::Rerank},
      {"rerank(bm25, 16, dense:/m, fuse=20:0.5)", "rerank(bm25,16,dense:/m,fuse=20:0.5)", Kind::Rerank},
      {"rerank(bm25,16,dense:/m,fuse=2e1:-0.1)", "rerank(bm25,16,dense:/m,fuse=20:-0.10000000000000001)", Kind::Rerank},
      {"rerank(rrf(bm25,dense:/a),8,rerank(recency,4,cross:/c))", "rerank(rrf(bm25,dense:/a),8,rerank(recency,4,cross:/c))",
       Kind::Rerank},
      {"dense: /models/x ", "dense:/models/x", Kind::Registered},
      {"dense:/models/a:b", "dense:/models/a:b", Kind::Registered},  // the first ':' ends PREFIX
      {"nokind:abc", "nokind:abc", Kind::Registered},                 // registered or not: make_retriever's question
      {"echo:", "echo:", Kind::Registered},
  };
  for (const auto& row : table) {
    const auto s = parse_retriever_spec(row.spec);
    EXPECT_EQ(to_string(s), row.canonical) << row.spec;
    EXPECT_EQ(s.kind, row.kind) << row.spec;
    EXPECT_TRUE(s.folder.empty()) << row.spec;
    EXPECT_EQ(parse_retriever_spec(to_string(s)), s) << row.spec;  // canonical text round-trips
  }
}

TEST(Spec, TreeShape) {
  const auto s = parse_retriever_spec("rerank( rrf(bm25,dense:/a) , 8 , cross: /c )");
  ASSERT_EQ(s.kind, Kind::Rerank);
  EXPECT_EQ(s.depth, 8u);
  ASSERT_EQ(s.children.size(), 2u);
  const auto& fused = s.children[0];
  ASSERT_EQ(fused.kind, Kind::Rrf);
  ASSERT_EQ(fused.children.size(), 2u);
  EXPECT_EQ(fused.children[0].kind, Kind::Bm25);
  EXPECT_EQ(fused.children[1].kind, Kind::Registered);
  EXPECT_EQ(fused.children[1].prefix, "dense");
  EXPECT_EQ(fused.children[1].arg, "/a");
  EXPECT_EQ(s.children[1].prefix, "cross");
  EXPECT_EQ(s.children[1].arg, "/c");
}

TEST(Spec, DenseDirsAndFirstStage) {
  const struct {
    const char* spec;
    std::vector<std::string> dirs;
    const char* first_stage;
  } table[] = {
      {"bm25", {}, "bm25"},
      {"cross:/c", {}, "cross:/c"},
      {"dense:/a", {"/a"}, "dense:/a"},
      {"rrf(bm25,dense:/a,rrf(dense:/b,cross:/c))", {"/a", "/b"}, "rrf(bm25,dense:/a,rrf(dense:/b,cross:/c))"},
      {"rrf(rerank(dense:/a,4,bm25),dense:/b)", {"/b"}, "rrf(rerank(dense:/a,4,bm25),dense:/b)"},
      // rerank ranks what its first stage gives it: the dense folders are the first stage's.
      {"rerank(dense:/a,8,cross:/c)", {}, "dense:/a"},
      {"rerank(rerank(rrf(bm25,dense:/a),32,cross:/b),8,cross:/c)", {}, "rrf(bm25,dense:/a)"},
  };
  for (const auto& row : table) {
    const auto s = parse_retriever_spec(row.spec);
    EXPECT_EQ(dense_dirs(s), row.dirs) << row.spec;
    EXPECT_EQ(to_string(first_stage(s)), row.first_stage) << row.spec;
    EXPECT_EQ(trained_model_kind(s), "") << row.spec;
  }
}

// A retriever list (eval --retrievers, feedback's pool, RSPG's --pool) names each retriever
// once; the repeat is found by canonical text where the specs parse.
TEST(Spec, FirstRepeatedSpecComparesCanonicalText) {
  EXPECT_EQ(first_repeated_spec({}), "");
  EXPECT_EQ(first_repeated_spec({"none", "recency", "bm25", "rrf(bm25,recency)", "rrf(recency,bm25)"}), "");
  EXPECT_EQ(first_repeated_spec({"none", "none"}), "none");
  EXPECT_EQ(first_repeated_spec({"bm25", "recency", " bm25 "}), " bm25 ");  // as written
  EXPECT_EQ(first_repeated_spec({"rrf(bm25,recency)", "rrf( bm25 , recency )"}), "rrf( bm25 , recency )");
  EXPECT_EQ(first_repeated_spec({"rerank(bm25,16,recency)", "rerank(bm25,016,recency)"}), "rerank(bm25,016,recency)");
  EXPECT_EQ(first_repeated_spec({"nope", "bm25", "nope"}), "nope");  // unknown: compared as written
  EXPECT_EQ(first_repeated_spec({"dense:a", "dense:b"}), "");
}

TEST(Spec, MalformedSpecsAreUsageErrorsNamingTheSpec) {
  const struct {
    const char* spec;
    std::string message;
  } table[] = {
      {"", "unknown retriever spec \"" + kExpected},
      {"bm24", "unknown retriever spec \"bm24" + kExpected},
      {" BM25 ", "unknown retriever spec \" BM25 " + kExpected},  // as the user wrote it
      {"rrf(bm25", "unknown retriever spec \"rrf(bm25" + kExpected},
      {"rrf(bm25:x", "unknown retriever spec \"rrf(bm25:x" + kExpected},  // not a PREFIX
      {"a b:c", "unknown retriever spec \"a b:c" + kExpected},
      {":x", "unknown retriever spec \":x" + kExpected},
      {"rrf(bm25,foo)", "unknown retriever spec \"foo" + kExpected},  // the part, not the whole
      {"rrf()", "retriever spec \"rrf()\" fuses no lists"},
      {"rrf( )", "retriever spec \"rrf( )\" fuses no lists"},
      {"rrf(bm25,)", "bad retriever spec \"rrf(bm25,)\": empty retriever spec in \"bm25,\""},
      {"rrf(a)(b)", "bad retriever spec \"rrf(a)(b)\": unbalanced ')' in retriever specs \"a)(b\""},
      {"rerank(bm25,16)", "bad retriever spec \"rerank(bm25,16)\": it has 2 parts, not 3" + kRerankExpected},
      {"rerank(bm25,4,recency,none)",
       "bad retriever spec \"rerank(bm25,4,recency,none)\": its fourth part \"none\" is not fuse=S:W (two numbers)" +
           kRerankExpected},
      {"rerank(bm25,4,recency,fuse=1)",
       "bad retriever spec \"rerank(bm25,4,recency,fuse=1)\": its fourth part \"fuse=1\" is not fuse=S:W (two numbers)" +
           kRerankExpected},
      {"rerank(bm25,4,recency,fuse=1:x)",
       "bad retriever spec \"rerank(bm25,4,recency,fuse=1:x)\": its fourth part \"fuse=1:x\" is not fuse=S:W (two numbers)" +
           kRerankExpected},
      {"rerank(bm25,4,recency,fuse=0:1)",
       "retriever spec \"rerank(bm25,4,recency,fuse=0:1)\": fuse=S:W needs S a positive number and W a finite one (got "
       "0:1)"},
      {"rerank(bm25,4,recency,fuse=1:inf)",
       "retriever spec \"rerank(bm25,4,recency,fuse=1:inf)\": fuse=S:W needs S a positive number and W a finite one (got "
       "1:inf)"},
      {"rerank(bm25,4,recency,fuse=1:2,none)",
       "bad retriever spec \"rerank(bm25,4,recency,fuse=1:2,none)\": it has 5 parts, not 3" + kRerankExpected},
      {"rerank(bm25,0,recency)",
       "bad retriever spec \"rerank(bm25,0,recency)\": L = \"0\" is not a positive whole number" + kRerankExpected},
      {"rerank(bm25,x,recency)",
       "bad retriever spec \"rerank(bm25,x,recency)\": L = \"x\" is not a positive whole number" + kRerankExpected},
      {"rerank(bm25,-2,recency)",
       "bad retriever spec \"rerank(bm25,-2,recency)\": L = \"-2\" is not a positive whole number" + kRerankExpected},
      {"rerank(bm25,4x,recency)",
       "bad retriever spec \"rerank(bm25,4x,recency)\": L = \"4x\" is not a positive whole number" + kRerankExpected},
      {"rerank(,4,recency)",
       "bad retriever spec \"rerank(,4,recency)\": empty retriever spec in \",4,recency\"" + kRerankExpected},
      {"rerank(bm25,4,rrf(recency)",
       "bad retriever spec \"rerank(bm25,4,rrf(recency)\": unbalanced '(' in retriever specs \"bm25,4,rrf(recency\"" +
           kRerankExpected},
      {"rerank(bm25,4,nope)", "unknown retriever spec \"nope" + kExpected},
  };
  for (const auto& row : table) EXPECT_EQ(parse_error(row.spec), row.message) << row.spec;
}

TEST(Spec, MakeRetrieverAsksTheRegistry) {
  // This binary never registers dense, cross or nokind (test_registry.cpp relies on it).
  const struct {
    const char* spec;
    std::string message;
  } table[] = {
      {"dense:/x", "retriever spec \"dense:/x\": dense retrievers are not available here (this program did not register "
                   "the neural retrievers)"},
      {"rrf(bm25,cross:/x)", "retriever spec \"cross:/x\": cross retrievers are not available here (this program did "
                             "not register the neural retrievers)"},
      {"nokind:abc", "unknown retriever spec \"nokind:abc" + kExpected},
  };
  for (const auto& row : table) EXPECT_EQ(make_error(parse_retriever_spec(row.spec)), row.message) << row.spec;
  // The tree builds what the string builds.
  for (const char* spec : {"none", "random", "recency", " bm25 ", "rrf(bm25, rrf(recency,random))",
                           "rerank(recency,2,bm25)", "rerank(rrf(bm25,recency),3,rerank(random,2,bm25))"}) {
    EXPECT_EQ(make_retriever(parse_retriever_spec(spec), 1)->name(), make_retriever(std::string_view(spec), 1)->name())
        << spec;
    EXPECT_EQ(make_retriever(parse_retriever_spec(spec), 1)->name(), to_string(parse_retriever_spec(spec))) << spec;
  }
}

class TrainedFolders : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::remove_all(dir_);
    for (const char* sub : {"ropg", "pearl", "selector", "plain"}) std::filesystem::create_directories(dir_ / sub);
    std::ofstream(dir_ / "ropg" / "attune_model.json") << R"({"kind": "dense", "method": "ropg-kd"})";
    std::ofstream(dir_ / "pearl" / "attune_model.json")
        << R"j({"kind": "cross", "method": "pearl", "rerank": {"initial": "rrf(bm25, )j" + ropg() +
               R"j()", "top_l": 16}})j";
    std::filesystem::create_directories(dir_ / "fused");
    std::ofstream(dir_ / "fused" / "attune_model.json")
        << R"j({"kind": "dense", "method": "ropg-kd", "rerank": {"initial": "bm25", "top_l": 16, "fusion": {"reranker_scale": 20, "initial_weight": 0.75}}})j";
    std::filesystem::create_directories(dir_ / "badfused");
    std::ofstream(dir_ / "badfused" / "attune_model.json")
        << R"j({"kind": "dense", "rerank": {"initial": "bm25", "top_l": 16, "fusion": {"reranker_scale": -1, "initial_weight": 0.75}}})j";
    std::ofstream(dir_ / "selector" / "attune_model.json") << R"({"kind": "selector", "method": "rspg-post"})";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* sub) const { return (dir_ / sub).string(); }
  std::string ropg() const { return path("ropg"); }

  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("attune_spec_" + std::to_string(::getpid()));
};

TEST_F(TrainedFolders, AFolderParsesIntoWhatItExpandsToAndRemembersItself) {
  const auto s = parse_retriever_spec(" " + ropg() + " ");
  EXPECT_EQ(s.kind, Kind::Registered);
  EXPECT_EQ(s.prefix, "dense");
  EXPECT_EQ(s.arg, ropg());
  EXPECT_EQ(s.folder, ropg());
  EXPECT_EQ(to_string(s), ropg());  // the folder, as written: rows keep the user's names
  EXPECT_EQ(parse_retriever_spec(to_string(s)), s);
  EXPECT_EQ(trained_model_kind(s), "dense");
  EXPECT_EQ(dense_dirs(s), std::vector<std::string>{ropg()});
  EXPECT_EQ(expand_spec(ropg()), "dense:" + ropg());
  // Inside rrf(...), too.
  const auto fused = parse_retriever_spec("rrf(bm25," + ropg() + ")");
  EXPECT_EQ(to_string(fused), "rrf(bm25," + ropg() + ")");
  EXPECT_EQ(dense_dirs(fused), std::vector<std::string>{ropg()});
  EXPECT_EQ(trained_model_kind(fused), "");
}

TEST_F(TrainedFolders, APearlFolderIsARerankOfItsFirstStage) {
  const std::string pearl = path("pearl");
  const auto s = parse_retriever_spec(pearl);
  ASSERT_EQ(s.kind, Kind::Rerank);
  EXPECT_EQ(s.folder, pearl);
  EXPECT_EQ(s.depth, 16u);
  EXPECT_EQ(to_string(s), pearl);
  EXPECT_EQ(parse_retriever_spec(to_string(s)), s);
  EXPECT_EQ(trained_model_kind(s), "cross");
  EXPECT_EQ(s.children[1].prefix, "cross");
  EXPECT_EQ(s.children[1].arg, pearl);
  EXPECT_TRUE(s.children[1].folder.empty());
  EXPECT_EQ(to_string(first_stage(s)), "rrf(bm25," + ropg() + ")");
  EXPECT_EQ(dense_dirs(first_stage(s)), std::vector<std::string>{ropg()});
  EXPECT_TRUE(dense_dirs(s).empty());
  // The string forms: expanded canonically; rerank_initial reads the text, so expand first.
  EXPECT_EQ(expand_spec(pearl), "rerank(rrf(bm25," + ropg() + "),16,cross:" + pearl + ")");
  EXPECT_EQ(rerank_initial(pearl), "");
  EXPECT_EQ(rerank_initial(expand_spec(pearl)), "rrf(bm25," + ropg() + ")");
  EXPECT_EQ(trained_model_kind(pearl), "cross");
}

TEST_F(TrainedFolders, ARopgFolderWithALearnedPriorIsAFusedRerank) {
  const std::string f = path("fused");
  const auto s = parse_retriever_spec(f);
  ASSERT_EQ(s.kind, Kind::Rerank);
  ASSERT_TRUE(s.fusion.has_value());
  EXPECT_EQ(s.fusion->reranker_scale, 20);
  EXPECT_EQ(s.fusion->initial_weight, 0.75);
  EXPECT_EQ(expand_spec(f), "rerank(bm25,16,dense:" + f + ",fuse=20:0.75)");
  EXPECT_EQ(parse_retriever_spec(expand_spec(f)).fusion, s.fusion);
  EXPECT_THROW(parse_retriever_spec(path("badfused")), Error);
}

TEST_F(TrainedFolders, ASelectorFolderParsesButBuildsNoRetriever) {
  const std::string sel = path("selector");
  const auto s = parse_retriever_spec(sel);
  EXPECT_EQ(trained_model_kind(s), "selector");
  EXPECT_EQ(make_error(s), "unknown retriever spec \"selector:" + sel + kExpected);
}

TEST_F(TrainedFolders, AFolderWithoutAMarkerIsRefusedSayingWhatToWrite) {
  const std::string plain = path("plain");
  EXPECT_EQ(parse_error(plain), "retriever spec \"" + plain +
                                    "\" is a folder but not a model trained by attune (no attune_model.json); for a "
                                    "Hugging Face encoder write dense:" +
                                    plain + " or cross:" + plain);
  EXPECT_EQ(parse_error("rrf(bm25," + plain + ")"), parse_error(plain));
}

}  // namespace
}  // namespace attune::retrieval
