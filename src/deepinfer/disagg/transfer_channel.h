// A reliable byte stream between the two ends of a state transfer, every wait bounded by a
// deadline. The protocol (transfer_wire.h) runs the same over TCP (here) and UCX
// (ucx_channel.h). Errors (failed_precondition) name the peer and the cause.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/disagg/transfer_wire.h"

namespace deepinfer::disagg {

class Channel {
 public:
  virtual ~Channel() = default;
  virtual Status write(std::string_view bytes, wire::Deadline deadline) = 0;
  virtual Status read(char* out, size_t n, wire::Deadline deadline) = 0;
  const std::string& peer() const { return peer_; }

 protected:
  explicit Channel(std::string peer) : peer_(std::move(peer)) {}
  std::string peer_;  // for errors: "state transfer from 127.0.0.1:4567"
};

class TcpChannel final : public Channel {
 public:
  TcpChannel(wire::Fd fd, std::string peer) : Channel(std::move(peer)), fd_(std::move(fd)) {}
  Status write(std::string_view bytes, wire::Deadline deadline) override {
    return wire::write_all(fd_.get(), bytes, deadline, peer_);
  }
  Status read(char* out, size_t n, wire::Deadline deadline) override {
    return wire::read_exact(fd_.get(), out, n, deadline, peer_);
  }

 private:
  wire::Fd fd_;
};

}  // namespace deepinfer::disagg
