// `deepinfer serve`'s prefill/decode disaggregation flags (--role, --disagg-*) and worker
// self-registration (--register-with, --advertise-url).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/server/http_server.h"
#include "deepinfer/server/worker_registration.h"

namespace deepinfer::cli {

void add_serve_disagg_flags(CLI::App& app, server::ServerOptions* o,
                            server::RegistrationOptions* reg);

// After parsing: defaults that depend on other flags (--disagg-host from --host, the advertised
// URL from --host/--port), and checks that name the flag.
Status resolve_serve_disagg_flags(server::ServerOptions* o, server::RegistrationOptions* reg,
                                  uint16_t bound_port);

}  // namespace deepinfer::cli
