// attune user-feedback: a batch file of conversations curated into a tenant's shared corpus,
// its users' personal documents, or nowhere (paper 004 §2.3), as POST
// /v1/conversations/{id}/feedback does one at a time (serve/service.h).
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/strings.h"
#include "attune/serve/service.h"
#include "common.h"

namespace attune::cli {

void add_user_feedback(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "user-feedback",
      "curate a JSONL file of conversations into a tenant's shared corpus, its users' personal documents, or nowhere "
      "(paper 004's user feedback; the batch form of POST /v1/conversations/{id}/feedback)");
  cmd->footer(
      "Each line: {\"id\", \"user\", \"messages\": [{\"role\", \"content\"}]} or {\"id\", \"user\", \"conversation\": "
      "TEXT}, and optionally \"label\" (what the line is known to be, e.g. correct-shared, correct-personal, incorrect: "
      "a table then counts where each label ended). The store's tenant is changed directly: a running `attune serve` on "
      "the same store sees the new documents after a restart.");
  auto r = std::make_shared<RunOptions>();
  struct Opts {
    std::string tenant, input, out, llm;
    std::size_t evidence_k = 3, retries = 2;
    std::string config;
  };
  auto o = std::make_shared<Opts>();
  r->add(*cmd);
  cmd->add_option("--tenant", o->tenant, "the tenant (attune tenant add NAME)")->required();
  cmd->add_option("--input", o->input, "the JSONL file of conversations")->required();
  cmd->add_option("--llm", o->llm, "the model that curates: openai:URL#MODEL, local:DIR, or planted:curator for checks")
      ->required();
  cmd->add_option("--out", o->out, "one JSON line per conversation: id, user, filing, document_id, summary (- = stdout)");
  cmd->add_option("--serve-config", o->config, "the deployment's serve config (its retriever and limits; default: bm25)");
  cmd->add_option("--evidence-k", o->evidence_k, "shared-corpus documents each verdict reads")->capture_default_str();
  cmd->add_option("--retries", o->retries, "more asks after a malformed verdict (then: filed nowhere)")->capture_default_str();
  cmd->callback([=, &rc] {
    if (o->llm == "reference") throw UsageError("--llm reference cannot judge feedback; name a model that follows instructions");
    serve::ServeConfig cfg = o->config.empty() ? serve::ServeConfig{} : serve::read_config(o->config);
    cfg.user_feedback.llm = o->llm;
    cfg.user_feedback.evidence_k = o->evidence_k;
    cfg.user_feedback.retries = o->retries;
    cfg.learn.on = false;
    // Every line is read and checked before anything is filed.
    struct Line {
      std::string id, user, conversation, label;
    };
    std::vector<Line> lines;
    std::ifstream in(o->input, std::ios::binary);
    if (!in) throw InputError(o->input, "", "", "cannot be read");
    std::string text;
    std::size_t n = 0;
    while (std::getline(in, text)) {
      ++n;
      if (strip(text).empty()) continue;
      const std::string rec = "line " + std::to_string(n);
      const auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.is_object()) throw InputError(o->input, rec, "", "not a JSON object");
      const auto str = [&](const char* k, bool required) -> std::string {
        if (!j.contains(k)) {
          if (required) throw InputError(o->input, rec, k, "is required");
          return "";
        }
        if (!j[k].is_string() || j[k].get<std::string>().empty()) throw InputError(o->input, rec, k, "must be a non-empty string");
        return j[k].get<std::string>();
      };
      Line l{str("id", true), str("user", true), "", str("label", false)};
      if (j.contains("messages")) {
        if (!j["messages"].is_array() || j["messages"].empty()) throw InputError(o->input, rec, "messages", "must be a non-empty array");
        for (const auto& m : j["messages"]) {
          if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") || !m["content"].is_string())
            throw InputError(o->input, rec, "messages", "each message is {\"role\", \"content\"}");
          l.conversation += m["role"].get<std::string>() + ": " + m["content"].get<std::string>() + "\n";
        }
      } else {
        l.conversation = str("conversation", true);
      }
      lines.push_back(std::move(l));
    }
    if (lines.empty()) throw InputError(o->input, "", "", "holds no conversation");
    auto st = store::open_store(r->store_file());
    const auto tenant = st->tenant_find(o->tenant);
    if (!tenant) throw UsageError("--tenant " + o->tenant + ": no such tenant in " + r->store_file() + " (attune tenant add NAME)");
    serve::Service service(*st, cfg);
    service.set_curator(engine::make_llm(o->llm, engine::DataSpec{}, nullptr, r->models()));
    std::string out;
    std::map<std::string, std::map<std::string, std::size_t>> table;  // label -> filing -> count
    std::map<std::string, std::size_t> filings;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const auto& l = lines[i];
      const auto res = service.conversation_feedback(*tenant, l.user, l.id, l.conversation);
      ++filings[res.filing];
      if (!l.label.empty()) ++table[l.label][res.filing];
      nlohmann::json j = {{"id", l.id}, {"user", l.user}, {"filing", res.filing}, {"document_id", res.document_id},
                          {"summary", res.summary}, {"evidence", res.evidence}};
      if (!l.label.empty()) j["label"] = l.label;
      out += j.dump() + "\n";
      if (!r->quiet && (i + 1) % 50 == 0) std::fprintf(stderr, "user-feedback: %zu of %zu curated\n", i + 1, lines.size());
    }
    if (!o->out.empty()) write_output(o->out, out);
    std::printf("user-feedback: %zu conversations for tenant %s:", lines.size(), o->tenant.c_str());
    for (const auto& [f, c] : filings) std::printf(" %s %zu", f.c_str(), c);
    std::printf("\n");
    if (!table.empty()) {
      const std::vector<std::string> cols = {"shared", "personal", "rejected", "no_information", "failed"};
      std::printf("%-20s", "label \\ filed");
      for (const auto& c : cols) std::printf(" %15s", c.c_str());
      std::printf("\n");
      for (const auto& [label, row] : table) {
        std::printf("%-20s", label.c_str());
        for (const auto& c : cols) std::printf(" %15zu", row.count(c) ? row.at(c) : 0);
        std::printf("\n");
      }
    }
    rc = 0;
  });
}

}  // namespace attune::cli
