// The engine thread with clients on other threads: submissions and aborts
// from several threads at once, each stream read on its own thread; every
// request ends with exactly one finished output, shutdown included.
#include "llmc/runtime/engine/engine_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "runtime/engine/fake_model.h"

namespace llmc {
namespace {

std::unique_ptr<EngineLoop> MakeLoop(int64_t num_blocks = 256) {
  testing::FakeModelOptions m;
  m.num_blocks = num_blocks;
  EngineOptions o;
  o.max_seqs = 8;
  o.check_invariants = true;
  auto engine = Engine::Create(testing::FakeModel(m), o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::make_unique<EngineLoop>(*std::move(engine));
}

// Reads `stream` to its end: the number of finished outputs (must be 1),
// the tokens, the last output.
struct Drained {
  int finished = 0;
  int tokens = 0;
  RequestOutput last;
};

Drained Drain(OutputStream& stream) {
  Drained d;
  while (auto out = stream.Next()) {
    d.tokens += int(out->tokens.size());
    d.finished += out->finished;
    d.last = *out;
  }
  return d;
}

TEST(EngineLoopTest, ManyClientsEveryRequestEndsOnce) {
  auto loop = MakeLoop();
  std::atomic<int> finished{0}, aborted{0}, tokens{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      std::vector<std::shared_ptr<OutputStream>> streams;
      for (int i = 0; i < 8; ++i) {
        SamplingParams p;
        p.temperature = 0;
        p.max_tokens = 5 + i;
        p.ignore_eos = true;
        streams.push_back(loop->Submit({2, int32_t(3 + c), int32_t(4 + i)}, p));
      }
      loop->Abort(*streams[3]);  // maybe before admission, maybe after
      for (auto& s : streams) {
        Drained d = Drain(*s);
        EXPECT_EQ(d.finished, 1);
        finished += d.finished;
        tokens += d.tokens;
        if (d.last.reason == FinishReason::kAbort)
          ++aborted;
        else
          EXPECT_EQ(d.last.reason, FinishReason::kLength);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(finished.load(), 32);
  EXPECT_LE(aborted.load(), 4);
  EXPECT_GT(tokens.load(), 0);
  const EngineStats s = loop->stats();
  EXPECT_EQ(s.requests_added, 32);
  EXPECT_EQ(s.requests_finished, 32);
}

TEST(EngineLoopTest, RefusedRequestGetsAFinishedErrorOutput) {
  auto loop = MakeLoop(/*num_blocks=*/4);  // 16 slots
  SamplingParams p;
  p.max_tokens = 100;
  auto stream = loop->Submit({2, 3, 4}, p);
  Drained d = Drain(*stream);
  EXPECT_EQ(d.finished, 1);
  EXPECT_EQ(d.last.reason, FinishReason::kError);
  EXPECT_EQ(d.last.status.code(), absl::StatusCode::kResourceExhausted) << d.last.status;
}

TEST(EngineLoopTest, ShutdownAbortsWhatIsLeftAndRefusesNewWork) {
  auto loop = MakeLoop();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = -1;  // runs to the context: only the shutdown ends it
  p.ignore_eos = true;
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (int i = 0; i < 6; ++i) streams.push_back(loop->Submit({2, int32_t(3 + i)}, p));
  // Let it run a little.
  while (loop->stats().output_tokens < 6) std::this_thread::yield();
  loop->Shutdown();
  for (auto& s : streams) {
    Drained d = Drain(*s);
    EXPECT_EQ(d.finished, 1);
    EXPECT_TRUE(d.last.reason == FinishReason::kAbort || d.last.reason == FinishReason::kLength);
  }
  Drained late = Drain(*loop->Submit({2, 3}, p));
  EXPECT_EQ(late.finished, 1);
  EXPECT_EQ(late.last.status.code(), absl::StatusCode::kUnavailable);
}

// An asynchronous reader (the HTTP server) is woken once per queued output
// and never has to block: after the last wake-up, TryNext finds everything.
TEST(EngineLoopTest, WakeUpCallbackRunsOncePerOutput) {
  auto loop = MakeLoop();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 5;
  p.ignore_eos = true;
  std::atomic<int> wakes{0};
  auto stream = loop->Submit({2, 3, 4}, p, [&wakes] { ++wakes; });
  int outputs = 0, finished = 0, tokens = 0;
  while (finished == 0) {
    while (auto out = stream->TryNext()) {
      ++outputs;
      finished += out->finished;
      tokens += int(out->tokens.size());
    }
    std::this_thread::yield();
  }
  EXPECT_EQ(tokens, 5);
  // The wake-up follows its push: the last one may still be on its way.
  for (int spin = 0; spin < 100000 && wakes.load() < outputs; ++spin) std::this_thread::yield();
  EXPECT_EQ(wakes.load(), outputs);
  EXPECT_FALSE(stream->TryNext().has_value());
  // A refused submission wakes its reader too (from Submit's own thread).
  loop->Shutdown();
  std::atomic<int> refused_wakes{0};
  auto refused = loop->Submit({2, 3}, p, [&refused_wakes] { ++refused_wakes; });
  EXPECT_EQ(refused_wakes.load(), 1);
  auto out = refused->TryNext();
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace llmc
