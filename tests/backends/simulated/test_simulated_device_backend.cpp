// SimulatedDeviceBackend's init/execute/destroy on the delegate records of
// tests/cpp/programs (make_programs.py): linear, acc, acc8. Registry state:
// the simulated allocator serves CUDA (2 devices); the backend is
// registered by one test; the global kernel registry is what the test links
// (nested methods run the wheel's kernels, loaded with the runtime).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <et_copy/delegate_record.h>
#include <et_copy/device_arguments.h>
#include <et_copy/log_capture.h>
#include <et_copy/device_residency.h>
#include <et_copy/log_capture.h>
#include <et_copy/registration.h>
#include <et_copy/sha256.h>
#include <et_copy/simulated_device_allocator.h>
#include <et_copy/simulated_device_backend.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/options.h>

#include "content_hash.h"
#include "external_tensors.h"
#include "flat_writer.h"
#include "named_blobs.h"
#include "program_bytes.h"
#include "test_tensors.h"

namespace {

using et_copy::DeviceAllocatorStats;
using et_copy::simulated_device_allocator;
using et_copy::simulated_device_backend;
using et_copy_test::TestTensor;
using executorch::aten::ScalarType;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendOption;
using executorch::runtime::BackendOptions;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::TensorLayout;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

std::vector<uint8_t> read_file(const std::string& name) {
  std::ifstream f(std::string(ET_COPY_TEST_PROGRAMS) + "/" + name, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing " << name << " (run tests/cpp/programs/make_programs.py)";
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<float> floats(const std::vector<uint8_t>& bytes, size_t first, size_t count) {
  std::vector<float> out(count);
  std::memcpy(out.data(), bytes.data() + first * sizeof(float), count * sizeof(float));
  return out;
}

// The outer program's named data: each content key of a fixture's record,
// from its .data file, counting reads.
class FixtureData final : public NamedDataMap {
 public:
  explicit FixtureData(const std::vector<uint8_t>& record) {
    const std::vector<uint8_t> data = read_file(name_of(record));
    auto r = et_copy::parse_delegate_record(record.data(), record.size());
    EXPECT_TRUE(r.ok());
    size_t at = 0;
    for (const auto& w : r->weights) {
      blobs_[w.key].assign(data.begin() + at, data.begin() + at + w.nbytes);
      at += w.nbytes;
    }
    for (const auto& s : r->states) {
      if (!s.initial_key.empty()) {
        blobs_[s.initial_key].assign(data.begin() + at, data.begin() + at + s.nbytes);
        at += s.nbytes;
      }
    }
    EXPECT_EQ(at, data.size());
  }
  Result<const TensorLayout> get_tensor_layout(std::string_view) const override {
    return Error::NotImplemented; // as a .pte's own named data answers
  }
  Result<FreeableBuffer> get_data(std::string_view key) const override {
    auto it = blobs_.find(std::string(key));
    if (it == blobs_.end()) {
      return Error::NotFound;
    }
    ++reads;
    return FreeableBuffer(it->second.data(), it->second.size(), nullptr);
  }
  Error load_data_into(std::string_view, void*, size_t) const override {
    return Error::NotImplemented;
  }
  Result<uint32_t> get_num_keys() const override {
    return static_cast<uint32_t>(blobs_.size());
  }
  Result<const char*> get_key(uint32_t i) const override {
    return std::next(blobs_.begin(), i)->first.c_str();
  }
  mutable int reads = 0;

 private:
  // The fixture whose record this is (its .data file), by the record's size.
  static std::string name_of(const std::vector<uint8_t>& record) {
    for (const char* name : {"linear", "acc", "acc8"}) {
      if (read_file(std::string(name) + ".record") == record) {
        return std::string(name) + ".data";
      }
    }
    ADD_FAILURE() << "not a fixture record";
    return "";
  }
  std::map<std::string, std::vector<uint8_t>> blobs_;
};

// Bytes on the simulated device, freed with the object.
struct DeviceBytes {
  DeviceBytes(size_t n, DeviceIndex index = 0) : nbytes(n), index(index) {
    ptr = *simulated_device_allocator().allocate(n, index);
  }
  ~DeviceBytes() {
    simulated_device_allocator().deallocate(ptr, index);
  }
  void put(const std::vector<float>& v) {
    ASSERT_EQ(simulated_device_allocator().copy_host_to_device(ptr, v.data(), v.size() * sizeof(float), index),
              Error::Ok);
  }
  std::vector<float> get() const {
    std::vector<float> v(nbytes / sizeof(float));
    EXPECT_EQ(simulated_device_allocator().copy_device_to_host(v.data(), ptr, nbytes, index), Error::Ok);
    return v;
  }
  size_t nbytes;
  DeviceIndex index;
  void* ptr;
};

TestTensor::Options on_device(DeviceIndex index = 0) {
  TestTensor::Options o;
  o.device = DeviceType::CUDA;
  o.index = index;
  return o;
}

// One delegate handle: the record (as `processed`), runtime specs, and the
// method name the outer program would give.
class Delegate {
 public:
  Delegate(const std::string& fixture, const NamedDataMap* data, std::map<std::string, int> specs = {},
           const char* method = "forward", const std::string& target_device = "")
      : record_(read_file(fixture + ".record")), target_device_(target_device) {
    init(data, specs, method);
  }
  // A record given as bytes (a fixture's, tampered with).
  Delegate(std::vector<uint8_t> record, const NamedDataMap* data, const char* method,
           const std::map<std::string, int>& specs = {})
      : record_(std::move(record)) {
    init(data, specs, method);
  }
  void init(const NamedDataMap* data, const std::map<std::string, int>& specs, const char* method) {
    BackendOptions<4> options;
    for (const auto& [k, v] : specs) {
      EXPECT_EQ(k == "session" ? options.set_option("session", v) : options.set_option("pool", v), Error::Ok);
    }
    options_ = options;
    const Span<BackendOption> view = options_.view();
    BackendInitContext context(&runtime_allocator_, nullptr, method, data,
                               Span<const BackendOption>(view.data(), view.size()));
    FreeableBuffer processed(
        record_.data(), record_.size(), [](void* ctx, void*, size_t) { *static_cast<bool*>(ctx) = true; }, &freed);
    // The compile spec a partitioner's DelegationSpec carries ("cuda:0").
    executorch::runtime::CompileSpec target{"target_device", {target_device_.data(), target_device_.size()}};
    auto h = simulated_device_backend().init(
        context, &processed,
        executorch::runtime::ArrayRef<executorch::runtime::CompileSpec>(&target, target_device_.empty() ? 0 : 1));
    error = h.ok() ? Error::Ok : h.error();
    handle_ = h.ok() ? *h : nullptr;
  }
  ~Delegate() {
    if (handle_ != nullptr) {
      simulated_device_backend().destroy(handle_);
    }
  }
  bool ok() const {
    return handle_ != nullptr;
  }
  Error execute(std::vector<EValue*> args) {
    BackendExecutionContext context;
    return simulated_device_backend().execute(context, handle_, Span<EValue*>(args.data(), args.size()));
  }
  // Runs a float32 input through, returning the output read back from the device.
  std::vector<float> run(const std::vector<float>& x, std::vector<int32_t> in_sizes, std::vector<int32_t> out_sizes,
                         Error* e = nullptr) {
    size_t out_n = 1;
    for (auto s : out_sizes) {
      out_n *= s;
    }
    DeviceBytes in(x.size() * sizeof(float)), out(out_n * sizeof(float));
    in.put(x);
    TestTensor tin(ScalarType::Float, in_sizes, in.ptr, on_device()),
        tout(ScalarType::Float, out_sizes, out.ptr, on_device());
    EValue ein(tin.t()), eout(tout.t());
    const Error err = execute({&ein, &eout});
    if (e != nullptr) {
      *e = err;
    }
    EXPECT_EQ(err, Error::Ok);
    return out.get();
  }
  bool freed = false;
  Error error = Error::Ok;

 private:
  std::vector<uint8_t> record_;
  std::string target_device_;
  BackendOptions<4> options_;
  executorch::extension::MallocMemoryAllocator runtime_allocator_;
  DelegateHandle* handle_ = nullptr;
};

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const char* what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5f) << "element " << i << " " << what;
  }
}

class SimulatedDeviceBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NE(et_copy::use_simulated_device(2), et_copy::Registration::kFailed);
  }
};

TEST_F(SimulatedDeviceBackendTest, RegistersOnceThenReportsItsOwn) {
  Error e = Error::Internal;
  EXPECT_EQ(et_copy::register_simulated_device_backend(&e), et_copy::Registration::kRegistered);
  EXPECT_EQ(e, Error::Ok);
  EXPECT_EQ(et_copy::register_simulated_device_backend(), et_copy::Registration::kAlreadyOurs);
  EXPECT_EQ(executorch::runtime::get_backend_class(et_copy::kSimulatedDeviceBackend), &simulated_device_backend());
}

TEST_F(SimulatedDeviceBackendTest, InitUploadsEachWeightOnceAndFreesProcessed) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  {
    Delegate d("linear", &data);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d.freed) << "init frees `processed` once it has its copy";
    const DeviceAllocatorStats after = simulated_device_allocator().stats();
    EXPECT_EQ(after.h2d_copies - before.h2d_copies, 2u) << "l.weight and l.bias, one counted copy each";
    EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, 60u);
    EXPECT_EQ(data.reads, 2);
    // Weights (48 + 12 bytes) and the nested program's one scratch buffer.
    EXPECT_EQ(after.live_allocations - before.live_allocations, 3u);
  }
  const DeviceAllocatorStats end = simulated_device_allocator().stats();
  EXPECT_EQ(end.bytes_outstanding, before.bytes_outstanding) << "destroy frees weights and scratch";
  EXPECT_EQ(end.live_allocations, before.live_allocations);
}

