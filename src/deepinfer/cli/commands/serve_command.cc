// deepinfer serve: the OpenAI-compatible HTTP server. It listens at once (so /health can say 503
// while the weights load) and loads the engine on a second thread.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/engine_flags.h"
#include "deepinfer/cli/fd_limit.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/cli/serve_disagg_flags.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/server/http_server.h"

namespace {

int run_serve(int argc, char** argv) {
  std::string model_arg, scripted_file;
  std::vector<std::string> served_names;
  double grace_s = 30;
  deepinfer::EngineArgs args;
  deepinfer::server::ServerOptions opts;
  CLI::App app{
      "Serve the OpenAI-compatible API. With no MODEL_DIR: $DEEPINFER_HF_MODEL_DIR, else the "
      "embedded default tiny model. SIGTERM/SIGINT: stop accepting, let running requests finish "
      "for --shutdown-grace seconds, cancel the rest, exit 0 (a second signal exits at once).",
      "deepinfer serve"};
  app.add_option("MODEL_DIR", model_arg, "checkpoint directory (config.json + safetensors)");
  app.add_option("--host", opts.host, "IP address to listen on")->capture_default_str();
  app.add_option("--port", opts.port, "TCP port (0: any free port)")->capture_default_str();
  app.add_option("--api-key", opts.api_key,
                 "require Authorization: Bearer KEY (not for /health, nor /metrics unless "
                 "--metrics-require-key)");
  app.add_flag("--metrics-require-key", opts.metrics_require_key, "/metrics needs the API key too");
  app.add_option("--allowed-hosts", opts.allowed_hosts,
                 "without --api-key, Host names accepted besides IP addresses and localhost "
                 "(DNS-rebinding protection); '*' accepts any");
  app.add_option("--served-model-name", served_names,
                 "model ids in /v1/models (several: aliases; the first is the primary one); "
                 "requests naming another model get 404 model_not_found");
  app.add_option("--max-body-bytes", opts.max_body_bytes, "larger request bodies get 413")
      ->capture_default_str();
  app.add_option("--request-timeout", opts.request_timeout_s,
                 "seconds before a request is aborted (408, or an error event when streaming); "
                 "0: never")
      ->capture_default_str();
  app.add_option(
         "--max-waiting-requests", opts.max_waiting_requests,
         "answer 429 (Retry-After) when admitting a request would leave more than this many "
         "waiting for a running slot (--max-num-seqs); -1: no limit")
      ->capture_default_str();
  app.add_option("--max-connections", opts.max_connections,
                 "open connections at most; more get 503 at once (0: the descriptor limit less a "
                 "reserve)")
      ->capture_default_str();
  app.add_option("--keep-alive-timeout", opts.keep_alive_timeout_s,
                 "seconds an idle connection may wait before it starts a request")
      ->capture_default_str();
  app.add_option("--read-timeout", opts.read_timeout_s,
                 "seconds a request's header and body may take to arrive")
      ->capture_default_str();
  app.add_option("--access-log", opts.access_log,
                 "JSON access log, one line per request: '-' stderr, '' off, else a file")
      ->capture_default_str();
  app.add_option("--shutdown-grace", grace_s,
                 "seconds running requests get to finish after SIGTERM/SIGINT")
      ->capture_default_str();
  app.add_option("--debug-scripted-output", scripted_file,
                 "TEST HOOK: every sample's output is this file's text (then EOS) instead of "
                 "sampled tokens, still through the real detokenizer, output parser and streaming");
  deepinfer::cli::add_engine_flags(app, &args);
  deepinfer::server::RegistrationOptions registration;
  deepinfer::cli::add_serve_disagg_flags(app, &opts, &registration);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (auto st = deepinfer::cli::resolve_engine_device(&args); !st.ok())
    return deepinfer::cli::command_failed("serve", st);
  if (opts.disagg_cuda_ipc && args.device != deepinfer::runtime::Device::kCuda)
    return deepinfer::cli::command_failed(
        "serve", deepinfer::invalid_argument(
                     "--disagg-cuda-ipc keeps states in device memory: it needs --device cuda"));
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) return deepinfer::cli::command_failed("serve", dir.status());
  args.model = *dir;
  if (!scripted_file.empty()) {
    std::ifstream in(scripted_file, std::ios::binary);
    if (!in)
      return deepinfer::cli::command_failed(
          "serve",
          deepinfer::invalid_argument("--debug-scripted-output: cannot read " + scripted_file));
    std::stringstream ss;
    ss << in.rdbuf();
    args.debug_scripted_output = ss.str();
    if (args.debug_scripted_output.empty())
      return deepinfer::cli::command_failed(
          "serve",
          deepinfer::invalid_argument("--debug-scripted-output: " + scripted_file + " is empty"));
  }
  if (!served_names.empty()) {
    opts.model_names = served_names;
  } else {
    std::string name = !model_arg.empty() ? std::filesystem::path(model_arg).filename().string()
                                          : std::string("deepinfer-tiny");
    opts.model_names = {name.empty() ? model_arg : name};
  }
  opts.max_running = args.max_num_seqs;
  opts.max_model_len = args.max_model_len > 0 ? args.max_model_len : 65536;
  deepinfer::cli::raise_fd_limit();

