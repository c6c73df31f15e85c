// Weights and state in device memory for AotiDeviceBackend: the one file to
// switch onto the residency module (device_residency.h, docs/design.md part
// 2) when it lands. Until then it keeps the simulated backend's rules:
// weights shared process-wide by (content key, device index) with weak
// references, one state arena per session id (or per named data map).
//
// Every allocation comes from the DeviceAllocator serving CUDA and every
// write goes through its counted copy_host_to_device.
// Thread-safe: the caches are under one lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <et_copy/delegate_record.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/result.h>

namespace et_copy::aoti {

/// One allocation on the device serving CUDA, freed with the object.
class DeviceBlock {
 public:
  /// `nbytes` may be 0 (no memory taken; device() is null).
  ET_NODISCARD static executorch::runtime::Result<std::unique_ptr<DeviceBlock>> create(
      size_t nbytes, executorch::runtime::etensor::DeviceIndex index);
  ~DeviceBlock();
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;

  /// Host bytes in at `offset`, through the allocator's counted h2d copy.
  ET_NODISCARD executorch::runtime::Error write(size_t offset, const void* src, size_t nbytes);
  /// The pointer a device kernel takes.
  uint8_t* device() const {
    return static_cast<uint8_t*>(device_);
  }
  /// The simulated device's host alias of device(); null on other allocators.
  uint8_t* host_alias() const {
    return alias_;
  }
  size_t nbytes() const {
    return nbytes_;
  }

 private:
  DeviceBlock(void* device, uint8_t* alias, size_t nbytes, executorch::runtime::etensor::DeviceIndex index)
      : device_(device), alias_(alias), nbytes_(nbytes), index_(index) {}
  void* device_;
  uint8_t* alias_;
  size_t nbytes_;
  executorch::runtime::etensor::DeviceIndex index_;
};

/// A session's state: one arena, and what resetting it rewrites.
struct StateArena {
  std::unique_ptr<DeviceBlock> block;
  std::string method; ///< the method that created it, for messages
  struct State {
    size_t offset;
    size_t nbytes;
    std::vector<uint8_t> initial; ///< empty: starts at zero
  };
  std::map<std::string, State> states;
};

/**
 * The device copy of `weight` on device `index`: the cached one, or one
 * uploaded from `named_data` (`weight.key`). Fails with `*what` set: NotFound
 * when the named data lacks the key, DelegateInvalidCompatibility when its
 * size differs from the record's or from an uploaded weight of that key, the
 * allocator's error otherwise.
 */
ET_NODISCARD executorch::runtime::Result<std::shared_ptr<DeviceBlock>> device_weight(
    const DelegateWeight& weight, executorch::runtime::etensor::DeviceIndex index,
    const executorch::runtime::NamedDataMap* named_data, std::string* what);

/// Arena key: (0, session id) or (1, named data map address).
using ArenaKey = std::pair<int, uintptr_t>;

/**
 * The state arena of `key`, made on first use (zeros, then each state's
 * initial value from `named_data`), with the states of `record` it did not
 * know written. InvalidProgram when methods of one session disagree on the
 * arena's size or a state's place; NotFound / DelegateInvalidCompatibility
 * for a missing or mis-sized initial value.
 */
ET_NODISCARD executorch::runtime::Result<std::shared_ptr<StateArena>> state_arena(
    const ArenaKey& key, const DelegateRecord& record, const std::string& method,
    const executorch::runtime::NamedDataMap* named_data, std::string* what);

} // namespace et_copy::aoti
