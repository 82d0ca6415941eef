// What the router reads from a request body: whether it streams (the worker decides, this only
// labels it) and the prompt text the cache_aware policy matches. The body itself is forwarded
// unchanged; one the router cannot read is routed by its raw bytes and the worker answers it.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::router {

struct RouteInfo {
  bool stream = false;
  std::string text;  // chat: each message's role and text in order; completions: the prompt
};

RouteInfo route_info(std::string_view body);

}  // namespace deepinfer::router
