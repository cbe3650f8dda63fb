#include "llmc/runtime/engine/engine_loop.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace llmc {
namespace {

RequestOutput Failed(RequestId id, absl::Status status) {
  RequestOutput out;
  out.id = id;
  out.finished = true;
  out.reason = FinishReason::kError;
  out.status = std::move(status);
  return out;
}

}  // namespace

void OutputStream::Push(RequestOutput out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = out.finished;
    queue_.push_back(std::move(out));
  }
  cv_.notify_all();
  if (on_output_) on_output_();
}

std::optional<RequestOutput> OutputStream::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || drained_; });
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  if (out.finished) drained_ = true;
  return out;
}

std::optional<RequestOutput> OutputStream::TryNext() {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  if (out.finished) drained_ = true;
  return out;
}

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  stats_ = engine_->stats();
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() {
  Shutdown();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<OutputStream> EngineLoop::Submit(std::vector<int32_t> prompt,
                                                 const SamplingParams& params,
                                                 std::function<void()> on_output) {
  return Queue({nullptr, std::move(prompt), params, std::nullopt}, std::move(on_output));
}

std::shared_ptr<OutputStream> EngineLoop::SubmitScore(std::vector<int32_t> tokens,
                                                      const ScoreOptions& score,
                                                      std::function<void()> on_output) {
  return Queue({nullptr, std::move(tokens), SamplingParams{}, score}, std::move(on_output));
}

std::shared_ptr<OutputStream> EngineLoop::Queue(Submission s, std::function<void()> on_output) {
  std::unique_lock<std::mutex> lock(mu_);
  auto stream =
      std::shared_ptr<OutputStream>(new OutputStream(next_key_++, std::move(on_output)));
  if (stopping_) {
    lock.unlock();
    stream->Push(Failed(0, absl::UnavailableError("the engine is shutting down")));
    return stream;
  }
  s.stream = stream;
  submissions_.push_back(std::move(s));
  lock.unlock();
  cv_.notify_all();
  return stream;
}

void EngineLoop::Abort(const OutputStream& stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(stream.key());
  }
  cv_.notify_all();
}

void EngineLoop::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

EngineStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

int64_t EngineLoop::num_waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(submissions_.size()) + stats_.scheduler.num_waiting;
}

void EngineLoop::Apply(std::vector<Submission>& subs, const std::vector<uint64_t>& aborts) {
  for (Submission& s : subs) {
    absl::StatusOr<RequestId> id = s.score ? engine_->AddScoreRequest(std::move(s.prompt), *s.score)
                                           : engine_->AddRequest(std::move(s.prompt), s.params);
    if (!id.ok()) {
      s.stream->Push(Failed(0, id.status()));
      continue;
    }
    by_id_[*id] = s.stream;
    id_of_key_[s.stream->key()] = *id;
  }
  for (uint64_t key : aborts) {
    auto it = id_of_key_.find(key);
    if (it != id_of_key_.end()) (void)engine_->Abort(it->second);  // finished: nothing to do
  }
}

void EngineLoop::Deliver(std::vector<RequestOutput>& outputs) {
  for (RequestOutput& out : outputs) {
    auto it = by_id_.find(out.id);
    if (it == by_id_.end()) continue;
    const bool finished = out.finished;
    std::shared_ptr<OutputStream> stream = it->second;
    if (finished) {
      id_of_key_.erase(stream->key());
      by_id_.erase(it);
    }
    stream->Push(std::move(out));
  }
}

void EngineLoop::FailAll(const absl::Status& status) {
  for (auto& [id, stream] : by_id_)
    stream->Push(
        Failed(id, absl::Status(status.code(), absl::StrFormat("request %d: the engine failed: %s",
                                                               id, status.message()))));
  by_id_.clear();
  id_of_key_.clear();
}

void EngineLoop::Run() {
  bool broken = false;
  for (;;) {
    std::vector<Submission> subs;
    std::vector<uint64_t> aborts;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || !submissions_.empty() || !aborts_.empty() ||
               (!broken && engine_->has_unfinished());
      });
      subs.swap(submissions_);
      aborts.swap(aborts_);
      stopping = stopping_;
    }
    if (broken) {
      // The engine cannot step any more: refuse, never hang.
      for (Submission& s : subs)
        s.stream->Push(Failed(0, absl::InternalError("the engine failed in an earlier step")));
      if (stopping) return;
      continue;
    }
    Apply(subs, aborts);
    if (!subs.empty()) {
      // Admitted requests count as waiting from now, not after the step.
      std::lock_guard<std::mutex> lock(mu_);
      stats_ = engine_->stats();
    }
    if (stopping)
      for (auto& [id, stream] : by_id_) (void)engine_->Abort(id);
    absl::StatusOr<std::vector<RequestOutput>> outputs = engine_->Step();
    {
      // Before the outputs go out: a reader that saw its request finish
      // finds it counted in stats().
      std::lock_guard<std::mutex> lock(mu_);
      stats_ = engine_->stats();
    }
    if (outputs.ok()) {
      Deliver(*outputs);
    } else {
      broken = true;
      FailAll(outputs.status());
    }
    if (stopping && (broken || !engine_->has_unfinished())) {
      // Submissions that raced with Shutdown were refused by Submit or are
      // here: fail them too.
      std::lock_guard<std::mutex> lock(mu_);
      for (Submission& s : submissions_)
        s.stream->Push(Failed(0, absl::UnavailableError("the engine is shutting down")));
      submissions_.clear();
      return;
    }
  }
}

}  // namespace llmc
