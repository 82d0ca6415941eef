// deepinfer serve: the OpenAI-compatible HTTP server. It listens at once (so /health can say 503
// while the weights load) and loads the engine on a second thread.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "deepinfer/cli/command_registry.h"
#include "deepinfer/cli/engine_flags.h"
#include "deepinfer/cli/model_resolver.h"
#include "deepinfer/engine/engine.h"
#include "deepinfer/server/http_server.h"

namespace {

int fail(const deepinfer::Status& st) {
  std::cerr << "deepinfer serve: " << st.to_string() << "\n";
  return 1;
}

int run_serve(int argc, char** argv) {
  std::string model_arg, served_name;
  deepinfer::EngineArgs args;
  deepinfer::server::ServerOptions opts;
  CLI::App app{
      "Serve the OpenAI-compatible API. With no MODEL_DIR: $DEEPINFER_HF_MODEL_DIR, else the "
      "embedded default tiny model.",
      "deepinfer serve"};
  app.add_option("MODEL_DIR", model_arg, "checkpoint directory (config.json + safetensors)");
  app.add_option("--host", opts.host, "IP address to listen on")->capture_default_str();
  app.add_option("--port", opts.port, "TCP port (0: any free port)")->capture_default_str();
  app.add_option("--api-key", opts.api_key, "require Authorization: Bearer KEY (not /health)");
  app.add_option("--served-model-name", served_name, "model id in /v1/models");
  app.add_option("--max-body-bytes", opts.max_body_bytes, "larger request bodies get 413")
      ->capture_default_str();
  deepinfer::cli::add_engine_flags(app, &args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto dir = deepinfer::cli::resolve_model_dir(model_arg);
  if (!dir.ok()) return fail(dir.status());
  args.model = *dir;
  opts.model_name = !served_name.empty() ? served_name
                    : !model_arg.empty() ? std::filesystem::path(model_arg).filename().string()
                                         : std::string("deepinfer-tiny");
  if (opts.model_name.empty()) opts.model_name = model_arg;

  // Signals go to one waiting thread, not to whichever thread the kernel picks.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  auto server = deepinfer::server::HttpServer::create(opts);
  if (!server.ok()) return fail(server.status());
  std::fprintf(stderr, "deepinfer serve: listening on http://%s:%u (model %s)\n", opts.host.c_str(),
               (*server)->port(), args.model.c_str());

  std::unique_ptr<deepinfer::Engine> engine;
  std::atomic<bool> load_failed{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    (*server)->stop();
  });
  std::thread loader([&] {
    auto e = deepinfer::Engine::create(args);
    if (!e.ok()) {
      fail(e.status());
      load_failed = true;
      pthread_kill(signal_thread.native_handle(), SIGTERM);
      return;
    }
    engine = std::move(*e);
    (*server)->set_engine(engine.get());
    std::fprintf(stderr, "deepinfer serve: model loaded, ready\n");
  });
  (*server)->run();
  loader.join();
  signal_thread.join();
  (*server)->set_engine(nullptr);
  engine.reset();  // stops the step loop before the sessions go away
  server->reset();
  return load_failed ? 1 : 0;
}

}  // namespace

DEEPINFER_REGISTER_COMMAND(kServe, "serve", "OpenAI-compatible HTTP server (/v1/...)", run_serve);
