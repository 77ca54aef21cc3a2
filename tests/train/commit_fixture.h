#pragma once
// A small commit_subject dataset for training tests: user i ("u<i>", example "q<i>") asks
// for the subject of "the <topics[i]> broke" (gold "fix <topics[i]>"), and their profile
// holds one commit per topic, "fix <topic>" / "the <topic> was wrong", id "u<i>-<topic>",
// dated 2020-01-01 onwards.
#include <string>
#include <vector>

#include "attune/data/dataset.h"

namespace attune::testing {

inline data::Dataset commit_subject_users(std::size_t users, const std::vector<std::string>& topics,
                                          const std::string& content_hash) {
  data::Dataset ds;
  ds.task = "commit_subject";
  ds.split = "train";
  ds.has_outputs = true;
  ds.content_hash = content_hash;
  for (std::size_t u = 0; u < users; ++u) {
    Example ex;
    ex.id = "q" + std::to_string(u);
    ex.user = "u" + std::to_string(u);
    ex.input = "Generate a subject line for the following commit description: the " + topics[u % topics.size()] + " broke";
    ex.output = "fix " + topics[u % topics.size()];
    for (std::size_t d = 0; d < topics.size(); ++d) {
      Document doc;
      doc.id = ex.user + "-" + topics[d];
      doc.owner = ex.user;
      doc.fields = {{"title", "fix " + topics[d]}, {"text", "the " + topics[d] + " was wrong"}};
      doc.date = "2020-01-" + std::string(d < 9 ? "0" : "") + std::to_string(d + 1);
      ex.profile.push_back(doc);
    }
    ds.examples.push_back(ex);
  }
  return ds;
}

}  // namespace attune::testing
