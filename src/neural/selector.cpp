#include "attune/neural/selector.h"

#include <nlohmann/json.hpp>

#include "attune/core/error.h"
#include "attune/core/file.h"

namespace attune::neural {

std::shared_ptr<const Selector> Selector::load(const std::filesystem::path& dir, const Device& device) {
  const auto file = dir / "selector.json";
  auto sel = std::make_shared<Selector>();
  std::size_t max_length = 0;
  try {
    const auto cfg = nlohmann::json::parse(read_file(file));
    sel->variant_ = cfg.at("variant").get<std::string>();
    sel->pool_ = cfg.at("pool").get<std::vector<std::string>>();
    sel->k_ = cfg.at("k").get<std::size_t>();
    sel->prompt_max_length_ = cfg.at("prompt_max_length").get<std::size_t>();
    max_length = cfg.at("max_length").get<std::size_t>();
    // Folders written before 2026-11-25 record no "input": they read the prompt alone.
    sel->input_ = models::parse_selector_input(cfg.value("input", std::string("prompt")));
  } catch (const UsageError& e) {
    throw Error(file.string() + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw Error(file.string() + ": " + e.what());
  }
  if (sel->variant_ != "rspg-pre" && sel->variant_ != "rspg-post")
    throw Error(file.string() + ": variant \"" + sel->variant_ + "\" (expected rspg-pre or rspg-post)");
  sel->model_ = models::SelectorModel::load(dir, device, sel->variant_ == "rspg-post", sel->input_, max_length);
  return sel;
}

}  // namespace attune::neural
