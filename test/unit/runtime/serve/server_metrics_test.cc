#include "llmc/runtime/serve/server_metrics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

namespace llmc::serve {
namespace {

// The value of the sample line `name{labels} value` (labels as written by
// the text format, e.g. `model_name="m"`), or nullopt when there is none.
std::optional<double> Sample(const std::string& text, const std::string& name,
                             const std::string& labels) {
  const std::string prefix = name + "{" + labels + "} ";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return std::strtod(line.c_str() + prefix.size(), nullptr);
  }
  return std::nullopt;
}

constexpr char kModel[] = R"(model_name="tiny")";

EngineStats Stats(int64_t prompt, int64_t output, int64_t preemptions, int64_t queries,
                  int64_t hits) {
  EngineStats s;
  s.scheduler.num_running = 3;
  s.scheduler.prompt_tokens = prompt;
  s.scheduler.num_preemptions = preemptions;
  s.output_tokens = output;
  s.kv.usage = 0.25;
  s.kv.prefix_cache_queries = queries;
  s.kv.prefix_cache_hits = hits;
  return s;
}

TEST(ServerMetrics, RendersEveryMetricWithTheEnginesValues) {
  ServerMetrics m("tiny");
  const std::string text = m.Render(Stats(100, 40, 2, 80, 20), /*waiting=*/5,
                                    /*open_connections=*/7);
  for (const char* name :
       {"llmc:num_requests_running", "llmc:num_requests_waiting", "llmc:kv_cache_usage_perc",
        "llmc:prefix_cache_hit_rate", "llmc:http_connections", "llmc:prompt_tokens_total",
        "llmc:generation_tokens_total", "llmc:num_preemptions_total",
        "llmc:prefix_cache_queries_total", "llmc:prefix_cache_hits_total",
        "llmc:time_to_first_token_seconds_bucket", "llmc:time_to_first_token_seconds_count",
        "llmc:inter_token_latency_seconds_bucket", "llmc:e2e_request_latency_seconds_sum"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name << " missing from\n" << text;
  }
  EXPECT_NE(text.find("# TYPE llmc:time_to_first_token_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("# TYPE llmc:prompt_tokens_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE llmc:num_requests_running gauge"), std::string::npos);
  EXPECT_EQ(Sample(text, "llmc:num_requests_running", kModel), 3);
  EXPECT_EQ(Sample(text, "llmc:num_requests_waiting", kModel), 5);
  EXPECT_EQ(Sample(text, "llmc:http_connections", kModel), 7);
  EXPECT_EQ(Sample(text, "llmc:kv_cache_usage_perc", kModel), 0.25);
  EXPECT_EQ(Sample(text, "llmc:prefix_cache_hit_rate", kModel), 0.25);
  EXPECT_EQ(Sample(text, "llmc:prompt_tokens_total", kModel), 100);
  EXPECT_EQ(Sample(text, "llmc:generation_tokens_total", kModel), 40);
  EXPECT_EQ(Sample(text, "llmc:num_preemptions_total", kModel), 2);
  EXPECT_EQ(Sample(text, "llmc:prefix_cache_queries_total", kModel), 80);
  EXPECT_EQ(Sample(text, "llmc:prefix_cache_hits_total", kModel), 20);
  EXPECT_EQ(Sample(text, "llmc:time_to_first_token_seconds_count", kModel), 0);
}

TEST(ServerMetrics, NoPrefixQueriesIsAZeroHitRate) {
  ServerMetrics m("tiny");
  const std::string text = m.Render(EngineStats{}, 0, 0);
  EXPECT_EQ(Sample(text, "llmc:prefix_cache_hit_rate", kModel), 0);
  EXPECT_EQ(Sample(text, "llmc:prompt_tokens_total", kModel), 0);
}

TEST(ServerMetrics, CountersFollowTheEngineAcrossRenders) {
  ServerMetrics m("tiny");
  m.Render(Stats(100, 40, 2, 80, 20), 0, 0);
  std::string text = m.Render(Stats(250, 90, 3, 200, 120), 0, 0);
  // Each counter equals the engine's latest value, not the sum of renders.
  EXPECT_EQ(Sample(text, "llmc:prompt_tokens_total", kModel), 250);
  EXPECT_EQ(Sample(text, "llmc:generation_tokens_total", kModel), 90);
  EXPECT_EQ(Sample(text, "llmc:num_preemptions_total", kModel), 3);
  EXPECT_EQ(Sample(text, "llmc:prefix_cache_queries_total", kModel), 200);
  EXPECT_EQ(Sample(text, "llmc:prefix_cache_hits_total", kModel), 120);
  EXPECT_EQ(Sample(text, "llmc:prefix_cache_hit_rate", kModel), 0.6);
  // The same stats again add nothing.
  text = m.Render(Stats(250, 90, 3, 200, 120), 0, 0);
  EXPECT_EQ(Sample(text, "llmc:prompt_tokens_total", kModel), 250);
  EXPECT_EQ(Sample(text, "llmc:generation_tokens_total", kModel), 90);
}

TEST(ServerMetrics, CountersNeverGoDown) {
  ServerMetrics m("tiny");
  m.Render(Stats(100, 40, 2, 80, 20), 0, 0);
  // Smaller engine counters (a new engine) leave the counters where they were.
  std::string text = m.Render(Stats(10, 4, 0, 8, 2), 0, 0);
  EXPECT_EQ(Sample(text, "llmc:prompt_tokens_total", kModel), 100);
  EXPECT_EQ(Sample(text, "llmc:generation_tokens_total", kModel), 40);
  EXPECT_EQ(Sample(text, "llmc:num_preemptions_total", kModel), 2);
  // Gauges follow the engine both ways.
  EXPECT_EQ(Sample(text, "llmc:prefix_cache_hit_rate", kModel), 0.25);
}

TEST(ServerMetrics, HistogramsCountObservations) {
  ServerMetrics m("tiny");
  m.ObserveTimeToFirstToken(0.003);
  m.ObserveTimeToFirstToken(0.3);
  m.ObserveTimeToFirstToken(1000);  // beyond the last bucket: +Inf only
  m.ObserveInterTokenLatency(0.02);
  m.ObserveRequestLatency(1.2);
  m.ObserveRequestLatency(3);
  const std::string text = m.Render(EngineStats{}, 0, 0);
  EXPECT_EQ(Sample(text, "llmc:time_to_first_token_seconds_count", kModel), 3);
  EXPECT_DOUBLE_EQ(*Sample(text, "llmc:time_to_first_token_seconds_sum", kModel), 1000.303);
  EXPECT_EQ(Sample(text, "llmc:time_to_first_token_seconds_bucket",
                   std::string(kModel) + R"(,le="0.001")"),
            0);
  EXPECT_EQ(Sample(text, "llmc:time_to_first_token_seconds_bucket",
                   std::string(kModel) + R"(,le="0.005")"),
            1);
  EXPECT_EQ(Sample(text, "llmc:time_to_first_token_seconds_bucket",
                   std::string(kModel) + R"(,le="0.5")"),
            2);
  EXPECT_EQ(Sample(text, "llmc:time_to_first_token_seconds_bucket",
                   std::string(kModel) + R"(,le="+Inf")"),
            3);
  EXPECT_EQ(Sample(text, "llmc:inter_token_latency_seconds_count", kModel), 1);
  EXPECT_EQ(Sample(text, "llmc:e2e_request_latency_seconds_count", kModel), 2);
}

TEST(ServerMetrics, FinishReasonsAndHttpStatuses) {
  ServerMetrics m("tiny");
  m.CountFinished("stop");
  m.CountFinished("stop");
  m.CountFinished("length");
  m.CountHttpResponse(200);
  m.CountHttpResponse(429);
  m.CountHttpResponse(429);
  const std::string text = m.Render(EngineStats{}, 0, 0);
  EXPECT_EQ(Sample(text, "llmc:request_success_total",
                   R"(finished_reason="stop",model_name="tiny")"),
            2);
  EXPECT_EQ(Sample(text, "llmc:request_success_total",
                   R"(finished_reason="length",model_name="tiny")"),
            1);
  EXPECT_EQ(Sample(text, "llmc:http_responses_total", R"(model_name="tiny",status="200")"), 1);
  EXPECT_EQ(Sample(text, "llmc:http_responses_total", R"(model_name="tiny",status="429")"), 2);
}

TEST(ServerMetrics, ModelNameIsEscaped) {
  ServerMetrics m("a\"b\\c");
  const std::string text = m.Render(Stats(1, 0, 0, 0, 0), 0, 0);
  EXPECT_EQ(Sample(text, "llmc:prompt_tokens_total", R"(model_name="a\"b\\c")"), 1) << text;
}

}  // namespace
}  // namespace llmc::serve
