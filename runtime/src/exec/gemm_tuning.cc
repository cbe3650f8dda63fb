#include "llmc/runtime/exec/gemm_tuning.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace llmc {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

absl::Status Bad(const std::string& path, const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": ", why));
}

}  // namespace

std::string DefaultTuneFile(const std::string& artifact_dir) { return artifact_dir + "/tune.json"; }

std::string GemmTuningToJson(const GemmTuning& t) {
  ojson kernels = ojson::object();
  for (const auto& [name, entries] : t.kernels) {
    ojson list = ojson::array();
    for (const GemmTuneEntry& e : entries)
      list.push_back({{"max_rows", e.max_rows},
                      {"impl", e.cublaslt ? "cublaslt" : "llmc"},
                      {"llmc_us", e.llmc_us},
                      {"cublaslt_us", e.cublaslt_us}});
    kernels[name] = std::move(list);
  }
  ojson j = {{"source", t.source},
             {"device", t.device},
             {"cublaslt", t.cublaslt},
             {"kernels", std::move(kernels)}};
  return j.dump(2) + "\n";
}

absl::StatusOr<GemmTuning> ParseGemmTuning(std::string_view text, const std::string& path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(path, "(file)", "is not valid JSON");
  if (!j.is_object()) return Bad(path, "(file)", "must be an object");
  GemmTuning t;
  for (auto [key, out] : {std::pair{"device", &t.device}, std::pair{"cublaslt", &t.cublaslt}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Bad(path, key, "must be a string");
    *out = it->get<std::string>();
  }
  // Optional: files of `llmc tune` before predictions were measured ones.
  if (auto it = j.find("source"); it != j.end()) {
    if (!it->is_string() || (*it != "measured" && *it != "predicted"))
      return Bad(path, "source", "must be \"measured\" or \"predicted\"");
    t.source = it->get<std::string>();
  }
  auto kernels = j.find("kernels");
  if (kernels == j.end() || !kernels->is_object()) return Bad(path, "kernels", "must be an object");
  for (auto& [name, list] : kernels->items()) {
    std::string field = "kernels." + name;
    if (!list.is_array()) return Bad(path, field, "must be an array");
    std::vector<GemmTuneEntry>& entries = t.kernels[name];
    for (size_t i = 0; i < list.size(); ++i) {
      const json& e = list[i];
      std::string ef = absl::StrCat(field, "[", i, "]");
      if (!e.is_object()) return Bad(path, ef, "must be an object");
      auto rows = e.find("max_rows");
      auto impl = e.find("impl");
      if (rows == e.end() || !rows->is_number_integer() || rows->get<int64_t>() < 1)
        return Bad(path, ef + ".max_rows", "must be a positive integer");
      if (impl == e.end() || !impl->is_string() ||
          (impl->get<std::string>() != "llmc" && impl->get<std::string>() != "cublaslt"))
        return Bad(path, ef + ".impl", "must be \"llmc\" or \"cublaslt\"");
      GemmTuneEntry entry;
      entry.max_rows = rows->get<int64_t>();
      entry.cublaslt = impl->get<std::string>() == "cublaslt";
      for (auto [key, out] : {std::pair{"llmc_us", &entry.llmc_us},
                              std::pair{"cublaslt_us", &entry.cublaslt_us}}) {
        auto it = e.find(key);
        if (it != e.end() && it->is_number()) *out = it->get<double>();
      }
      if (!entries.empty() && entries.back().max_rows >= entry.max_rows)
        return Bad(path, ef + ".max_rows", "must ascend");
      entries.push_back(entry);
    }
  }
  return t;
}

bool TuningAppliesTo(const GemmTuning& tuning, std::string_view gpu_name) {
  if (tuning.source != "predicted") return tuning.device == gpu_name;
  std::string family = absl::AsciiStrToLower(tuning.device);
  family = family.substr(0, family.find('-'));
  return !family.empty() && absl::StrContains(absl::AsciiStrToLower(std::string(gpu_name)), family);
}

GemmPolicy PolicyFromTuning(const ManifestCuda& cuda, const GemmTuning& tuning) {
  GemmPolicy p;
  p.mode = GemmPolicy::Mode::kTuned;
  p.tuned.resize(cuda.kernels.size());
  for (size_t k = 0; k < cuda.kernels.size(); ++k) {
    auto it = tuning.kernels.find(cuda.kernels[k].name);
    if (it == tuning.kernels.end() || cuda.kernels[k].gemm.n == 0) continue;
    for (const GemmTuneEntry& e : it->second) p.tuned[k].push_back({e.max_rows, e.cublaslt});
  }
  return p;
}

}  // namespace llmc
