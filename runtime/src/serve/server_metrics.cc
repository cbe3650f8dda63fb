#include "llmc/runtime/serve/server_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

namespace llmc::serve {
namespace {

using prometheus::Histogram;

// vLLM's buckets for each latency, in seconds.
const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                                  0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                                  20.0,  40.0,  80.0, 160.0};
const Histogram::BucketBoundaries kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                 0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                 7.5,  10.0,  20.0, 40.0,  80.0};
const Histogram::BucketBoundaries kE2eBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,
                                                 5.0,  10.0, 15.0, 20.0, 30.0,  40.0,  50.0,
                                                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0};

}  // namespace

ServerMetrics::ServerMetrics(const std::string& model_name)
    : model_(model_name), registry_(std::make_shared<prometheus::Registry>()) {
  const prometheus::Labels labels = {{"model_name", model_}};
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_).Add(labels);
  };
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_).Add(labels);
  };
  auto histogram = [&](const char* name, const char* help, const Histogram::BucketBoundaries& b) {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_).Add(labels, b);
  };
  running_ = gauge("llmc:num_requests_running", "Requests in the running batch.");
  waiting_ = gauge("llmc:num_requests_waiting", "Requests waiting to run (queued or preempted).");
  kv_usage_ = gauge("llmc:kv_cache_usage_perc", "Fraction of KV-cache blocks in use (0 to 1).");
  prefix_hit_rate_ = gauge("llmc:prefix_cache_hit_rate",
                           "Prompt tokens found in the prefix cache over prompt tokens looked up.");
  connections_ = gauge("llmc:http_connections", "Open HTTP connections.");
  prompt_tokens_ = counter("llmc:prompt_tokens_total", "Prompt tokens of admitted requests.");
  generation_tokens_ = counter("llmc:generation_tokens_total", "Tokens generated.");
  preemptions_ = counter("llmc:num_preemptions_total", "Requests preempted (recomputed later).");
  prefix_queries_ = counter("llmc:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.");
  prefix_hits_ = counter("llmc:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.");
  ttft_ = histogram("llmc:time_to_first_token_seconds", "Time from request arrival to its first token.",
                    kTtftBuckets);
  itl_ = histogram("llmc:inter_token_latency_seconds", "Time between a request's successive tokens.",
                   kItlBuckets);
  e2e_ = histogram("llmc:e2e_request_latency_seconds", "Time from request arrival to its last token.",
                   kE2eBuckets);
  finished_ = &prometheus::BuildCounter()
                   .Name("llmc:request_success_total")
                   .Help("Finished choices by finish reason.")
                   .Register(*registry_);
  http_ = &prometheus::BuildCounter()
               .Name("llmc:http_responses_total")
               .Help("HTTP responses by status code.")
               .Register(*registry_);
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::ObserveTimeToFirstToken(double seconds) { ttft_->Observe(seconds); }
void ServerMetrics::ObserveInterTokenLatency(double seconds) { itl_->Observe(seconds); }
void ServerMetrics::ObserveRequestLatency(double seconds) { e2e_->Observe(seconds); }

void ServerMetrics::CountFinished(const std::string& finish_reason) {
  std::lock_guard<std::mutex> lock(mu_);  // Family::Add is thread-safe; the lock keeps it cheap to reason about
  finished_->Add({{"model_name", model_}, {"finished_reason", finish_reason}}).Increment();
}

void ServerMetrics::CountHttpResponse(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  http_->Add({{"model_name", model_}, {"status", std::to_string(status)}}).Increment();
}

std::string ServerMetrics::Render(const EngineStats& s, int64_t waiting, int64_t open_connections) {
  std::lock_guard<std::mutex> lock(mu_);
  running_->Set(s.scheduler.num_running);
  waiting_->Set(double(waiting));
  kv_usage_->Set(s.kv.usage);
  connections_->Set(double(open_connections));
  prefix_hit_rate_->Set(s.kv.prefix_cache_queries > 0
                            ? double(s.kv.prefix_cache_hits) / double(s.kv.prefix_cache_queries)
                            : 0.0);
  // Counters only go up: add what the engine counted since the last scrape.
  auto add = [](prometheus::Counter* c, int64_t now, int64_t before) {
    if (now > before) c->Increment(double(now - before));
  };
  add(prompt_tokens_, s.scheduler.prompt_tokens, last_.scheduler.prompt_tokens);
  add(generation_tokens_, s.output_tokens, last_.output_tokens);
  add(preemptions_, s.scheduler.num_preemptions, last_.scheduler.num_preemptions);
  add(prefix_queries_, s.kv.prefix_cache_queries, last_.kv.prefix_cache_queries);
  add(prefix_hits_, s.kv.prefix_cache_hits, last_.kv.prefix_cache_hits);
  last_ = s;
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace llmc::serve
