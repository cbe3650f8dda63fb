#include "llmc/runtime/sample/stop_checker.h"

#include <algorithm>
#include <utility>

namespace llmc {
namespace {

// Bytes at the end of `text` that begin a UTF-8 sequence without finishing
// it (0 when the text ends on a character boundary or is not UTF-8 there).
size_t IncompleteUtf8Tail(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto byte = static_cast<unsigned char>(text[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    size_t need = 1;
    if ((byte & 0xE0) == 0xC0) {
      need = 2;
    } else if ((byte & 0xF0) == 0xE0) {
      need = 3;
    } else if ((byte & 0xF8) == 0xF0) {
      need = 4;
    }
    return back < need ? back : 0;
  }
  return 0;
}

}  // namespace

const char* ToString(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "?";
}

StopChecker::StopChecker(std::vector<std::string> stop) {
  for (std::string& s : stop) {
    if (!s.empty()) stop_.push_back(std::move(s));
  }
}

StopChecker::StopChecker(const SamplingParams& params, std::vector<int32_t> eos_token_ids)
    : StopChecker(params.stop) {
  eos_token_ids_ = std::move(eos_token_ids);
  max_tokens_ = params.max_tokens;
  ignore_eos_ = params.ignore_eos;
}

FinishReason StopChecker::AppendToken(int32_t token, std::string_view text) {
  if (finished()) return reason_;
  ++num_tokens_;
  if (!ignore_eos_ &&
      std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end()) {
    Finish(FinishReason::kEos);
    return reason_;
  }
  if (AppendText(text)) return reason_;
  if (max_tokens_ > 0 && num_tokens_ >= max_tokens_) Finish(FinishReason::kLength);
  return reason_;
}

bool StopChecker::AppendText(std::string_view piece) {
  if (finished()) return reason_ == FinishReason::kStop;
  const size_t old_size = text_.size();
  text_.append(piece);

  // A stop string completing now ends past old_size: every earlier
  // occurrence was looked for when its last byte arrived. Find the one that
  // ends first; among those, the one that starts first.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& s : stop_) {
    const size_t from = old_size >= s.size() ? old_size - s.size() + 1 : 0;
    const size_t pos = text_.find(s, from);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_start = pos;
      best_end = end;
      best = &s;
    }
  }
  if (best != nullptr) {
    matched_stop_ = *best;
    text_.resize(best_start);
    reason_ = FinishReason::kStop;
    ready_ = text_.size();
    return true;
  }

  // Hold back the longest tail that is a proper prefix of a stop string.
  // Such a tail starts at or after ready_ (a longer one would have been held
  // back before), which bounds the search.
  size_t hold = IncompleteUtf8Tail(text_);
  const std::string_view text = text_;
  const size_t open = text.size() - ready_;
  for (const std::string& s : stop_) {
    for (size_t k = std::min(s.size() - 1, open); k > hold; --k) {
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  ready_ = std::max(ready_, text.size() - hold);
  return false;
}

void StopChecker::Finish(FinishReason reason) {
  if (finished()) return;
  reason_ = reason;
  ready_ = text_.size();
}

std::string_view StopChecker::TakeReady() {
  std::string_view ready = std::string_view(text_).substr(emitted_, ready_ - emitted_);
  emitted_ = ready_;
  return ready;
}

}  // namespace llmc