TEST_F(SimulatedDeviceBackendTest, TwoHandlesShareTheWeights) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  Delegate first("linear", &data);
  ASSERT_TRUE(first.ok());
  const DeviceAllocatorStats mid = simulated_device_allocator().stats();
  Delegate second("linear", &data);
  ASSERT_TRUE(second.ok());
  const DeviceAllocatorStats after = simulated_device_allocator().stats();
  EXPECT_EQ(after.h2d_copies, mid.h2d_copies) << "the weight cache holds both";
  EXPECT_EQ(data.reads, 2) << "named data read once";
  EXPECT_EQ(after.live_allocations - mid.live_allocations, 1u) << "only its own scratch (no pool spec)";
}

TEST_F(SimulatedDeviceBackendTest, HandlesOfOnePoolShareTheScratch) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  Delegate first("linear", &data, {{"pool", 41}});
  const DeviceAllocatorStats mid = simulated_device_allocator().stats();
  Delegate second("linear", &data, {{"pool", 41}});
  EXPECT_EQ(simulated_device_allocator().stats().live_allocations, mid.live_allocations);
  Delegate other_pool("linear", &data, {{"pool", 42}});
  EXPECT_EQ(simulated_device_allocator().stats().live_allocations, mid.live_allocations + 1);
  ASSERT_TRUE(first.ok() && second.ok() && other_pool.ok());
}

TEST_F(SimulatedDeviceBackendTest, ExecuteEqualsEagerWithoutCopying) {
  const auto record = read_file("linear.record");
  const auto io = read_file("linear.io");
  FixtureData data(record);
  Delegate d("linear", &data);
  ASSERT_TRUE(d.ok());
  // Input 2x4, then the eager output 2x3.
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  DeviceBytes in(8 * sizeof(float)), out(6 * sizeof(float));
  in.put(floats(io, 0, 8));
  TestTensor tin(ScalarType::Float, {2, 4}, in.ptr, on_device()), tout(ScalarType::Float, {2, 3}, out.ptr, on_device());
  EValue ein(tin.t()), eout(tout.t());
  const DeviceAllocatorStats mid = simulated_device_allocator().stats();
  ASSERT_EQ(d.execute({&ein, &eout}), Error::Ok);
  const DeviceAllocatorStats after = simulated_device_allocator().stats();
  EXPECT_EQ(after.h2d_copies, mid.h2d_copies);
  EXPECT_EQ(after.d2h_copies, mid.d2h_copies);
  EXPECT_EQ(after.allocations, mid.allocations);
  expect_near(out.get(), floats(io, 8, 6));
  (void)before;
}

TEST_F(SimulatedDeviceBackendTest, HostTensorArgumentIsRefused) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  Delegate d("linear", &data);
  ASSERT_TRUE(d.ok());
  std::vector<float> host(8, 1.0f);
  DeviceBytes out(6 * sizeof(float));
  TestTensor tin(ScalarType::Float, {2, 4}, host.data()), tout(ScalarType::Float, {2, 3}, out.ptr, on_device());
  EValue ein(tin.t()), eout(tout.t());
  EXPECT_EQ(d.execute({&ein, &eout}), Error::InvalidArgument);
  // Tagged CUDA but pointing at host memory: refused too.
  TestTensor liar(ScalarType::Float, {2, 4}, host.data(), on_device());
  EValue eliar(liar.t());
  EXPECT_EQ(d.execute({&eliar, &eout}), Error::InvalidArgument);
  // A host output.
  DeviceBytes in(8 * sizeof(float));
  std::vector<float> host_out(6);
  TestTensor din(ScalarType::Float, {2, 4}, in.ptr, on_device()), hout(ScalarType::Float, {2, 3}, host_out.data());
  EValue edin(din.t()), ehout(hout.t());
  EXPECT_EQ(d.execute({&edin, &ehout}), Error::InvalidArgument);
  EXPECT_EQ(d.execute({&edin}), Error::InvalidArgument) << "argument count";
}

TEST_F(SimulatedDeviceBackendTest, AnOutputThatIsNotATensorOrOfAnotherDtypeIsRefused) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  Delegate d("linear", &data);
  ASSERT_TRUE(d.ok());
  DeviceBytes in(8 * sizeof(float)), out(6 * sizeof(float));
  TestTensor tin(ScalarType::Float, {2, 4}, in.ptr, on_device()), tout(ScalarType::Float, {2, 3}, out.ptr, on_device());
  EValue ein(tin.t()), eout(tout.t()), number(int64_t(3));
  // The nested method writes its output by pointer: an int in the output slot has none.
  EXPECT_EQ(d.execute({&ein, &number}), Error::InvalidArgument);
  // The nested output is float32: an int32 output of the same size would get its bits.
  TestTensor tint(ScalarType::Int, {2, 3}, out.ptr, on_device());
  EValue eint(tint.t());
  EXPECT_EQ(d.execute({&ein, &eint}), Error::InvalidArgument);
  EXPECT_EQ(d.execute({&ein, &eout}), Error::Ok);
}

TEST_F(SimulatedDeviceBackendTest, DeviceIndexMismatchIsRefused) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  Delegate d("linear", &data);
  ASSERT_TRUE(d.ok());
  DeviceBytes in(8 * sizeof(float), 1), out(6 * sizeof(float));
  TestTensor tin(ScalarType::Float, {2, 4}, in.ptr, on_device(1)),
      tout(ScalarType::Float, {2, 3}, out.ptr, on_device());
  EValue ein(tin.t()), eout(tout.t());
  EXPECT_EQ(d.execute({&ein, &eout}), Error::InvalidArgument);
  // Device 0 in the metadata, memory of device 1.
  TestTensor lying(ScalarType::Float, {2, 4}, in.ptr, on_device(0));
  EValue elying(lying.t());
  EXPECT_EQ(d.execute({&elying, &eout}), Error::InvalidArgument);
}

TEST_F(SimulatedDeviceBackendTest, StateIsKeptAcrossExecutesAndResetRestoresTheStart) {
  const auto record = read_file("acc.record");
  const auto io = read_file("acc.io"); // x1, x2, y1, y2 (4 floats each)
  FixtureData data(record);
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  Delegate d("acc", &data, {{"session", 101}});
  ASSERT_TRUE(d.ok());
  // w (16 bytes), then the arena: zeros and acc's initial value, all counted.
  EXPECT_EQ(simulated_device_allocator().stats().h2d_copies - before.h2d_copies, 3u);
  EXPECT_EQ(et_copy::simulated_device_state_nbytes(101), 16u);
  expect_near(d.run(floats(io, 0, 4), {4}, {4}), floats(io, 8, 4));
  expect_near(d.run(floats(io, 4, 4), {4}, {4}), floats(io, 12, 4));
  ASSERT_EQ(et_copy::reset_simulated_device_state(101), Error::Ok);
  expect_near(d.run(floats(io, 0, 4), {4}, {4}), floats(io, 8, 4));
  EXPECT_EQ(et_copy::reset_simulated_device_state(999), Error::NotFound);
}

TEST_F(SimulatedDeviceBackendTest, MethodsOfOneSessionShareTheArena) {
  const auto record = read_file("acc.record");
  const auto io = read_file("acc.io");
  FixtureData data(record);
  Delegate prefill("acc", &data, {{"session", 102}}, "prefill");
  Delegate decode("acc", &data, {{"session", 102}}, "decode");
  ASSERT_TRUE(prefill.ok() && decode.ok());
  expect_near(prefill.run(floats(io, 0, 4), {4}, {4}), floats(io, 8, 4));
  expect_near(decode.run(floats(io, 4, 4), {4}, {4}), floats(io, 12, 4), "decode sees prefill's update");
}

TEST_F(SimulatedDeviceBackendTest, TwoSessionsDoNotShareState) {
  const auto record = read_file("acc.record");
  const auto io = read_file("acc.io");
  FixtureData data(record);
  Delegate a("acc", &data, {{"session", 103}, {"pool", 7}});
  Delegate b("acc", &data, {{"session", 104}, {"pool", 7}});
  ASSERT_TRUE(a.ok() && b.ok());
  expect_near(a.run(floats(io, 0, 4), {4}, {4}), floats(io, 8, 4));
  expect_near(b.run(floats(io, 0, 4), {4}, {4}), floats(io, 8, 4), "b starts from the start, not a's state");
  expect_near(a.run(floats(io, 4, 4), {4}, {4}), floats(io, 12, 4));
}

TEST_F(SimulatedDeviceBackendTest, WithoutASessionTheArenaIsPerNamedDataMap) {
  const auto record = read_file("acc.record");
  const auto io = read_file("acc.io");
  FixtureData one(record), two(record);
  Delegate a("acc", &one, {}, "prefill");
  Delegate b("acc", &one, {}, "decode");
  Delegate c("acc", &two);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  expect_near(a.run(floats(io, 0, 4), {4}, {4}), floats(io, 8, 4));
  expect_near(b.run(floats(io, 4, 4), {4}, {4}), floats(io, 12, 4), "one map: one arena");
  expect_near(c.run(floats(io, 0, 4), {4}, {4}), floats(io, 8, 4), "another map: its own");
}

