// Device buffers shared between processes on one host by CUDA IPC handles: how a prefill
// worker hands a sequence's pages to a decode worker without a trip through host memory
// (--disagg-cuda-ipc, the CUDA runner's export_pages_ipc / map_ipc_pages).
#pragma once

#include <cstdint>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/runtime/model_runner.h"

namespace deepinfer::runtime::cuda {

// A fresh device buffer of `bytes` (freed with its last holder); resource_exhausted naming the
// size when the device has no room.
StatusOr<ModelRunner::DevicePages> device_buffer(int64_t bytes);
// Sets d's ipc_handle (cudaIpcMemHandle_t's bytes) for its buffer, made by device_buffer.
Status export_ipc_handle(ModelRunner::DevicePages* d);
// Opens another process's buffer by its handle, copies its `bytes` into a fresh buffer of this
// process and closes the handle: the exporter may free its own as soon as this returns.
// invalid_argument for a malformed handle, failed_precondition when it cannot be opened (another
// host or GPU, or the exporter freed it).
StatusOr<ModelRunner::DevicePages> copy_ipc_buffer(const std::string& handle, int64_t bytes);

}  // namespace deepinfer::runtime::cuda