  // Signals go to one waiting thread, not to whichever thread the kernel picks.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  // The transfer listener binds with the server; --advertise-url defaults to the bound port.
  if (auto st = deepinfer::cli::resolve_serve_disagg_flags(&opts, &registration, opts.port);
      !st.ok())
    return deepinfer::cli::command_failed("serve", st);
  auto server = deepinfer::server::HttpServer::create(opts);
  if (!server.ok()) return deepinfer::cli::command_failed("serve", server.status());
  if (!registration.router_url.empty() && opts.port == 0) {
    registration.worker_url.clear();  // the default needs the port the kernel picked
    if (auto st =
            deepinfer::cli::resolve_serve_disagg_flags(&opts, &registration, (*server)->port());
        !st.ok())
      return deepinfer::cli::command_failed("serve", st);
  }
  std::fprintf(stderr, "deepinfer serve: listening on http://%s:%u (model %s)\n", opts.host.c_str(),
               (*server)->port(), args.model.c_str());

  std::unique_ptr<deepinfer::Engine> engine;
  std::unique_ptr<deepinfer::server::WorkerRegistration> registered;
  std::mutex registration_mu;  // the loader starts it, the signal thread ends it
  std::atomic<bool> load_failed{false}, serving_done{false};
  std::thread signal_thread([&] {
    for (int count = 0;; ++count) {
      int sig = 0;
      sigwait(&sigs, &sig);
      if (serving_done) return;
      if (count == 0) {
        std::fprintf(stderr, "deepinfer serve: signal %d, draining (grace %.1f s)\n", sig, grace_s);
        {
          std::lock_guard<std::mutex> lock(registration_mu);
          if (registered) registered->leave();  // no new requests from the router
        }
        (*server)->shutdown(grace_s);
      } else {
        (*server)->stop();
      }
    }
  });
  std::thread loader([&] {
    auto e = deepinfer::Engine::create(args);
    if (!e.ok()) {
      deepinfer::cli::command_failed("serve", e.status());
      load_failed = true;
      (*server)->stop();
      return;
    }
    engine = std::move(*e);
    deepinfer::cli::print_engine_capacity("serve", engine->capacity());
    (*server)->set_engine(engine.get());
    std::fprintf(stderr, "deepinfer serve: model loaded, ready\n");
    if (!registration.router_url.empty()) {
      auto r = deepinfer::server::WorkerRegistration::start(registration);
      if (!r.ok()) {
        deepinfer::cli::command_failed("serve", r.status());
        return;
      }
      std::lock_guard<std::mutex> lock(registration_mu);
      registered = std::move(*r);
      std::fprintf(stderr, "deepinfer serve: registering with %s as %s (%s)\n",
                   registration.router_url.c_str(), registration.worker_url.c_str(),
                   registration.role.c_str());
    }
  });
  (*server)->run();
  serving_done = true;
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // wakes its sigwait
  loader.join();
  signal_thread.join();
  registered.reset();  // leaves the router, if draining did not
  (*server)->set_engine(nullptr);
  engine.reset();  // stops the step loop before the sessions go away
  server->reset();
  return load_failed ? 1 : 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kServe, "serve", "OpenAI-compatible HTTP server (/v1/...)", run_serve);