TEST_F(SimulatedDeviceBackendTest, MismatchedArenaSizeIsRefused) {
  const auto record = read_file("acc.record");
  const auto record8 = read_file("acc8.record");
  FixtureData data(record), data8(record8);
  Delegate a("acc", &data, {{"session", 105}}, "prefill");
  ASSERT_TRUE(a.ok());
  Delegate b("acc8", &data8, {{"session", 105}}, "decode");
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.error, Error::InvalidProgram);
}

TEST_F(SimulatedDeviceBackendTest, StateIsFreedWithTheLastHandle) {
  const auto record = read_file("acc.record");
  FixtureData data(record);
  {
    Delegate a("acc", &data, {{"session", 106}});
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(et_copy::simulated_device_state_nbytes(106), 16u);
  }
  EXPECT_EQ(et_copy::simulated_device_state_nbytes(106), 0u);
}

// A partition's target_device must name the record's device; cuda:0 may be
// written "cuda" (with_target_device's default form). Another is refused.
TEST_F(SimulatedDeviceBackendTest, TargetDeviceMustNameTheRecordsDevice) {
  const auto record = read_file("acc.record"); // device cuda 0
  FixtureData data(record);
  for (const char* same : {"cuda:0", "cuda"}) {
    Delegate d("acc", &data, {{"session", 120}}, "forward", same);
    EXPECT_TRUE(d.ok()) << same;
  }
  for (const char* other : {"cuda:1", "cpu"}) {
    Delegate d("acc", &data, {{"session", 121}}, "forward", other);
    EXPECT_EQ(d.error, Error::DelegateInvalidCompatibility) << other;
  }
}

TEST_F(SimulatedDeviceBackendTest, ABadRecordIsInvalidCompatibility) {
  executorch::extension::MallocMemoryAllocator alloc;
  BackendInitContext context(&alloc, nullptr, "forward", nullptr);
  std::string garbage = "et_copy.delegate 2\ndevice\tcuda\t0\npayload\tprogram\t4\nnope";
  FreeableBuffer processed(garbage.data(), garbage.size(), nullptr);
  auto h = simulated_device_backend().init(context, &processed, {});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error(), Error::DelegateInvalidCompatibility);
}

TEST_F(SimulatedDeviceBackendTest, AnAotiPayloadIsRefusedByName) {
  executorch::extension::MallocMemoryAllocator alloc;
  BackendInitContext context(&alloc, nullptr, "forward", nullptr);
  // Without the aoti kind's own lines (target, io, digest): their reader is et_copy_aoti's too.
  std::string aoti = "et_copy.delegate 2\ndevice\tcuda\t0\npayload\taoti\t4\nELF!";
  FreeableBuffer processed(aoti.data(), aoti.size(), nullptr);
  et_copy::LogCapture log;
  auto h = simulated_device_backend().init(context, &processed, {});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error(), Error::DelegateInvalidCompatibility);
  std::string all;
  for (const auto& line : log.lines()) {
    all += line + "\n";
  }
  // The core parser knows the aoti kind only once et_copy_aoti (not linked here) adds it.
  EXPECT_NE(all.find("payload kind 'aoti' is not program"), std::string::npos) << all;
}

TEST_F(SimulatedDeviceBackendTest, AMissingWeightIsNotFound) {
  // The record's weight keys are not in this (empty) named data.
  const auto record = read_file("linear.record");
  FixtureData full(record);
  class Empty final : public NamedDataMap {
    Result<const TensorLayout> get_tensor_layout(std::string_view) const override {
      return Error::NotFound;
    }
    Result<FreeableBuffer> get_data(std::string_view) const override {
      return Error::NotFound;
    }
    Error load_data_into(std::string_view, void*, size_t) const override {
      return Error::NotFound;
    }
    Result<uint32_t> get_num_keys() const override {
      return 0;
    }
    Result<const char*> get_key(uint32_t) const override {
      return Error::NotFound;
    }
  } empty;
  // A fresh content key space: the cache is empty once `full`'s handles are gone.
  Delegate d("linear", &empty);
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.error, Error::NotFound);
}

