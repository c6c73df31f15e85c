// A DeviceAllocator for DeviceType::CUDA on real NVIDIA GPUs, through the
// CUDA runtime linked statically: the library loads on machines with no GPU
// or driver and reports that as an Error, never as a crash.
#pragma once

#include <cstddef>
#include <cstdint>

#include <et_copy/counting_device_allocator.h>
#include <et_copy/limits.h>
#include <et_copy/registration.h>

namespace et_copy {

/// How copies to and from pageable (not page-locked) host memory move.
enum class PageableCopy : int {
  /// Plain cudaMemcpyAsync: the driver stages through its own small buffer.
  kDirect = 0,
  /// Through et-copy's pinned staging buffers, in chunks, double-buffered so
  /// the host memcpy of one chunk overlaps the DMA of the previous one.
  kStaged = 1,
};

/// Tuning of the copy paths. Pinned or registered host memory always takes
/// the direct DMA path; this only decides what pageable memory does.
struct CudaCopyConfig {
  /// Direct by default: on H200 machines it beat staging in 11 of 18
  /// pageable cells, and D2H of 64 MiB and more by 1.2-2x (docs/cuda.md).
  PageableCopy pageable = PageableCopy::kDirect;
  /// Pageable copies smaller than this go direct (staging buys nothing there).
  size_t staging_threshold = size_t{1} << 20;
  /// Bytes per staging chunk; each copy lane holds two such pinned buffers.
  size_t chunk_bytes = size_t{8} << 20;
};

/// What a query of the CUDA runtime found (see cuda_runtime_status()).
struct CudaRuntimeStatus {
  int runtime_version = 0; ///< e.g. 13000 for 13.0
  int driver_version = 0;  ///< 0 when no driver is installed
  int device_count = 0;    ///< valid only when error is Ok
  Error error = Error::Ok; ///< why devices could not be counted
  int cuda_error = 0;      ///< the cudaError_t behind `error` (0 when Ok)
  char message[256] = {0}; ///< words for `error`: which of no driver, old driver, no device
};

/// One device, as doctor prints it.
struct CudaDeviceProperties {
  char name[256] = {0};
  int major = 0; ///< compute capability
  int minor = 0;
  uint64_t total_memory = 0; ///< bytes
  char pci_bus_id[32] = {0};
};

/**
 * et-copy's CUDA allocator. Memory comes from cudaMalloc (256-byte aligned).
 *
 * Copies, by default: each runs on one of the allocator's own streams and is
 * complete when the call returns, so the caller may reuse or free host
 * memory at once and read a device-to-host result without further sync.
 * The streams are blocking streams: they wait for work already queued on
 * the legacy default stream (torch's default) and it waits for them.
 *
 * Copies on the caller's stream: when the calling thread has set a stream
 * for the device (set_cuda_stream, <et_copy/cuda_stream.h>), a copy is
 * queued on that stream instead. Host-to-device and device-to-device return
 * without waiting; a pageable source is first copied into pinned staging
 * (blocks of the allocator's, at most kStreamStagingChunks * chunk_bytes
 * per device, each reused only once its stream has passed the copy that
 * read it), a pinned one is read by the DMA when the stream gets there (the
 * caller keeps it unchanged until then). Device-to-host is queued and then
 * that stream, and nothing else, is synchronised. The copy configuration's
 * pageable mode and threshold do not apply there: the lanes' path only.
 *
 * Device indices: -1 means the calling thread's current device; any other
 * index must be < device_count(), else InvalidArgument. The calling
 * thread's current device is restored before every method returns.
 *
 * Errors: every CUDA call is checked. The failing call, the device and
 * cudaGetErrorString's words are logged (ET_LOG) and kept in
 * last_error_message(); the result maps to: InvalidArgument (bad index,
 * alignment not a power of two, a null or non-device pointer where device
 * memory is needed, host memory where it is not), NotSupported (alignment
 * above kMaxAlignment), MemoryAllocationFailed (out of device or pinned
 * memory), NotFound (no driver, no device), InvalidState (the runtime is
 * shutting down), Internal (any other CUDA failure, e.g. a sticky launch
 * error left by other code).
 *
 * Threading: every method is thread-safe. Copies on different threads run
 * concurrently on different streams (up to kMaxLanesPerDevice at once per
 * device; further callers wait for a free lane).
 */
class CudaDeviceAllocator final : public CountingDeviceAllocator {
 public:
  /// What cudaMalloc guarantees (kDeviceAlignment); larger alignments give
  /// NotSupported.
  static constexpr size_t kMaxAlignment = kDeviceAlignment;
  /// Concurrent copies per device (each lane: a stream, two pinned buffers).
  static constexpr int kMaxLanesPerDevice = 4;
  /// Pinned staging for copies on callers' streams, per device, in chunks
  /// (CudaCopyConfig::chunk_bytes): 32 MiB with the default chunk. Beyond it
  /// a copy waits for the oldest staged copy to run, not for the stream.
  static constexpr size_t kStreamStagingChunks = 4;

