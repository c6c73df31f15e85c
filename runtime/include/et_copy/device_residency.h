// Device residency: where device backends keep weights and state, one way
// for all of them (docs/design.md, "A compiled device backend", part 2).
//
// - DeviceBlock: one allocation from the DeviceAllocator serving a device,
//   written only through that allocator's counted copy_host_to_device.
// - Weights: a process-wide cache by (content key, device) of weak
//   references, so a weight is uploaded once while anything uses it and two
//   programs with the same weights share them. A load that carries a pool
//   id (the runtime spec "pool") of an open pool also pins the weight in
//   that pool: it then stays while the pool (its program) lives, whatever
//   its sessions do, and goes with release_pool(). Without a pool, or with a
//   pool nobody opened, the weight goes with its last user.
// - State arenas: one per (backend id, session id), or (backend id, named
//   data map) for loads without a session; shared by the methods of a
//   session, written at creation and by reset_arena through counted h2d
//   copies (zeros, then each state's initial value).
//
// Threading: every function here is safe to call from any thread; the
// caches are under one process-wide lock, held across an upload so a key is
// uploaded once even by concurrent loads. Writing device memory is not
// ordered with a backend's kernels reading it: reset_arena against execute
// of that session must be serialized by the caller (SessionPool's
// execution lock). The caches are never destroyed (blocks may be freed
// during static destruction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/portable_type/device.h>
#include <executorch/runtime/core/result.h>

#include <et_copy/failure_report.h>

namespace et_copy {

/// One allocation on a device, freed with the object.
class DeviceBlock {
 public:
  /// `nbytes` on device (type, index) from the DeviceAllocator registered
  /// for `type` now (executorch::runtime::get_device_allocator), which also
  /// frees it. nbytes 0 takes no memory (device() is null). Fails with
  /// NotFound when no allocator serves `type`, NotSupported for CPU, the
  /// allocator's error otherwise.
  ET_NODISCARD static executorch::runtime::Result<std::unique_ptr<DeviceBlock>> create(
      executorch::runtime::etensor::DeviceType type, executorch::runtime::etensor::DeviceIndex index, size_t nbytes);
  ~DeviceBlock();
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;

  /// Host bytes [src, src + nbytes) to [offset, offset + nbytes) of the
  /// block, through the allocator's counted h2d copy. InvalidArgument when
  /// the range leaves the block; the copy's error otherwise. Not
  /// synchronized with other writers or readers of the block.
  ET_NODISCARD executorch::runtime::Error write(size_t offset, const void* src, size_t nbytes);

  /// The device pointer (what a device kernel takes); null when nbytes is 0.
  void* device() const {
    return device_;
  }
  /// The host address of the same bytes where the allocator has that
  /// capability (HostAliasing, counting_device_allocator.h: the simulated device); null elsewhere.
  uint8_t* host_alias() const {
    return alias_;
  }
  size_t nbytes() const {
    return nbytes_;
  }
  executorch::runtime::etensor::DeviceType device_type() const {
    return type_;
  }
  executorch::runtime::etensor::DeviceIndex device_index() const {
    return index_;
  }