// FNV-1a keys the pool's scratch by nested program: the published 64-bit
// vectors, and a hash of every byte (the first and the last included).
TEST(ContentHash, IsFnv1a64OverEveryByte) {
  const auto hash = [](const std::string& s) {
    return et_copy::internal::fnv1a64(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  EXPECT_EQ(hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(hash("foobar"), 0x85944171f73967e8ull);
  // 64 bytes that differ only in the first, or only in the last.
  std::string base(64, 'x'), first = base, last = base;
  first[0] = 'y';
  last[63] = 'y';
  EXPECT_NE(hash(first), hash(base));
  EXPECT_NE(hash(last), hash(base));
}

using Blobs = et_copy_test::NamedBlobs;

std::vector<uint8_t> bytes_of(const et_copy::DeviceBlock& b) {
  return std::vector<uint8_t>(b.host_alias(), b.host_alias() + b.nbytes());
}

std::vector<uint8_t> runs(std::vector<std::pair<size_t, uint8_t>> parts) {
  std::vector<uint8_t> v;
  for (const auto& [n, byte] : parts) {
    v.insert(v.end(), n, byte);
  }
  return v;
}

constexpr const char* kOwner = "residency-test";

// A state's initial value must be exactly its size: one byte short or over
// is refused, naming both sizes, and leaves no arena; a missing one is
// NotFound. The exact size is written at the state's offset, zeros around.
TEST_F(SimulatedDeviceBackendTest, AnArenaTakesAnInitialValueOfExactlyItsStatesSize) {
  const std::vector<et_copy::ArenaState> states{{"s", 8, 16, "init"}};
  int session = 600;
  for (size_t n : {15u, 17u}) {
    Blobs data;
    data.blobs["init"] = std::vector<uint8_t>(n, 7);
    et_copy::FailureReport report;
    auto a = et_copy::acquire_arena({kOwner, ++session, nullptr}, DeviceType::CUDA, 0, 32, states, &data, "m", &report);
    ASSERT_FALSE(a.ok()) << n;
    EXPECT_EQ(a.error(), Error::DelegateInvalidCompatibility);
    EXPECT_EQ(report.detail, "state 's': the initial value 'init' is " + std::to_string(n) + " bytes, not 16");
    EXPECT_EQ(et_copy::arena_nbytes(kOwner, session), 0u) << "a refused load leaves no arena";
  }
  Blobs none;
  et_copy::FailureReport report;
  auto missing =
      et_copy::acquire_arena({kOwner, ++session, nullptr}, DeviceType::CUDA, 0, 32, states, &none, "m", &report);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), Error::NotFound);
  EXPECT_EQ(report.detail, "state 's': the initial value 'init' is not in the program's named data");
  auto no_source =
      et_copy::acquire_arena({kOwner, ++session, nullptr}, DeviceType::CUDA, 0, 32, states, nullptr, "m", nullptr);
  EXPECT_EQ(no_source.error(), Error::NotFound);

  Blobs data;
  data.blobs["init"] = std::vector<uint8_t>(16, 7);
  auto a = et_copy::acquire_arena({kOwner, ++session, nullptr}, DeviceType::CUDA, 0, 32, states, &data, "m", &report);
  ASSERT_TRUE(a.ok()) << report.detail;
  EXPECT_EQ(bytes_of((*a)->block()), runs({{8, 0}, {16, 7}, {8, 0}}));
}

// A method bound to an arena in use adds the states it does not know, each
// with its initial value, and leaves the others as the run left them;
// a reset then writes every state's start.
TEST_F(SimulatedDeviceBackendTest, AStateNewToAnArenaInUseGetsItsInitialValueAndTheRestAreLeft) {
  Blobs data;
  data.blobs["a0"] = std::vector<uint8_t>(8, 1);
  data.blobs["b0"] = std::vector<uint8_t>(8, 2);
  const et_copy::ArenaKey key{kOwner, 700, nullptr};
  et_copy::FailureReport report;
  auto first = et_copy::acquire_arena(key, DeviceType::CUDA, 0, 32, {{"a", 0, 8, "a0"}}, &data, "prefill", &report);
  ASSERT_TRUE(first.ok()) << report.detail;
  EXPECT_EQ(bytes_of((*first)->block()), runs({{8, 1}, {24, 0}}));
  const std::vector<uint8_t> ran(8, 9); // what a run left in a's bytes
  ASSERT_EQ((*first)->block().write(0, ran.data(), ran.size()), Error::Ok);
  auto second = et_copy::acquire_arena(key, DeviceType::CUDA, 0, 32,
                                       {{"a", 0, 8, "a0"}, {"b", 8, 8, "b0"}, {"c", 16, 8, ""}, {"d", 24, 8, "b0"}},
                                       &data, "decode", &report);
  ASSERT_TRUE(second.ok()) << report.detail;
  EXPECT_EQ(second->get(), first->get()) << "one arena per session";
  EXPECT_EQ((*second)->states().size(), 4u);
  EXPECT_EQ(bytes_of((*second)->block()), runs({{8, 9}, {8, 2}, {8, 0}, {8, 2}}));
  ASSERT_EQ(et_copy::reset_arena(kOwner, 700), Error::Ok);
  EXPECT_EQ(bytes_of((*second)->block()), runs({{8, 1}, {8, 2}, {8, 0}, {8, 2}}));
}

// A content key names one weight: a load that finds the key uploaded
// shares it at the same size, and is refused at another size, naming both,
// before anything is read or uploaded (one byte short or over).
TEST_F(SimulatedDeviceBackendTest, AWeightAlreadyUploadedIsSharedAtItsSizeAndRefusedAtAnother) {
  Blobs data;
  data.blobs["et_copy.test:w"] = std::vector<uint8_t>(16, 3);
  et_copy::FailureReport report;
  auto first = et_copy::acquire_weight("et_copy.test:w", DeviceType::CUDA, 0, 16, &data, std::nullopt, &report);
  ASSERT_TRUE(first.ok()) << report.detail;
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  auto again = et_copy::acquire_weight("et_copy.test:w", DeviceType::CUDA, 0, 16, &data, std::nullopt, &report);
  ASSERT_TRUE(again.ok()) << report.detail;
  EXPECT_EQ(again->get(), first->get()) << "one upload per key";
  for (size_t n : {15u, 17u}) {
    Blobs sized;
    sized.blobs["et_copy.test:w"] =
        std::vector<uint8_t>(n, 4); // the source agrees with the record: only the cache tells
    auto other = et_copy::acquire_weight("et_copy.test:w", DeviceType::CUDA, 0, n, &sized, std::nullopt, &report);
    ASSERT_FALSE(other.ok()) << n;
    EXPECT_EQ(other.error(), Error::DelegateInvalidCompatibility);
    EXPECT_EQ(report.detail, "content key 'et_copy.test:w' names " + std::to_string(n) +
                                 " bytes here and 16 bytes in a weight already uploaded");
  }
  const DeviceAllocatorStats after = simulated_device_allocator().stats();
  EXPECT_EQ(after.h2d_copies, before.h2d_copies) << "neither the shared nor the refused weight is uploaded";
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(bytes_of(**first), std::vector<uint8_t>(16, 3));
}

// A verified upload: the bytes must hash to the key's digest (its hex after
// the last ':', at least 32 digits); they are hashed as they are copied, in
// 1 MiB pieces. A weight cached by an unverified load is uploaded again for
// a verified one, and a mismatch caches nothing.
TEST_F(SimulatedDeviceBackendTest, AVerifiedWeightMustHashToItsKeyAndAnUnverifiedOneIsUploadedAgain) {
  std::vector<uint8_t> bytes((size_t{1} << 20) + 3); // two pieces, the second short
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  const std::string digest = et_copy::Sha256::hex(et_copy::Sha256::of(bytes.data(), bytes.size()));
  const std::string key = "et_copy.weight:" + digest.substr(0, 32);
  EXPECT_TRUE(et_copy::content_key_matches(key, digest));
  EXPECT_TRUE(et_copy::content_key_matches(digest, digest)) << "no prefix, all 64 digits";
  EXPECT_FALSE(et_copy::content_key_matches("et_copy.weight:" + digest.substr(0, 31), digest)) << "too short to say";
  EXPECT_FALSE(et_copy::content_key_matches("et_copy.weight:" + digest.substr(1, 32), digest));
  EXPECT_FALSE(et_copy::content_key_matches("et_copy.weight:" + digest.substr(0, 31) + "G", digest));
  Blobs data;
  data.blobs[key] = bytes;
  et_copy::FailureReport report;
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  auto unverified = et_copy::acquire_weight(key, DeviceType::CUDA, 0, bytes.size(), &data, std::nullopt, &report);
  ASSERT_TRUE(unverified.ok()) << report.detail;
  auto verified =
      et_copy::acquire_weight(key, DeviceType::CUDA, 0, bytes.size(), &data, std::nullopt, &report, /*verify=*/true);
  ASSERT_TRUE(verified.ok()) << report.detail;
  EXPECT_NE(verified->get(), unverified->get()) << "uploaded again, verified";
  EXPECT_EQ(bytes_of(**verified), bytes);
  const DeviceAllocatorStats mid = simulated_device_allocator().stats();
  EXPECT_EQ(mid.h2d_copies - before.h2d_copies, 1u + 2u) << "one copy, then two pieces";
  auto shared =
      et_copy::acquire_weight(key, DeviceType::CUDA, 0, bytes.size(), &data, std::nullopt, &report, /*verify=*/true);
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(shared->get(), verified->get()) << "a verified weight is shared with the next verified load";
  EXPECT_EQ(simulated_device_allocator().stats().h2d_copies, mid.h2d_copies);

  Blobs flipped;
  const std::string other = "et_copy.weight:" + std::string(32, '0');
  flipped.blobs[other] = bytes;
  auto refused =
      et_copy::acquire_weight(other, DeviceType::CUDA, 0, bytes.size(), &flipped, std::nullopt, &report, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), Error::InvalidProgram);
  EXPECT_EQ(report.detail,
            "named data '" + other + "' hashes to " + digest.substr(0, 32) + ", not its key: the data is corrupted");
  auto unchecked = et_copy::acquire_weight(other, DeviceType::CUDA, 0, bytes.size(), &flipped, std::nullopt, &report);
  ASSERT_TRUE(unchecked.ok()) << "nothing was cached by the refusal; unverified, the bytes load";
}

// A verified arena's initial values hash to their keys; a mismatch leaves
// no arena behind.
TEST_F(SimulatedDeviceBackendTest, AVerifiedArenasInitialValueMustHashToItsKey) {
  const std::vector<uint8_t> start(16, 9);
  const std::string digest = et_copy::Sha256::hex(et_copy::Sha256::of(start.data(), start.size()));
  Blobs data;
  data.blobs["et_copy.state:" + digest.substr(0, 32)] = start;
  data.blobs["et_copy.state:" + std::string(32, 'f')] = start;
  et_copy::FailureReport report;
  const et_copy::ArenaKey key{"verify-test", 41, nullptr};
  auto bad = et_copy::acquire_arena(key, DeviceType::CUDA, 0, 16,
                                    {et_copy::ArenaState{"s", 0, 16, "et_copy.state:" + std::string(32, 'f')}}, &data,
                                    "forward", &report, /*verify=*/true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), Error::InvalidProgram);
  EXPECT_EQ(report.detail, "state 's': the initial value 'et_copy.state:" + std::string(32, 'f') +
                               "' hashes to another key: the data is corrupted");
  EXPECT_EQ(et_copy::arena_nbytes("verify-test", 41), 0u);
  auto good = et_copy::acquire_arena(key, DeviceType::CUDA, 0, 16,
                                     {et_copy::ArenaState{"s", 0, 16, "et_copy.state:" + digest.substr(0, 32)}}, &data,
                                     "forward", &report, /*verify=*/true);
  ASSERT_TRUE(good.ok()) << report.detail;
  EXPECT_EQ(bytes_of((*good)->block()), start);
}

// DeviceBlock::write at both sides of each bound: the range may end at the
// block's end, not one byte past it (nor wrap around size_t); an empty write
// within the block, an empty block's included, makes no copy.
TEST_F(SimulatedDeviceBackendTest, ADeviceBlockWritesUpToItsEndAndNoFurther) {
  auto b = et_copy::DeviceBlock::create(DeviceType::CUDA, 0, 12);
  ASSERT_TRUE(b.ok());
  const std::vector<uint8_t> src(13, 5);
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  EXPECT_EQ((*b)->write(0, src.data(), 12), Error::Ok);
  EXPECT_EQ((*b)->write(11, src.data(), 1), Error::Ok);
  EXPECT_EQ((*b)->write(0, src.data(), 13), Error::InvalidArgument);
  EXPECT_EQ((*b)->write(1, src.data(), 12), Error::InvalidArgument);
  EXPECT_EQ((*b)->write(12, src.data(), 1), Error::InvalidArgument);
  EXPECT_EQ((*b)->write(13, src.data(), 0), Error::InvalidArgument);
  EXPECT_EQ((*b)->write(2, src.data(), SIZE_MAX), Error::InvalidArgument);
  EXPECT_EQ((*b)->write(SIZE_MAX, src.data(), 2), Error::InvalidArgument);
  EXPECT_EQ((*b)->write(12, src.data(), 0), Error::Ok);
  EXPECT_EQ((*b)->write(5, src.data(), 0), Error::Ok);
  auto empty = et_copy::DeviceBlock::create(DeviceType::CUDA, 0, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->device(), nullptr);
  EXPECT_EQ((*empty)->write(0, src.data(), 0), Error::Ok);
  EXPECT_EQ((*empty)->write(0, src.data(), 1), Error::InvalidArgument);
  EXPECT_EQ(simulated_device_allocator().stats().live_allocations, before.live_allocations) << "empty takes none";
  auto one = et_copy::DeviceBlock::create(DeviceType::CUDA, 0, 1); // the smallest block that takes memory
  ASSERT_TRUE(one.ok());
  EXPECT_NE((*one)->device(), nullptr);
  EXPECT_EQ((*one)->nbytes(), 1u);
  EXPECT_EQ(simulated_device_allocator().stats().live_allocations, before.live_allocations + 1);
  EXPECT_EQ((*one)->write(0, src.data(), 1), Error::Ok);
  EXPECT_EQ((*one)->write(0, src.data(), 2), Error::InvalidArgument);
  const DeviceAllocatorStats after = simulated_device_allocator().stats();
  EXPECT_EQ(after.h2d_copies - before.h2d_copies, 3u) << "the three non-empty writes in range, no others";
  EXPECT_EQ(after.h2d_bytes - before.h2d_bytes, 14u);
  EXPECT_EQ(after.failed_calls, before.failed_calls);
  EXPECT_EQ(bytes_of(**b), std::vector<uint8_t>(12, 5));
  EXPECT_EQ(bytes_of(**one), std::vector<uint8_t>(1, 5));
}

