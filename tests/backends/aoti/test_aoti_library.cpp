// What linking et_copy_aoti gives before anything is registered: the core
// parser reads its payload kind, and a load check's refusal of its delegates
// names the call that registers it (both added when the library loads,
// aoti_backend.cpp). Registry state: empty at start; this executable
// registers the simulated device and the compiled backend.
#include <gtest/gtest.h>

#include <string>

#include <et_copy/aoti_backend.h>
#include <et_copy/delegate_record.h>
#include <et_copy/device_backend.h>
#include <et_copy/failure_report.h>
#include <et_copy/registration.h>

namespace {

using executorch::runtime::Error;

// An aoti record, as Python's record writer lays it out.
std::string aoti_record(const std::string& arena) {
  return "et_copy.delegate 2\n"
         "device\tcuda\t0\n"
         "weight\tw\tet_copy.weight:00ff\t16\n"
         "arena\t" +
         arena +
         "\t0\n"
         "tensor\tw\t6\t4\t1\n"
         "target\tcpu\t2.13.0\n"
         "io\t1\t1\n"
         "digest\tsha256\t" +
         std::string(64, '0') +
         "\n"
         "payload\taoti\t4\n"
         "ELF!";
}

TEST(AotiLibrary, ItsPayloadKindParsesWithoutARegistrationCall) {
  et_copy::FailureReport report;
  const std::string bytes = aoti_record("-");
  auto r = et_copy::parse_delegate_record(bytes.data(), bytes.size(), &report);
  ASSERT_TRUE(r.ok()) << report.detail;
  EXPECT_EQ(r->payload_word, et_copy::kPayloadAoti);
  // Its own rules hold: an aoti payload binds its state by tensor line, not a nested buffer.
  const std::string nested = aoti_record("2");
  auto refused = et_copy::parse_delegate_record(nested.data(), nested.size(), &report);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(report.detail.find("an aoti payload's arena is -, not a nested planned buffer"), std::string::npos)
      << report.detail;
}

TEST(AotiLibrary, ARefusalNamesTheRegistrationUntilItIsMade) {
  EXPECT_EQ(et_copy::backend_hint(et_copy::kAotiDeviceBackend), "") << "nothing serves CUDA yet";
  ASSERT_NE(et_copy::use_simulated_device(), et_copy::Registration::kFailed);
  EXPECT_EQ(et_copy::backend_hint(et_copy::kAotiDeviceBackend),
            "backend 'AotiDeviceBackend' is not registered: call et_copy.use_aoti_backend() (C++: "
            "et_copy::register_aoti_backend()) before loading");
  ASSERT_EQ(et_copy::register_aoti_backend(), et_copy::Registration::kRegistered);
  EXPECT_EQ(et_copy::backend_hint(et_copy::kAotiDeviceBackend), "") << "registered, and it runs here";
  EXPECT_EQ(et_copy::register_aoti_backend(), et_copy::Registration::kAlreadyOurs);
}

} // namespace