  CudaDeviceAllocator();
  ~CudaDeviceAllocator() override;
  CudaDeviceAllocator(const CudaDeviceAllocator&) = delete;
  CudaDeviceAllocator& operator=(const CudaDeviceAllocator&) = delete;

  // device_count(): cudaGetDeviceCount's answer, queried once. NotFound (no
  // driver or no device: a count of zero is reported as NotFound too) or
  // Internal.
  const char* name() const override {
    return "cuda";
  }
  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }

  // allocate(): cudaMalloc. Zero bytes still returns a unique pointer that
  // deallocate() accepts. `alignment` must be a power of two <= kMaxAlignment.
  // deallocate(): cudaFree of a pointer allocate() returned. Unknown
  // pointers are refused (logged, counted as failures); during process
  // exit, when the runtime is already unloading, the memory is gone with
  // the context and the call only drops its bookkeeping.
  // Copies: the device side must be memory of device `index` (or managed
  // memory); complete on return, or queued on the caller's stream (above).

  /// Page-locks [ptr, ptr+nbytes) of long-lived host memory (e.g. a planned
  /// CPU arena) with cudaHostRegister, so copies to and from it take the
  /// direct DMA path. Pair with unregister_host_memory() before freeing it.
  /// InvalidArgument if already registered or not host memory.
  ET_NODISCARD Error register_host_memory(void* ptr, size_t nbytes);
  ET_NODISCARD Error unregister_host_memory(void* ptr);

  /// The copy tuning in force for pageable host memory (CudaCopyConfig),
  /// and the setting that changes it for the process: the best path depends
  /// on the host's memcpy and DMA speeds, which `python -m et_copy bench`
  /// measures. InvalidArgument (configuration unchanged) for a chunk size
  /// under 64 KiB or above 1 GiB or an unknown mode. Copies already running
  /// keep the configuration they started with; thread-safe.
  CudaCopyConfig copy_config() const;
  ET_NODISCARD Error set_copy_config(const CudaCopyConfig& config);

  /// Bytes of pinned staging held for copies on callers' streams on device
  /// `index` (0 for an index out of range or a device not used that way).
  size_t stream_staging_bytes(DeviceIndex index) const;

  /// The calling thread's last CUDA failure in words ("" if none yet).
  static const char* last_error_message();
  const char* failure_message() const override {
    return last_error_message();
  }

 private:
  ET_NODISCARD Result<int> count_devices() const override;
  ET_NODISCARD Result<void*> allocate_bytes(size_t nbytes, DeviceIndex index, size_t alignment) override;
  Released release_bytes(void* ptr, DeviceIndex index) override;
  ET_NODISCARD Error move_bytes(CopyKind kind, void* dst, const void* src, size_t nbytes, DeviceIndex index) override;

  struct Impl;
  Impl* impl_; // never freed: the allocator outlives every static
};

/// The process-wide CUDA allocator: created on first use, never destroyed,
/// so device memory can be freed by destructors that run during exit.
CudaDeviceAllocator& cuda_device_allocator();

/**
 * Serves DeviceType::CUDA with cuda_device_allocator(), if a device is
 * usable: kRegistered, or kAlreadyOurs. When the slot is taken it queries
 * nothing and registers nothing:
 * - by another library's allocator (say, upstream ExecuTorch's CUDA
 *   backend's, registered when its library loads): kAlreadyOther, not a
 *   failure. That allocator is taken to be a GPU's: et-copy's copy kernels,
 *   sessions and AotiDeviceBackend (target cuda) run on it; what needs
 *   et-copy's own allocator (counters, counting scopes) is refused by name,
 *   and its copy tuning does not apply (docs/cuda.md, "Beside upstream's
 *   CUDA backend");
 * - by et-copy's simulated allocator, which is no GPU: kFailed with
 *   `*error` RegistrationAlreadyRegistered.
 * Without a driver or device it registers nothing (the slot stays free for
 * another allocator) and returns kFailed with `*error` (when given) set to
 * NotFound; the reason is in CudaDeviceAllocator::last_error_message().
 * Python's et_copy.use_cuda() is this call. Threading as register_allocator().
 */
ET_NODISCARD Registration use_cuda(Error* error = nullptr);

/// Versions and device count, without creating a context or registering
/// anything. Safe on machines with no driver.
CudaRuntimeStatus cuda_runtime_status();

/// Properties of device `index`; InvalidArgument for a missing device.
ET_NODISCARD Result<CudaDeviceProperties> cuda_device_properties(int index);

/// The device that owns `ptr` (>= 0) for device or managed memory, -1 for
/// host memory (pinned or pageable). Used to tell real device memory apart
/// from simulated memory. NotFound when CUDA is unusable.
ET_NODISCARD Result<int> cuda_pointer_device(const void* ptr);

} // namespace et_copy