// DeviceBlock::create takes device memory only from the allocator serving
// the device: the host is no device (NotSupported), and a device nobody
// serves yet is NotFound. Run in a fresh process (the binary re-run for
// this test alone), where nothing is registered; served, it allocates.
TEST(DeviceBlockDeathTest, TheHostIsNoDeviceAndADeviceNobodyServesIsNotFound) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto exit_code = [](DeviceType type) {
    auto b = et_copy::DeviceBlock::create(type, 0, 8);
    std::exit(b.ok() ? 100 : static_cast<int>(b.error()));
  };
  EXPECT_EXIT(exit_code(DeviceType::CUDA), ::testing::ExitedWithCode(static_cast<int>(Error::NotFound)), "");
  EXPECT_EXIT(exit_code(DeviceType::CPU), ::testing::ExitedWithCode(static_cast<int>(Error::NotSupported)), "");
  EXPECT_EXIT(
      {
        if (et_copy::use_simulated_device() == et_copy::Registration::kFailed) {
          std::exit(101);
        }
        exit_code(DeviceType::CUDA);
      },
      ::testing::ExitedWithCode(100), "");
}

TEST_F(SimulatedDeviceBackendTest, ADeviceBlockOnTheHostIsNotSupportedWhateverItsSize) {
  for (size_t n : {0u, 8u}) {
    auto b = et_copy::DeviceBlock::create(DeviceType::CPU, 0, n);
    ASSERT_FALSE(b.ok()) << n;
    EXPECT_EQ(b.error(), Error::NotSupported) << n;
  }
}

// A weight not uploaded yet is read from the program's named data: with
// none, NotFound naming the key, and nothing is allocated; once uploaded,
// a load without named data shares it.
TEST_F(SimulatedDeviceBackendTest, AWeightNotUploadedYetNeedsNamedDataAndOneUploadedDoesNot) {
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  et_copy::FailureReport report;
  auto none = et_copy::acquire_weight("et_copy.test:unread", DeviceType::CUDA, 0, 8, nullptr, std::nullopt, &report);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error(), Error::NotFound);
  EXPECT_EQ(report.detail, "the program has no named data to read 'et_copy.test:unread' from");
  const DeviceAllocatorStats after = simulated_device_allocator().stats();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.h2d_copies, before.h2d_copies);

  Blobs data;
  data.blobs["et_copy.test:read"] = std::vector<uint8_t>(8, 6);
  auto first = et_copy::acquire_weight("et_copy.test:read", DeviceType::CUDA, 0, 8, &data, std::nullopt, &report);
  ASSERT_TRUE(first.ok()) << report.detail;
  auto shared = et_copy::acquire_weight("et_copy.test:read", DeviceType::CUDA, 0, 8, nullptr, std::nullopt, &report);
  ASSERT_TRUE(shared.ok()) << report.detail;
  EXPECT_EQ(shared->get(), first->get());
  EXPECT_EQ(bytes_of(**shared), std::vector<uint8_t>(8, 6));
}

// What external_tensors() reads of linear.record's nested program: each
// constant stored outside it, with its layout. A type ExecuTorch does not
// know and a negative size are refused (elementSize would abort on the
// one, a layout would be sized from the other); a size of 0 is a size.
TEST(ExternalTensors, AnUnknownScalarTypeOrANegativeSizeIsRefusedAndZeroIsASize) {
  const auto record = read_file("linear.record");
  auto r = et_copy::parse_delegate_record(record.data(), record.size());
  ASSERT_TRUE(r.ok());
  const std::vector<uint8_t> original(r->payload, r->payload + r->payload_nbytes);
  std::vector<uint8_t> nested = original;
  et_copy_test::Flat f{nested};
  const size_t values = f.follow(f.field(f.plan(), 2));
  size_t tensor = 0;
  for (uint32_t v = 0; v < f.u32(values) && tensor == 0; ++v) {
    const size_t value = f.element(values, v);
    const size_t t = nested[f.field(value, 0)] == 5 ? f.follow(f.field(value, 1)) : 0;
    if (t != 0 && f.field(t, 9) != 0 && f.field(t, 6) == 0 && nested[f.field(f.follow(f.field(t, 9)), 2)] == 1) {
      tensor = t; // an external constant: extra info EXTERNAL, no allocation info
    }
  }
  ASSERT_NE(tensor, 0u) << "linear's weights are external constants";
  auto all = et_copy::internal::external_tensors(nested.data(), nested.size());
  ASSERT_TRUE(all.ok());
  ASSERT_FALSE(all->empty());
  const auto first = all->front();
  EXPECT_EQ(first.scalar_type, ScalarType::Float);
  ASSERT_FALSE(first.sizes.empty());
  EXPECT_GT(first.sizes[0], 0);

  const size_t type_at = f.field(tensor, 0);
  const size_t size0_at = f.follow(f.field(tensor, 2)) + 4;
  ASSERT_NE(type_at, 0u);
  nested[type_at] = 127;
  auto unknown = et_copy::internal::external_tensors(nested.data(), nested.size());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error(), Error::InvalidProgram);
  for (const int32_t size : {-1, 0}) {
    nested = original;
    std::memcpy(nested.data() + size0_at, &size, 4);
    auto sized = et_copy::internal::external_tensors(nested.data(), nested.size());
    ASSERT_EQ(sized.ok(), size == 0) << size;
    if (size < 0) {
      EXPECT_EQ(sized.error(), Error::InvalidProgram);
    } else {
      EXPECT_EQ(sized->size(), all->size());
      EXPECT_EQ(sized->front().sizes[0], 0) << "read as it is";
    }
  }
}

// One tensor value of a hand-built program (external_program).
struct HandTensor {
  std::string fqn;        // extra_tensor_info's fully_qualified_name ("": no extra_tensor_info)
  uint8_t location = 1;   // ... and its location (1: EXTERNAL)
  bool planned = false;   // has allocation_info
  int8_t scalar_type = 6; // Float
  std::vector<int32_t> sizes = {2, 3};
  std::vector<uint8_t> dim_order = {0, 1};
  uint8_t tag = 5;   // the EValue's kind: 5 a Tensor, 2 an Int (no table)
  bool table = true; // a Tensor's table present
};

// A program whose execution plans hold `plans`' values, in order.
std::vector<uint8_t> external_program(const std::vector<std::vector<HandTensor>>& plans) {
  et_copy_test::FlatWriter f;
  const size_t program = f.table(2);
  f.root(program);
  const size_t plans_at = f.vector(program, 1, static_cast<uint32_t>(plans.size()));
  for (size_t p = 0; p < plans.size(); ++p) {
    const size_t plan = f.table(3);
    f.link(plans_at + 4 * p, plan);
    const size_t values = f.vector(plan, 2, static_cast<uint32_t>(plans[p].size()));
    for (size_t v = 0; v < plans[p].size(); ++v) {
      const HandTensor& t = plans[p][v];
      const size_t e = f.table(2);
      f.link(values + 4 * v, e);
      f.scalar(e, 0, t.tag);
      if (t.tag != 5 || !t.table) {
        continue;
      }
      const size_t table = f.table(10);
      f.link(f.field(e, 1), table);
      f.scalar(table, 0, t.scalar_type);
      f.values<int32_t>(table, 2, t.sizes);
      f.values<uint8_t>(table, 3, t.dim_order);
      if (t.planned) {
        const size_t allocation = f.table(3);
        f.link(f.field(table, 6), allocation);
        f.scalar(allocation, 0, 1);
      }
      if (!t.fqn.empty()) {
        const size_t extra = f.table(5);
        f.link(f.field(table, 9), extra);
        f.string(extra, 1, t.fqn);
        f.scalar(extra, 2, t.location);
      }
    }
  }
  return f.bytes();
}

std::vector<std::string> fqns_of(const std::vector<et_copy::internal::ExternalTensor>& tensors) {
  std::vector<std::string> out;
  for (const auto& t : tensors) {
    out.push_back(t.fqn);
  }
  return out;
}

