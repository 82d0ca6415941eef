#include "deepinfer/runtime/cuda/ipc_pages.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>

namespace deepinfer::runtime::cuda {
namespace {

// This process's exported buffers by handle: a handle cannot be opened by the process that
// made it (a `both` server taking the decode phase of its own prefill), so those are copied
// directly. Weak: the registry keeps nothing alive.
std::mutex registry_mu;
std::map<std::string, std::weak_ptr<void>> exported;

}  // namespace

StatusOr<ModelRunner::DevicePages> device_buffer(int64_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // a failed allocation leaves its error behind: clear it
    return resource_exhausted("CUDA IPC state: cannot allocate " + std::to_string(bytes) +
                              " bytes of device memory: " + cudaGetErrorString(e));
  }
  ModelRunner::DevicePages d;
  d.bytes = bytes;
  d.buffer = std::shared_ptr<void>(p, [](void* q) { (void)cudaFree(q); });
  return d;
}

Status export_ipc_handle(ModelRunner::DevicePages* d) {
  cudaIpcMemHandle_t h;
  cudaError_t e = cudaIpcGetMemHandle(&h, d->buffer.get());
  if (e != cudaSuccess)
    return internal_error(std::string("CUDA IPC state: cudaIpcGetMemHandle: ") +
                          cudaGetErrorString(e));
  d->ipc_handle.assign(reinterpret_cast<const char*>(&h), sizeof(h));
  std::lock_guard<std::mutex> lock(registry_mu);
  for (auto it = exported.begin(); it != exported.end();)  // forget freed ones
    it = it->second.expired() ? exported.erase(it) : std::next(it);
  exported[d->ipc_handle] = d->buffer;
  return ok_status();
}

StatusOr<ModelRunner::DevicePages> copy_ipc_buffer(const std::string& handle, int64_t bytes) {
  cudaIpcMemHandle_t h;
  if (handle.size() != sizeof(h))
    return invalid_argument("CUDA IPC state: a handle of " + std::to_string(handle.size()) +
                            " bytes, expected " + std::to_string(sizeof(h)));
  std::memcpy(&h, handle.data(), sizeof(h));
  std::shared_ptr<void> own;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = exported.find(handle);
    if (it != exported.end()) own = it->second.lock();
  }
  void* theirs = nullptr;
  cudaError_t e =
      own ? cudaSuccess : cudaIpcOpenMemHandle(&theirs, h, cudaIpcMemLazyEnablePeerAccess);
  if (own) theirs = own.get();
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return failed_precondition(
        std::string("CUDA IPC state: cannot open the prefill worker's buffer (it must run on "
                    "this host, with a GPU this process can reach): ") +
        cudaGetErrorString(e));
  }
  StatusOr<ModelRunner::DevicePages> mine = device_buffer(bytes);
  if (mine.ok()) {
    e = cudaMemcpy(mine->buffer.get(), theirs, static_cast<size_t>(bytes),
                   cudaMemcpyDeviceToDevice);
  }
  if (!own) (void)cudaIpcCloseMemHandle(theirs);
  if (!mine.ok()) return mine.status();
  if (e != cudaSuccess)
    return internal_error(std::string("CUDA IPC state: copying the prefill's buffer: ") +
                          cudaGetErrorString(e));
  return mine;
}

}  // namespace deepinfer::runtime::cuda
