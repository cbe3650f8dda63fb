// The server's Prometheus metrics (prometheus-cpp's registry and text
// format), named as vLLM names its own so that dashboards built for vLLM read
// them: llmc:num_requests_running, llmc:kv_cache_usage_perc,
// llmc:time_to_first_token_seconds, ...
//
// Latencies are observed by the request handlers as their outputs reach the
// connection; the engine's counters (tokens, preemptions, prefix-cache
// hits) are read from EngineStats at each scrape. Thread-safe.
#ifndef LLMC_RUNTIME_SERVE_SERVER_METRICS_H_
#define LLMC_RUNTIME_SERVE_SERVER_METRICS_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "llmc/runtime/engine/engine.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace llmc::serve {

class ServerMetrics {
 public:
  explicit ServerMetrics(const std::string& model_name);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);
  void ObserveRequestLatency(double seconds);
  // A finished choice: finish_reason "stop", "length", "abort", "error".
  void CountFinished(const std::string& finish_reason);
  // An HTTP answer by status (429s and 4xx included).
  void CountHttpResponse(int status);

  // The text exposition of every metric; `stats` and `waiting` are the
  // engine's now.
  std::string Render(const EngineStats& stats, int64_t waiting, int64_t open_connections);

 private:
  std::mutex mu_;
  std::string model_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge *running_, *waiting_, *kv_usage_, *prefix_hit_rate_, *connections_;
  prometheus::Counter *prompt_tokens_, *generation_tokens_, *preemptions_, *prefix_queries_,
      *prefix_hits_;
  prometheus::Histogram *ttft_, *itl_, *e2e_;
  prometheus::Family<prometheus::Counter>* finished_;
  prometheus::Family<prometheus::Counter>* http_;
  EngineStats last_;  // counters already added
};

}  // namespace llmc::serve

#endif  // LLMC_RUNTIME_SERVE_SERVER_METRICS_H_