// Every EXTERNAL unplanned tensor of every plan, from the first value of the
// first plan to the last of the last, once per name (the first met wins):
// not a planned one, one stored in the program, one with no metadata, nor a
// value of another kind.
TEST(ExternalTensors, EachUnplannedExternalTensorOfEveryPlanIsReadOncePerName) {
  HandTensor a{"a"}, b{"b"}, again{"a"}, planned{"planned"}, inside{"inside"}, bare, number, last{"last"};
  b.scalar_type = 4; // Long
  b.sizes = {4};
  b.dim_order = {0};
  again.sizes = {9};
  planned.planned = true;
  inside.location = 0; // SEGMENT: in the program
  number.tag = 2;
  HandTensor tableless{"tableless"}; // a Tensor value with no Tensor table: ExecuTorch's to refuse
  tableless.table = false;
  const auto bytes = external_program({{a, planned, inside, bare, number, tableless, b, again}, {last}});
  auto all = et_copy::internal::external_tensors(bytes.data(), bytes.size());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(fqns_of(*all), (std::vector<std::string>{"a", "b", "last"}));
  EXPECT_EQ((*all)[0].scalar_type, ScalarType::Float);
  EXPECT_EQ((*all)[0].sizes, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ((*all)[0].dim_order, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ((*all)[1].scalar_type, ScalarType::Long);
  EXPECT_EQ((*all)[1].sizes, (std::vector<int32_t>{4}));
  // A name is all the bytes its length covers, a NUL among them.
  const auto nul = external_program({{HandTensor{std::string("w\0x", 3)}, HandTensor{"w"}}});
  EXPECT_EQ(fqns_of(*et_copy::internal::external_tensors(nul.data(), nul.size())),
            (std::vector<std::string>{std::string("w\0x", 3), "w"}));
}

// Up to kMaxTensorDims dims are read; one more refuses the program, and so
// does a file too short to hold a root offset and an identifier.
TEST(ExternalTensors, AnExternalTensorOfSixteenDimsIsReadAndOfSeventeenRefused) {
  HandTensor t{"t"};
  t.sizes = std::vector<int32_t>(16, 1);
  t.dim_order = std::vector<uint8_t>(16, 0);
  auto bytes = external_program({{t}});
  auto sixteen = et_copy::internal::external_tensors(bytes.data(), bytes.size());
  ASSERT_TRUE(sixteen.ok());
  EXPECT_EQ(sixteen->front().sizes.size(), 16u);
  t.sizes.push_back(1);
  bytes = external_program({{t}});
  EXPECT_EQ(et_copy::internal::external_tensors(bytes.data(), bytes.size()).error(), Error::InvalidProgram);
  // The same tensor planned is no external constant: nothing is read, nothing refused.
  t.planned = true;
  bytes = external_program({{t}});
  auto planned = et_copy::internal::external_tensors(bytes.data(), bytes.size());
  ASSERT_TRUE(planned.ok());
  EXPECT_TRUE(planned->empty());
  const std::vector<uint8_t> zeros(7, 0);
  EXPECT_EQ(et_copy::internal::external_tensors(zeros.data(), zeros.size()).error(), Error::InvalidProgram);
  // Eight bytes are enough for a root offset and a root table with no fields
  // (its vtable the offset's bytes): no plans, so no external constants.
  const std::vector<uint8_t> empty_root = {4, 0, 0, 0, 4, 0, 0, 0};
  auto none = et_copy::internal::external_tensors(empty_root.data(), empty_root.size());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// The runtime specs a load reads are ints: another kind is refused by name.
TEST_F(SimulatedDeviceBackendTest, APoolOrSessionSpecThatIsNotAnIntIsRefusedByName) {
  for (const char* spec : {"pool", "session"}) {
    const auto record = read_file("acc.record"); // it has a state: the session is read
    FixtureData data(record);
    BackendOptions<2> options;
    ASSERT_EQ(std::string(spec) == "pool" ? options.set_option("pool", true) : options.set_option("session", "one"),
              Error::Ok);
    const Span<BackendOption> view = options.view();
    executorch::extension::MallocMemoryAllocator alloc;
    BackendInitContext context(&alloc, nullptr, "forward", &data, Span<const BackendOption>(view.data(), view.size()));
    std::vector<uint8_t> bytes = record;
    FreeableBuffer processed(bytes.data(), bytes.size(), nullptr);
    et_copy::LogCapture log;
    auto h = simulated_device_backend().init(context, &processed, {});
    ASSERT_FALSE(h.ok()) << spec;
    EXPECT_EQ(h.error(), Error::InvalidArgument);
    std::string all;
    for (const auto& line : log.lines()) {
      all += line + "\n";
    }
    EXPECT_NE(all.find("method 'forward': runtime spec '" + std::string(spec) + "' must be an int"), std::string::npos)
        << all;
  }
}

// linear.record with its nested method's input 0 (`slot` 3) or output 0
// (`slot` 4) pointed at a tensor the nested program plans (an intermediate).
std::vector<uint8_t> with_a_planned_io(int slot) {
  auto record = read_file("linear.record");
  auto r = et_copy::parse_delegate_record(record.data(), record.size());
  EXPECT_TRUE(r.ok());
  const size_t payload = static_cast<size_t>(r->payload - record.data());
  std::vector<uint8_t> nested(r->payload, r->payload + r->payload_nbytes);
  et_copy_test::Flat f{nested};
  const size_t values = f.follow(f.field(f.plan(), 2));
  int32_t planned = -1;
  for (uint32_t v = 0; v < f.u32(values) && planned < 0; ++v) {
    const size_t value = f.element(values, v);
    if (nested[f.field(value, 0)] == 5 &&
        f.field(f.follow(f.field(value, 1)), 6) != 0) { // a tensor with allocation info
      planned = static_cast<int32_t>(v);
    }
  }
  EXPECT_GE(planned, 0) << "the nested program plans a tensor";
  const size_t io = f.follow(f.field(f.plan(), slot));
  EXPECT_GE(f.u32(io), 1u);
  std::memcpy(nested.data() + io + 4, &planned, 4);
  std::copy(nested.begin(), nested.end(), record.begin() + static_cast<std::ptrdiff_t>(payload));
  return record;
}

// Nested inputs and outputs are bound by pointer at execute: init refuses a
// nested method whose first input, or first output, is planned.
TEST_F(SimulatedDeviceBackendTest, InitRefusesANestedMethodWithAPlannedInputOrOutput) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  const std::map<int, std::string> want{
      {3, "method 'forward': nested input 0 is planned (export it with alloc_graph_input=False)"},
      {4,
       "method 'forward': nested output 0 is planned or a constant (export it with alloc_graph_output=False, and "
       "return no state)"}};
  for (const auto& [slot, message] : want) {
    et_copy::LogCapture capture;
    Delegate d(with_a_planned_io(slot), &data, "forward");
    EXPECT_FALSE(d.ok()) << slot;
    EXPECT_EQ(d.error, Error::DelegateInvalidCompatibility) << slot;
    bool found = false;
    for (const auto& line : capture.lines()) {
      found = found || line.find(message) != std::string::npos;
    }
    EXPECT_TRUE(found) << message;
  }
}

// Last: pool 300 is open here, and a pin lasts until its release. A pool
// that is open pins the weights its loads use (a SessionPool's, while the
// program lives): a handle dropped and another made uploads nothing again.
TEST_F(SimulatedDeviceBackendTest, AnOpenPoolKeepsItsWeightsUntilReleased) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  et_copy::open_pool(300);
  {
    Delegate first("linear", &data, {{"pool", 300}, {"session", 130}});
    ASSERT_TRUE(first.ok());
  }
  const DeviceAllocatorStats dropped = simulated_device_allocator().stats();
  EXPECT_EQ(dropped.h2d_bytes - before.h2d_bytes, 60u);
  EXPECT_EQ(dropped.bytes_outstanding - before.bytes_outstanding, 60u) << "the weights stay; the scratch went";
  EXPECT_EQ(et_copy::pinned_nbytes(300), 60u);
  {
    Delegate second("linear", &data, {{"pool", 300}, {"session", 131}});
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(simulated_device_allocator().stats().h2d_bytes, dropped.h2d_bytes) << "no upload again";
    EXPECT_EQ(data.reads, 2);
  }
  et_copy::release_pool(300);
  EXPECT_EQ(et_copy::pinned_nbytes(300), 0u);
  EXPECT_EQ(simulated_device_allocator().stats().bytes_outstanding, before.bytes_outstanding) << "released: freed";
  et_copy::release_pool(300); // idempotent
  // Closed: a load with its id pins nothing any more.
  {
    Delegate third("linear", &data, {{"pool", 300}});
    ASSERT_TRUE(third.ok());
  }
  EXPECT_EQ(simulated_device_allocator().stats().bytes_outstanding, before.bytes_outstanding);
}

// The nested program is as untrusted as the outer one: init checks its
// indices and its kernel-argument kinds before ExecuTorch loads it (a wrong
// kind would abort the process in EValue::toInt when the kernel runs).
TEST_F(SimulatedDeviceBackendTest, InitRefusesANestedProgramWithAnArgumentOfTheWrongKind) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  auto r = et_copy::parse_delegate_record(record.data(), record.size());
  ASSERT_TRUE(r.ok());
  const size_t payload = static_cast<size_t>(r->payload - record.data());
  std::vector<uint8_t> nested(r->payload, r->payload + r->payload_nbytes);
  et_copy_test::Flat f{nested};
  // The first IntList value's first item (an Int), retagged Double (4).
  size_t list = 0;
  while (nested[f.value_type(list)] != 7) {
    ++list;
  }
  const int64_t item = et_copy_test::first_int_list_item(f, list);
  ASSERT_EQ(nested[f.value_type(static_cast<size_t>(item))], 2);
  nested[f.value_type(static_cast<size_t>(item))] = 4;
  auto tampered = record;
  std::copy(nested.begin(), nested.end(), tampered.begin() + static_cast<std::ptrdiff_t>(payload));
  et_copy::LogCapture capture;
  Delegate d(tampered, &data, "decode");
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.error, Error::InvalidProgram);
  const std::string want = "nested program of a delegate in method 'decode': method 'forward', value " +
                           std::to_string(list) + " (an IntList) item 0 is value " + std::to_string(item) +
                           ", a Double, not an Int";
  bool found = false;
  for (const auto& line : capture.lines()) {
    found = found || line.find(want) != std::string::npos;
  }
  EXPECT_TRUE(found) << want;
}

