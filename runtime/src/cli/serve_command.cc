// `llmc serve ARTIFACT`: the OpenAI-compatible HTTP server (serve/api_server.h)
// on one engine thread (EngineLoop), until SIGINT or SIGTERM.
//
// Shutdown drains: the listening socket closes, /health and new completions
// answer 503, requests in flight get --shutdown-timeout seconds to finish;
// what is left then is aborted (its streams end with finish_reason "abort"
// and [DONE]); the process exits 0.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "engine_flags.h"
#include "llmc/runtime/cli/commands.h"
#include "llmc/runtime/engine/engine_loop.h"
#include "llmc/runtime/serve/api_server.h"
#include "llmc/runtime/serve/http_server.h"
#include "rank_entry.h"
#include "run_command.h"
#include "runner_flags.h"

namespace llmc::cli {
namespace {

// The artifact folder's name without its .llmc suffix.
std::string ModelName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() > 5 && name.ends_with(".llmc")) name.resize(name.size() - 5);
  return name;
}

// Waits until `done` or `seconds` pass.
template <class Fn>
bool WaitFor(Fn done, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

int RunServeCommand(int argc, char** argv) {
  std::string host = "127.0.0.1", api_key, model_name, chat_template;
  int64_t port = 8000, http_threads = 2, max_queue = 1024, max_body = 8 << 20;
  double shutdown_timeout = 30, read_timeout = 30;
  RunnerFlags runner;
  EngineFlags engine;
  FlagSet flags(std::string(argv[0]) + " ARTIFACT [flags]", kServeSummary);
  flags.AddString("host", &host, "address to listen on (0.0.0.0: every interface)");
  flags.AddInt("port", &port, "port to listen on (0: any free one; the line printed says which)");
  flags.AddString("api-key", &api_key,
                  "require 'Authorization: Bearer KEY' on every endpoint but /health and the chat "
                  "page (default: $LLMC_API_KEY, else none)");
  flags.AddString("served-model-name", &model_name,
                  "the model's name in the API (default: the artifact folder's name)");
  flags.AddString("chat-template", &chat_template,
                  "chat template name (chatml, qwen3, llama3, phi3, gemma) instead of the model's");
  flags.AddInt("max-queue", &max_queue,
               "requests waiting to run beyond which new ones are answered 429 + Retry-After");
  flags.AddDouble("shutdown-timeout", &shutdown_timeout,
                  "seconds requests in flight get to finish after SIGINT/SIGTERM before they are "
                  "aborted");
  flags.AddDouble("read-timeout", &read_timeout,
                  "seconds a client has to send a whole request (and keep-alive idle time)");
  flags.AddInt("max-request-bytes", &max_body, "largest request body (413 above)");
  flags.AddInt("http-threads", &http_threads, "threads serving HTTP connections");
  runner.Register(flags);
  engine.Register(flags, runner);
  if (auto rc = ParseCommandLine(flags, argc, argv)) return *rc;
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "%s: expected one ARTIFACT (see --help)\n", argv[0]);
    return kExitUsage;
  }
  auto usage = [&](const std::string& msg) {
    std::fprintf(stderr, "%s: %s\n", argv[0], msg.c_str());
    return kExitUsage;
  };
  if (port < 0 || port > 65535) return usage(absl::StrFormat("--port must be in [0, 65535], got %d", port));
  if (max_queue < 1) return usage(absl::StrFormat("--max-queue must be >= 1, got %d", max_queue));
  if (http_threads < 1) return usage(absl::StrFormat("--http-threads must be >= 1, got %d", http_threads));
  if (max_body < 1024) return usage(absl::StrFormat("--max-request-bytes must be >= 1024, got %d", max_body));
  if (!(shutdown_timeout >= 0)) return usage("--shutdown-timeout must be >= 0");
  if (!(read_timeout > 0)) return usage("--read-timeout must be > 0");
  if (api_key.empty())
    if (const char* env = std::getenv("LLMC_API_KEY")) api_key = env;
  const std::string artifact = flags.positional()[0];
  if (model_name.empty()) model_name = ModelName(artifact);

  // SIGINT/SIGTERM are taken by sigwait below: blocked before any thread
  // starts, so every thread inherits the mask and none is interrupted.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client that disconnects mid-write must not kill the process.
  signal(SIGPIPE, SIG_IGN);

  if (int rc = runner.ResolveBackend(argv[0], artifact); rc != 0) return rc;
  LoadOptions load = runner.Options();
  EngineOptions engine_options;
  if (absl::Status st = engine.Apply(load, engine_options); !st.ok()) return usage(std::string(st.message()));
  auto loaded = LoadForCommand(argv[0], artifact, load);
  if (!loaded) return 1;
  if (loaded->follower()) return RunFollower(*loaded);
  auto created = Engine::Create(std::move(loaded->model), engine_options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(created.status().message()).c_str());
    return 1;
  }
  const std::string kv_summary = (*created)->KvCacheSummary();
  const std::string exec_summary = (*created)->runner().ExecutionSummary();
  EngineLoop loop(*std::move(created));

  serve::ApiServerOptions api;
  api.model_name = model_name;
  api.api_key = api_key;
  api.max_queue = max_queue;
  api.chat_template = chat_template.empty() ? DetectChatTemplate(loop.tokenizer().chat_template())
                                            : ChatTemplateByName(chat_template);
  if (!chat_template.empty() && !api.chat_template.ok())
    return usage(std::string(api.chat_template.status().message()));
  const bool has_chat = api.chat_template.ok();
  serve::ApiServer server(loop, std::move(api));

  serve::HttpLimits limits;
  limits.max_body_bytes = size_t(max_body);
  limits.read_timeout = std::chrono::milliseconds(int64_t(read_timeout * 1000));
  auto http = serve::HttpServer::Start(host, int(port), int(http_threads), limits,
                                       [&server](std::shared_ptr<serve::HttpExchange> ex) {
                                         server.Handle(std::move(ex));
                                       });
  if (!http.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(http.status().message()).c_str());
    return 1;
  }
  server.SetConnectionCounter([h = http->get()] { return h->open_connections(); });
  std::fprintf(stderr, "%s: %s; %s\n", argv[0], kv_summary.c_str(), exec_summary.c_str());
  if (!has_chat)
    std::fprintf(stderr, "%s: no chat template (/v1/chat/completions answers 400): %s\n", argv[0],
                 "give --chat-template");
  std::fprintf(stderr, "%s: serving '%s' on http://%s:%d (OpenAI API under /v1, chat page at /)%s\n",
               argv[0], model_name.c_str(), host.c_str(), (*http)->port(),
               api_key.empty() ? "" : ", API key required");
  std::fflush(stderr);

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "%s: %s: draining (%lld in flight, up to %g s)\n", argv[0],
               sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)server.in_flight(), shutdown_timeout);
  (*http)->StopAccepting();
  server.StopAdmitting();
  serve::HttpServer& h = **http;
  const bool drained =
      WaitFor([&] { return server.in_flight() == 0 && h.open_exchanges() == 0; }, shutdown_timeout);
  if (!drained)
    std::fprintf(stderr, "%s: aborting %lld requests still in flight\n", argv[0],
                 (long long)server.in_flight());
  loop.Shutdown();  // aborts what is left; each stream gets its final output
  // The aborted requests' last bytes ([DONE]) are written before the
  // connections close.
  WaitFor([&] { return server.in_flight() == 0 && h.open_exchanges() == 0; }, 5);
  h.Stop();
  std::fprintf(stderr, "%s: stopped\n", argv[0]);
  return 0;
}

}  // namespace llmc::cli
