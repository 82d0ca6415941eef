#include "deepinfer/disagg/transfer_wire.h"

#include <openssl/evp.h>

namespace deepinfer::disagg::wire {

Digest sha256(std::string_view bytes) {
  Digest d{};
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), d.data(), &n, EVP_sha256(), nullptr);
  return d;
}

}  // namespace deepinfer::disagg::wire
