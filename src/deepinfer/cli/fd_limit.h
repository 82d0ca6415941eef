// The open-file limit of the commands that hold a descriptor per connection (serve, router).
#pragma once

namespace deepinfer::cli {

// Raises the soft RLIMIT_NOFILE to the hard one: the default soft limit (often 1024) is too few
// for a server's connections, and a routed request holds two (client and worker). Best effort:
// a failure leaves the limit as it was.
void raise_fd_limit();

}  // namespace deepinfer::cli
