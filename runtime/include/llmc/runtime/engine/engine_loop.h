// The engine thread: one thread owns the Engine (its runner, KV cache and
// scheduler) and steps it while any request is live; other threads (a
// server's connections) submit and abort through a locked queue and read
// each request's outputs from its own stream. Nothing they do waits for a
// step, and the engine never waits for a reader: outputs queue up in the
// stream until taken.
//
// Every submitted request ends with exactly one finished output on its
// stream: done, aborted, refused at admission (kError with the engine's
// message), failed with its step, or aborted at shutdown.
#ifndef LLMC_RUNTIME_ENGINE_ENGINE_LOOP_H_
#define LLMC_RUNTIME_ENGINE_ENGINE_LOOP_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "llmc/runtime/engine/engine.h"

namespace llmc {

// One request's outputs, in order, for one reader.
class OutputStream {
 public:
  // Blocks until the next output; nullopt once the finished one was taken.
  std::optional<RequestOutput> Next();
  // As Next, without blocking: nullopt when nothing is queued.
  std::optional<RequestOutput> TryNext();
  uint64_t key() const { return key_; }

 private:
  friend class EngineLoop;
  OutputStream(uint64_t key, std::function<void()> on_output)
      : key_(key), on_output_(std::move(on_output)) {}
  void Push(RequestOutput out);

  const uint64_t key_;
  // Called after each Push, outside the lock, on the pushing thread (the
  // engine thread, or Submit's caller for a refusal): it must only schedule
  // work, never wait.
  const std::function<void()> on_output_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool closed_ = false;   // the finished output was pushed
  bool drained_ = false;  // ... and taken
};

class EngineLoop {
 public:
  // Starts the engine thread.
  explicit EngineLoop(std::unique_ptr<Engine> engine);
  // Shutdown(), then joins.
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues a request; thread-safe, returns at once. `on_output`, when set,
  // is called each time an output is queued on the stream (see
  // OutputStream::on_output_): an asynchronous reader's wake-up.
  std::shared_ptr<OutputStream> Submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                       std::function<void()> on_output = nullptr);
  // Queues a score request (Engine::AddScoreRequest), likewise.
  std::shared_ptr<OutputStream> SubmitScore(std::vector<int32_t> tokens, const ScoreOptions& score,
                                            std::function<void()> on_output = nullptr);
  // Aborts the request of `stream`; thread-safe; a no-op once it finished.
  void Abort(const OutputStream& stream);
  // Aborts every live request (each stream gets its finished output) and
  // stops the thread; later submissions are refused. Idempotent.
  void Shutdown();

  // The engine's counters after its latest step.
  EngineStats stats() const;
  // Requests submitted and not yet running: those the engine thread has not
  // taken yet plus the scheduler's waiting queue after the latest step (a
  // server's admission bound).
  int64_t num_waiting() const;
  const Tokenizer& tokenizer() const { return engine_->tokenizer(); }
  int32_t max_model_len() const { return engine_->max_model_len(); }

 private:
  struct Submission {
    std::shared_ptr<OutputStream> stream;
    std::vector<int32_t> prompt;
    SamplingParams params;
    std::optional<ScoreOptions> score;  // a score request of `prompt`
  };
  std::shared_ptr<OutputStream> Queue(Submission s, std::function<void()> on_output);
  void Run();
  // Engine thread: admits `subs`, applies `aborts`.
  void Apply(std::vector<Submission>& subs, const std::vector<uint64_t>& aborts);
  void Deliver(std::vector<RequestOutput>& outputs);
  void FailAll(const absl::Status& status);

  std::unique_ptr<Engine> engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Submission> submissions_;
  std::vector<uint64_t> aborts_;
  bool stopping_ = false;
  uint64_t next_key_ = 1;
  EngineStats stats_;
  // Engine thread only.
  std::unordered_map<RequestId, std::shared_ptr<OutputStream>> by_id_;
  std::unordered_map<uint64_t, RequestId> id_of_key_;
  std::thread thread_;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_ENGINE_ENGINE_LOOP_H_
