// SHA-256 against FIPS 180-4's examples, and fed in pieces of every size.
#include <et_copy/sha256.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using et_copy::Sha256;

namespace {

std::string hex_of(const std::string& text) {
  return Sha256::hex(Sha256::of(text.data(), text.size()));
}

} // namespace

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(hex_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding needs a second block.
  EXPECT_EQ(hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex_of(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecesOfAnySizeGiveTheWholeDigest) {
  std::string data;
  for (int i = 0; i < 1000; ++i) {
    data += static_cast<char>((i * 131 + 7) & 0xff);
  }
  const auto whole = Sha256::of(data.data(), data.size());
  for (size_t piece : {1u, 3u, 63u, 64u, 65u, 127u, 999u}) {
    Sha256 s;
    for (size_t at = 0; at < data.size(); at += piece) {
      s.update(data.data() + at, std::min(piece, data.size() - at));
    }
    s.update(nullptr, 0);
    EXPECT_EQ(s.finish(), whole) << "pieces of " << piece;
  }
  for (size_t n : {55u, 56u, 63u, 64u}) { // each side of the padding's block edge
    EXPECT_NE(Sha256::of(data.data(), n), Sha256::of(data.data(), n + 1));
  }
}

TEST(Sha256, LowerHexIsExactlyThatManyDigits) {
  EXPECT_TRUE(et_copy::is_lower_hex("0123456789abcdef", 16));
  EXPECT_FALSE(et_copy::is_lower_hex("0123456789abcdeF", 16));
  EXPECT_FALSE(et_copy::is_lower_hex("0123456789abcdeg", 16));
  EXPECT_FALSE(et_copy::is_lower_hex("0123456789abcde", 16));
  EXPECT_FALSE(et_copy::is_lower_hex("0123456789abcdef0", 16));
  EXPECT_FALSE(et_copy::is_lower_hex("/:`", 3)); // just outside each range
  EXPECT_TRUE(et_copy::is_lower_hex("", 0));
}

// The SHA extensions' path (where this CPU has them) and the portable one
// give the same state, from any state, over runs of 1 to 40 blocks.
TEST(Sha256, TheCpusExtensionsAndThePortableCodeAgree) {
  if (!et_copy::sha256_has_sha_ni()) {
    GTEST_SKIP() << "this CPU has no SHA extensions: the portable code is the only path";
  }
  std::vector<uint8_t> data(64 * 40);
  uint32_t x = 12345;
  for (auto& b : data) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 24);
  }
  for (size_t blocks : {1u, 2u, 3u, 17u, 40u}) {
    uint32_t fast[8], slow[8];
    for (int i = 0; i < 8; ++i) {
      fast[i] = slow[i] = 0x01234567u * static_cast<uint32_t>(i + 1) + static_cast<uint32_t>(blocks);
    }
    et_copy::sha256_compress(fast, data.data(), blocks);
    et_copy::sha256_compress(slow, data.data(), blocks, /*portable=*/true);
    EXPECT_EQ(std::vector<uint32_t>(fast, fast + 8), std::vector<uint32_t>(slow, slow + 8)) << blocks << " blocks";
  }
}

// The extensions are used exactly where the CPU reports them: Linux's flags
// for the two features cpuid is asked for (sha_ni, sse4_1).
TEST(Sha256, TheExtensionsAreUsedWhereTheCpuHasThem) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.empty()) {
    GTEST_SKIP() << "no /proc/cpuinfo flags line";
  }
  std::istringstream words(line.substr(line.find(':') + 1));
  std::set<std::string> flags{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
#if defined(__x86_64__)
  EXPECT_EQ(et_copy::sha256_has_sha_ni(), flags.count("sha_ni") == 1 && flags.count("sse4_1") == 1);
#else
  EXPECT_FALSE(et_copy::sha256_has_sha_ni());
#endif
}
