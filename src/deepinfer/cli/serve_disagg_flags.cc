#include "deepinfer/cli/serve_disagg_flags.h"

namespace deepinfer::cli {

void add_serve_disagg_flags(CLI::App& app, server::ServerOptions* o,
                            server::RegistrationOptions* reg) {
  app.add_option("--role", o->role,
                 "prefill/decode disaggregation: 'prefill' computes prompts and parks their state "
                 "for a decode worker, 'decode' fetches it and streams the rest, 'both' does "
                 "either; every role also answers plain requests")
      ->check(CLI::IsMember({"both", "prefill", "decode"}))
      ->capture_default_str();
  app.add_option("--disagg-transport", o->transfer.transport,
                 "prefill/both: how decode workers fetch parked states: tcp, or ucx (UCX picks "
                 "RDMA, shared memory or TCP); the handoff token names it, so decode workers "
                 "need no flag")
      ->check(CLI::IsMember({"tcp", "ucx"}))
      ->capture_default_str();
  app.add_flag("--disagg-cuda-ipc", o->disagg_cuda_ipc,
               "prefill/both, --device cuda: keep each parked state in device memory; a decode "
               "worker on this host (--device cuda) maps it by CUDA IPC handle, device to device, "
               "and the transfer carries only its header (a decode worker elsewhere fails the "
               "fetch with kv_transfer_failed)");
  app.add_option("--disagg-host", o->transfer.host,
                 "prefill/both: address the state-transfer listener binds (default: --host)");
  app.add_option("--disagg-port", o->transfer.port, "prefill/both: its TCP port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--disagg-advertise-host", o->transfer_advertise_host,
                 "host decode workers reach the listener at, in handoff tokens (default: "
                 "--disagg-host, or 127.0.0.1 for a wildcard address)");
  app.add_option("--disagg-handoff-ttl", o->handoffs.ttl_s,
                 "seconds a parked state waits for its decode worker before it is dropped")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--disagg-handoff-bytes", o->handoffs.capacity_bytes,
                 "host memory for parked states; a prefill past it answers 503")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--disagg-io-timeout", o->fetch.io_timeout_s,
                 "seconds either side of a state transfer waits for the other (each wait)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--debug-corrupt-transfer-chunk", o->transfer.corrupt_chunk,
                 "TEST HOOK: flip a bit of this chunk of the first state sent, after its "
                 "checksum, as a bad link would (-1: off)")
      ->capture_default_str();
  app.add_option("--register-with", reg->router_url,
                 "router URL (http://host:port) to join by heartbeats (every 2 s; it drops a "
                 "worker silent for 6 s); leaves it when draining");
  app.add_option("--advertise-url", reg->worker_url,
                 "the URL the router reaches this server at (default: http://--host:--port, "
                 "with 127.0.0.1 for a wildcard --host)");
}

Status resolve_serve_disagg_flags(server::ServerOptions* o, server::RegistrationOptions* reg,
                                  uint16_t bound_port) {
  if (o->transfer.host.empty()) o->transfer.host = o->host;
  o->transfer.io_timeout_s = o->fetch.io_timeout_s;
  reg->role = o->role;
  if (reg->router_url.empty()) {
    if (!reg->worker_url.empty())
      return invalid_argument("--advertise-url is for --register-with, which is not given");
    return ok_status();
  }
  if (reg->worker_url.empty()) {
    const bool wildcard = o->host == "0.0.0.0" || o->host == "::";
    const std::string host = wildcard ? "127.0.0.1" : o->host;
    const bool v6 = host.find(':') != std::string::npos;
    reg->worker_url = "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(bound_port);
  }
  RETURN_IF_ERROR(server::parse_http_url(reg->router_url, "--register-with").status());
  return server::parse_http_url(reg->worker_url, "--advertise-url").status();
}

}  // namespace deepinfer::cli