TEST_F(SimulatedDeviceBackendTest, InitRefusesANestedProgramWithAnIndexOutOfRange) {
  const auto record = read_file("linear.record");
  FixtureData data(record);
  auto r = et_copy::parse_delegate_record(record.data(), record.size());
  ASSERT_TRUE(r.ok());
  const size_t payload = static_cast<size_t>(r->payload - record.data());
  std::vector<uint8_t> nested(r->payload, r->payload + r->payload_nbytes);
  et_copy_test::Flat f{nested};
  const uint32_t huge = 100000; // the first kernel call's first argument
  std::memcpy(nested.data() + f.arguments(0) + 4, &huge, 4);
  auto tampered = record;
  std::copy(nested.begin(), nested.end(), tampered.begin() + static_cast<std::ptrdiff_t>(payload));
  Delegate d(tampered, &data, "forward");
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.error, Error::InvalidProgram);
}

// ---- Records no exporter makes --------------------------------------------
// tests/python/helpers/hand_made_programs.py makes them from the fixtures
// above (make_programs.py writes them): every refusal of init and execute
// names what is wrong, and leaves nothing behind.

std::string logged(const et_copy::LogCapture& capture) {
  std::string all;
  for (const auto& line : capture.lines()) {
    all += line + "\n";
  }
  return all;
}

// `record` with the first `from` in its header replaced by `to` (the payload as it was).
std::vector<uint8_t> with_header(const std::vector<uint8_t>& record, const std::string& from, const std::string& to) {
  const std::string text(record.begin(), record.end());
  const size_t payload = text.find("\npayload\t");
  const size_t at = text.find(from);
  EXPECT_LE(at, payload) << from; // the payload line's own newline may start `from`
  std::string edited = text;
  edited.replace(at, from.size(), to);
  return std::vector<uint8_t>(edited.begin(), edited.end());
}

// `record` with each byte of its nested program replaced by 'x'.
std::vector<uint8_t> with_garbage_payload(std::vector<uint8_t> record) {
  auto r = et_copy::parse_delegate_record(record.data(), record.size());
  EXPECT_TRUE(r.ok());
  const size_t payload = static_cast<size_t>(r->payload - record.data());
  std::fill(record.begin() + static_cast<std::ptrdiff_t>(payload), record.end(), 'x');
  return record;
}

TEST_F(SimulatedDeviceBackendTest, InitRefusesEachHandMadeRecordNamingWhatIsWrongAndKeepsNothing) {
  const auto linear = read_file("linear.record");
  const auto acc = read_file("acc.record");
  FixtureData linear_data(linear), acc_data(acc);
  const std::string bias = "weight\tl.bias\tet_copy.weight:3936cb53fb19caeebc68eab4f99b30f7\t12\n";
  struct Case {
    std::vector<uint8_t> record;
    const NamedDataMap* data;
    Error error;
    std::string message;
  };
  const std::vector<Case> cases{
      {with_header(linear, bias, ""), &linear_data, Error::DelegateInvalidCompatibility,
       "the nested program's external constant 'l.bias' has no weight line in the record"},
      // After both real weights: their uploads are dropped with the refusal.
      {with_header(linear, "\npayload\t", "\nweight\tnope\tet_copy.weight:0\t4\npayload\t"), &linear_data,
       Error::DelegateInvalidCompatibility, "weight 'nope' is not an external constant of the nested program"},
      {with_header(linear, "3936cb53fb19caeebc68eab4f99b30f7\t12", "3936cb53fb19caeebc68eab4f99b30f7\t16"),
       &linear_data, Error::DelegateInvalidCompatibility,
       "weight 'l.bias' is 16 bytes in the record, 12 in the nested program"},
      {with_garbage_payload(linear), &linear_data, Error::DelegateInvalidCompatibility,
       "the nested program cannot be read"},
      {read_file("linear_two_methods.record"), &linear_data, Error::DelegateInvalidCompatibility,
       "the nested program has 2 methods, not 1"},
      {read_file("linear_negative_buffer.record"), &linear_data, Error::DelegateInvalidCompatibility,
       "nested planned buffer 0 has no valid size"},
      {with_header(acc, "arena\t1\t16", "arena\t1\t32"), &acc_data, Error::DelegateInvalidCompatibility,
       "the arena line names nested buffer 1 of 32 bytes; the nested method has 2 planned buffers, that one of 16 "
       "bytes\n"},
      {with_header(acc, "arena\t1\t16", "arena\t2\t16"), &acc_data, Error::DelegateInvalidCompatibility,
       "the arena line names nested buffer 2 of 16 bytes; the nested method has 2 planned buffers\n"},
      // A nested state Method loads from the weight map under a name it does not hold.
      {read_file("acc_state_from_nowhere.record"), &acc_data, Error::NotFound,
       "loading the nested method 'forward' failed"},
  };
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  for (size_t i = 0; i < cases.size(); ++i) {
    et_copy::LogCapture capture;
    Delegate d(cases[i].record, cases[i].data, "forward");
    EXPECT_FALSE(d.ok()) << i;
    EXPECT_EQ(d.error, cases[i].error) << i;
    const std::string log = logged(capture);
    EXPECT_NE(log.find("SimulatedDeviceBackend: method 'forward': " + cases[i].message), std::string::npos)
        << i << ": " << log;
  }
  const DeviceAllocatorStats after = simulated_device_allocator().stats();
  EXPECT_EQ(after.bytes_outstanding, before.bytes_outstanding) << "a refused init keeps no weight, arena or scratch";
  EXPECT_EQ(after.live_allocations, before.live_allocations);

  executorch::extension::MallocMemoryAllocator alloc;
  BackendInitContext context(&alloc, nullptr, "forward", &linear_data);
  et_copy::LogCapture capture;
  auto none = simulated_device_backend().init(context, nullptr, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error(), Error::InvalidArgument);
  EXPECT_NE(logged(capture).find("method 'forward': no processed bytes"), std::string::npos) << logged(capture);

  // The real records load and run as before.
  Delegate d("linear", &linear_data);
  ASSERT_TRUE(d.ok());
  const auto io = read_file("linear.io");
  expect_near(d.run(floats(io, 0, 8), {2, 4}, {2, 3}), floats(io, 8, 6));
}

// A nested method may take a scalar: execute hands it to the nested
// set_input, which takes only the kind and value the method was traced with
// (linear_scalar_input.record: addmm's alpha, an Int 1, as input 1).
TEST_F(SimulatedDeviceBackendTest, ANestedScalarInputIsPassedOnAndOneOfAnotherKindOrValueIsRefused) {
  FixtureData data(read_file("linear.record"));
  Delegate d(read_file("linear_scalar_input.record"), &data, "forward");
  ASSERT_TRUE(d.ok()) << et_copy::error_name(d.error);
  const auto io = read_file("linear.io");
  DeviceBytes in(8 * sizeof(float)), out(6 * sizeof(float));
  in.put(floats(io, 0, 8));
  const std::vector<float> untouched(6, -7.0f);
  TestTensor tin(ScalarType::Float, {2, 4}, in.ptr, on_device()), tout(ScalarType::Float, {2, 3}, out.ptr, on_device());
  EValue ein(tin.t()), eout(tout.t());
  EValue one(int64_t{1}), two(int64_t{2}), real(1.0), yes(true);
  for (EValue* other : {&two, &real, &yes}) {
    out.put(untouched);
    et_copy::LogCapture capture;
    EXPECT_EQ(d.execute({&ein, other, &eout}), Error::InvalidArgument);
    EXPECT_NE(logged(capture).find("SimulatedDeviceBackend: method 'forward': input 1 does not match the nested input"),
              std::string::npos)
        << logged(capture);
    EXPECT_EQ(out.get(), untouched) << "nothing ran";
  }
  out.put(untouched);
  ASSERT_EQ(d.execute({&ein, &one, &eout}), Error::Ok);
  expect_near(out.get(), floats(io, 8, 6), "the traced scalar runs the method");
}

// A nested state tensor marked external is loaded by Method, at load, from
// the delegate's weight map (load_data_into, at the layout's size): it
// starts as the weight (acc_state_from_w.record: acc starts as w), and the
// run goes on from there: (w + x1) * w, then (w + x1 + x2) * w.
TEST_F(SimulatedDeviceBackendTest, ANestedStateLoadedFromAWeightStartsAsThatWeight) {
  const auto acc = read_file("acc.record");
  FixtureData data(acc);
  Delegate d(read_file("acc_state_from_w.record"), &data, "forward", {{"session", 140}});
  ASSERT_TRUE(d.ok()) << et_copy::error_name(d.error);
  const auto io = read_file("acc.io");
  const std::vector<float> w = floats(read_file("acc.data"), 0, 4); // the weight comes first
  const std::vector<float> x1 = floats(io, 0, 4), x2 = floats(io, 4, 4);
  std::vector<float> first(4), second(4);
  for (size_t i = 0; i < 4; ++i) {
    first[i] = (w[i] + x1[i]) * w[i];
    second[i] = (w[i] + x1[i] + x2[i]) * w[i];
  }
  expect_near(d.run(x1, {4}, {4}), first, "the state started as w");
  expect_near(d.run(x2, {4}, {4}), second, "and kept the first step");
}