 private:
  DeviceBlock(executorch::runtime::DeviceAllocator* allocator, void* device, uint8_t* alias, size_t nbytes,
              executorch::runtime::etensor::DeviceType type, executorch::runtime::etensor::DeviceIndex index)
      : allocator_(allocator), device_(device), alias_(alias), nbytes_(nbytes), type_(type), index_(index) {}
  executorch::runtime::DeviceAllocator* allocator_;
  void* device_;
  uint8_t* alias_;
  size_t nbytes_;
  executorch::runtime::etensor::DeviceType type_;
  executorch::runtime::etensor::DeviceIndex index_;
};

/**
 * The weight of content key `key` on device (type, index), `nbytes` long:
 * from the cache, or read from `source` (source->get_data(key)) and
 * uploaded through one counted h2d copy. With `pool` set and open
 * (open_pool), the weight is also pinned in that pool until
 * release_pool(pool).
 *
 * With `verify`, the bytes must have the key's content digest
 * (content_key_matches): they are hashed as they are copied, chunk by
 * chunk, in one pass over them; a weight cached by an unverified load is
 * uploaded again, verified, for this one.
 *
 * On failure returns the error, with why in `report`'s detail (when not
 * null), naming the key: DelegateInvalidCompatibility when the cache holds the key
 * with another size or `source` has it with another size; NotFound when
 * `source` is null; `source`'s error when it lacks the key; InvalidProgram
 * when `verify` finds other bytes than the key names (nothing is cached
 * then); DeviceBlock's errors when the upload fails (nothing is cached then).
 */
ET_NODISCARD executorch::runtime::Result<std::shared_ptr<DeviceBlock>> acquire_weight(
    const std::string& key, executorch::runtime::etensor::DeviceType type,
    executorch::runtime::etensor::DeviceIndex index, size_t nbytes, const executorch::runtime::NamedDataMap* source,
    std::optional<int> pool, FailureReport* report, bool verify = false);

/// Whether the SHA-256 `digest` (64 lowercase hex digits) is the one the
/// content key `key` names: the key's part after its last ':' is at least
/// 32 lowercase hex digits, and `digest` starts with them (et-copy's keys
/// are a prefix and the first 32 digits of their bytes' SHA-256).
bool content_key_matches(const std::string& key, const std::string& digest);

/// Starts pinning: from now until release_pool(pool), weights acquired with
/// `pool` stay resident. A SessionPool opens its id at creation. Idempotent.
void open_pool(int pool);
/// Drops the weights pinned in `pool` (each freed unless something else
/// holds it) and closes the pool. Idempotent; a pool never opened is a no-op.
void release_pool(int pool);
/// Bytes of the weights pinned in `pool` now (0 for a closed pool).
size_t pinned_nbytes(int pool);

/// One state tensor of an arena: its bytes at `offset`, and the named data
/// key of its initial value (empty: it starts at zero). A delegate record's
/// state line is one of these (DelegateState, delegate_record.h).
struct ArenaState {
  std::string name;
  size_t offset = 0;
  size_t nbytes = 0;
  std::string initial_key;
};

/// Which arena a load binds: its session's, or without a session one per
/// named data map (so per program when the program has no .ptd).
struct ArenaKey {
  std::string owner;          ///< the backend's id: backends never share an arena
  std::optional<int> session; ///< the runtime spec "session"
  const void* data = nullptr; ///< the load's named data map, used when session is empty
};

/// A session's state: one DeviceBlock and what resetting it rewrites.
class StateArena {
 public:
  DeviceBlock& block() const {
    return *block_;
  }
  /// The states bound so far, by name.
  const std::map<std::string, ArenaState>& states() const {
    return states_;
  }

 private:
  friend struct ResidencyAccess;
  std::unique_ptr<DeviceBlock> block_;
  std::string method_; // the method that created it, for messages
  std::map<std::string, ArenaState> states_;
  std::map<std::string, std::vector<uint8_t>> initial_; // the initial values, by state name
};

/**
 * The arena of `key` on device (type, index), `nbytes` long, holding
 * `states`: created on first use (zeros, then each state's initial value,
 * read from `source` by its initial_key), or the existing one, to which
 * states it does not know yet are added (each initial value written then,
 * the rest left as they are). `method` names the load in messages. The
 * arena lives while a returned pointer does.
 *
 * On failure returns the error, with why in `report`'s detail (when not
 * null):
 * InvalidProgram when the existing arena has another size or holds a state
 * of that name at another offset or size (methods of one program must
 * agree); DelegateInvalidCompatibility when an initial value has another
 * size than its state; `source`'s error (NotFound when `source` is null)
 * when an initial value is missing; with `verify`, InvalidProgram when an
 * initial value's bytes are not the ones its key names
 * (content_key_matches); DeviceBlock's errors for the allocation or a write.
 */
ET_NODISCARD executorch::runtime::Result<std::shared_ptr<StateArena>> acquire_arena(
    const ArenaKey& key, executorch::runtime::etensor::DeviceType type, executorch::runtime::etensor::DeviceIndex index,
    size_t nbytes, const std::vector<ArenaState>& states, const executorch::runtime::NamedDataMap* source,
    const std::string& method, FailureReport* report, bool verify = false);

/// Puts the arena of (owner, session) back to its start: zeros, then each
/// state's initial value, through counted h2d copies. NotFound when there
/// is none (nothing holding it is loaded); the copy's error otherwise.
ET_NODISCARD executorch::runtime::Error reset_arena(const std::string& owner, int session);

/// Bytes of the arena of (owner, session), 0 when there is none.
size_t arena_nbytes(const std::string& owner, int session);

} // namespace et_copy