// A nested program may hold a delegate of its own. ExecuTorch hands that
// delegate the parent's weight map merged with the nested program's named
// data, the parent's first: asked for a key it lacks, the parent's map says
// NotFound, and the inner delegate's weights come from the nested program
// (nested_delegate.record); with them nowhere (nested_delegate_bare.record)
// the load fails NotFound, naming the key, and keeps nothing.
TEST_F(SimulatedDeviceBackendTest, ANestedDelegateAsksItsParentsWeightMapForKeysItLacks) {
  ASSERT_NE(et_copy::register_simulated_device_backend(), et_copy::Registration::kFailed); // the inner one's too
  et_copy_test::NamedBlobs empty;
  const DeviceAllocatorStats before = simulated_device_allocator().stats();
  {
    Delegate d(read_file("nested_delegate.record"), &empty, "forward");
    ASSERT_TRUE(d.ok()) << et_copy::error_name(d.error);
    const DeviceAllocatorStats loaded = simulated_device_allocator().stats();
    EXPECT_EQ(loaded.h2d_bytes - before.h2d_bytes, 100u) << "the inner Linear(4, 5): 80 + 20 bytes";
  }
  et_copy::LogCapture capture;
  Delegate bare(read_file("nested_delegate_bare.record"), &empty, "forward");
  EXPECT_FALSE(bare.ok());
  EXPECT_EQ(bare.error, Error::NotFound);
  const std::string log = logged(capture);
  EXPECT_NE(log.find("the program's named data has no 'et_copy.weight:"), std::string::npos) << log;
  EXPECT_NE(log.find("method 'forward': loading the nested method 'forward' failed"), std::string::npos) << log;
  const DeviceAllocatorStats after = simulated_device_allocator().stats();
  EXPECT_EQ(after.bytes_outstanding, before.bytes_outstanding);
  EXPECT_EQ(after.live_allocations, before.live_allocations);
}

// Each argument execute refuses is named with why, before any is bound;
// the output is left as it was, and a good call runs after.
TEST_F(SimulatedDeviceBackendTest, EachArgumentExecuteRefusesIsNamedWithWhyAndLeavesTheOutput) {
  FixtureData data(read_file("linear.record"));
  Delegate d("linear", &data);
  ASSERT_TRUE(d.ok());
  const auto io = read_file("linear.io");
  DeviceBytes in(8 * sizeof(float)), other_device(8 * sizeof(float), 1), out(6 * sizeof(float)),
      wide(12 * sizeof(float));
  in.put(floats(io, 0, 8));
  const std::vector<float> untouched(6, -7.0f);
  out.put(untouched);
  std::vector<float> host(8, 1.0f), host_out(6);
  TestTensor tin(ScalarType::Float, {2, 4}, in.ptr, on_device()), tout(ScalarType::Float, {2, 3}, out.ptr, on_device());
  TestTensor host_in(ScalarType::Float, {2, 4}, host.data()), liar(ScalarType::Float, {2, 4}, host.data(), on_device());
  TestTensor on_one(ScalarType::Float, {2, 4}, other_device.ptr, on_device(1)),
      claims_zero(ScalarType::Float, {2, 4}, other_device.ptr, on_device(0));
  TestTensor host_output(ScalarType::Float, {2, 3}, host_out.data()),
      too_wide(ScalarType::Float, {3, 4}, wide.ptr, on_device());
  EValue ein(tin.t()), eout(tout.t()), ehost(host_in.t()), eliar(liar.t()), eone(on_one.t()), ezero(claims_zero.t()),
      ehost_out(host_output.t()), ewide(too_wide.t());
  char host_at[64], out_at[64];
  std::snprintf(host_at, sizeof(host_at), "32 bytes at %p", static_cast<void*>(host.data()));
  std::snprintf(out_at, sizeof(out_at), "24 bytes at %p", static_cast<void*>(host_out.data()));
  const Error invalid = Error::InvalidArgument;
  const std::vector<std::tuple<std::vector<EValue*>, Error, std::string>> refused{
      {{&ehost, &eout},
       invalid,
       std::string("input 0 is host memory (cpu): ") + host_at + "; the delegate reads device memory only (cuda:0)"},
      {{&ein, &ehost_out},
       invalid,
       std::string("output 0 is host memory (cpu): ") + out_at + "; the delegate reads device memory only (cuda:0)"},
      {{&eone, &eout}, invalid, "input 0 is on cuda:1, the delegate on cuda:0"},
      {{&eliar, &eout},
       invalid,
       std::string("input 0 says cuda:0 but ") + host_at + " are not inside one allocation of the simulated device"},
      {{&ezero, &eout}, invalid, "input 0 says cuda:0 but 32 bytes at "},
      {{nullptr, &eout}, invalid, "input 0 is missing"},
      {{&ein, nullptr}, invalid, "output 0 is missing"},
      // ExecuTorch's set_input: a static input resized.
      {{&ewide, &eout}, Error::NotSupported, "input 0 does not fit the nested input"},
  };
  for (const auto& [args, error, message] : refused) {
    et_copy::LogCapture capture;
    EXPECT_EQ(d.execute(args), error) << message;
    EXPECT_NE(logged(capture).find("SimulatedDeviceBackend: method 'forward': " + message), std::string::npos)
        << logged(capture);
    EXPECT_EQ(out.get(), untouched) << message;
  }
  ASSERT_EQ(d.execute({&ein, &eout}), Error::Ok);
  expect_near(out.get(), floats(io, 8, 6));
}

// is_device_argument's span, at both sides of each edge: zero bytes read
// nothing (any address passes), one byte is already checked, and the span
// must end inside the allocation it starts in.
TEST_F(SimulatedDeviceBackendTest, ADeviceArgumentsBytesMustLieInOneAllocationFromItsFirstByte) {
  DeviceBytes block(5);
  uint8_t host[8] = {};
  auto* first = static_cast<uint8_t*>(block.ptr);
  TestTensor host_byte(ScalarType::Byte, {1}, host, on_device()), empty(ScalarType::Byte, {0}, host, on_device());
  TestTensor last_byte(ScalarType::Byte, {1}, first + 4, on_device()), whole(ScalarType::Byte, {5}, first, on_device());
  const auto is_arg = [](TestTensor& t, size_t nbytes) {
    return et_copy::is_device_argument(t.t(), nbytes, DeviceType::CUDA, 0);
  };
  const auto why = [](TestTensor& t, size_t nbytes) {
    return et_copy::refuse_device_argument(t.t(), nbytes, DeviceType::CUDA, 0);
  };
  EXPECT_TRUE(is_arg(empty, 0)) << "zero bytes read nothing, wherever they point";
  EXPECT_EQ(why(empty, 0), "");
  EXPECT_FALSE(is_arg(host_byte, 1)) << "one host byte that says cuda:0";
  char at[64];
  std::snprintf(at, sizeof(at), "1 bytes at %p", static_cast<void*>(host));
  EXPECT_EQ(why(host_byte, 1),
            std::string("says cuda:0 but ") + at + " are not inside one allocation of the simulated device");
  EXPECT_TRUE(is_arg(last_byte, 1)) << "the allocation's last byte";
  EXPECT_EQ(why(last_byte, 1), "");
  EXPECT_FALSE(is_arg(last_byte, 2)) << "one byte past its end";
  EXPECT_TRUE(is_arg(whole, 5));
  EXPECT_FALSE(is_arg(whole, 6));
  EXPECT_FALSE(et_copy::is_device_argument(whole.t(), 5, DeviceType::CUDA, 1)) << "another device's index";
  EXPECT_EQ(et_copy::refuse_device_argument(whole.t(), 5, DeviceType::CUDA, 1), "is on cuda:0, the delegate on cuda:1");
}

// A bound output takes the nested output's shape after the run: a dynamic
// one of a larger capacity shrinks to it; a static one of another shape
// cannot, and the call says so.
TEST_F(SimulatedDeviceBackendTest, AnOutputTakesTheNestedOutputsShapeOrTheCallSaysItCannot) {
  FixtureData data(read_file("linear.record"));
  Delegate d("linear", &data);
  ASSERT_TRUE(d.ok());
  const auto io = read_file("linear.io");
  DeviceBytes in(8 * sizeof(float)), out(9 * sizeof(float));
  in.put(floats(io, 0, 8));
  TestTensor::Options bound = on_device();
  bound.dynamism = executorch::runtime::TensorShapeDynamism::DYNAMIC_BOUND;
  TestTensor tin(ScalarType::Float, {2, 4}, in.ptr, on_device()), wide(ScalarType::Float, {3, 3}, out.ptr, bound);
  EValue ein(tin.t()), ewide(wide.t());
  ASSERT_EQ(d.execute({&ein, &ewide}), Error::Ok);
  EXPECT_EQ(wide.sizes(), (std::vector<executorch::aten::SizesType>{2, 3}));
  std::vector<float> got = out.get();
  got.resize(6);
  expect_near(got, floats(io, 8, 6));

  TestTensor fixed(ScalarType::Float, {3, 3}, out.ptr, on_device());
  EValue efixed(fixed.t());
  et_copy::LogCapture capture;
  EXPECT_NE(d.execute({&ein, &efixed}), Error::Ok);
  EXPECT_NE(logged(capture).find("method 'forward': output 0 cannot take the nested output's shape"), std::string::npos)
      << logged(capture);
  EXPECT_EQ(fixed.sizes(), (std::vector<executorch::aten::SizesType>{3, 3}));
}

} // namespace
