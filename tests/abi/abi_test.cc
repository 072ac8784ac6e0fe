// Compares the ABI fact tables of our headers with NVIDIA's NCCL 2.28.9
// headers, with our own headers seen with and without CUDA, and as C.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "abi/abi_facts.h"

namespace chorus_abi {
namespace {

std::map<std::string, std::string> toMap(const Facts& facts) {
  std::map<std::string, std::string> m;
  for (const auto& [key, value] : facts) m[key] = value;
  return m;
}

// One line per differing fact, so a failure reads like a diff.
std::string diff(const Facts& expected, const Facts& actual, const char* expectedName, const char* actualName) {
  auto actualMap = toMap(actual);
  auto expectedMap = toMap(expected);
  std::ostringstream out;
  for (const auto& [key, value] : expected) {
    auto it = actualMap.find(key);
    if (it == actualMap.end())
      out << "  " << key << ": missing from " << actualName << "\n";
    else if (it->second != value)
      out << "  " << key << ":\n      " << expectedName << ": " << value << "\n      " << actualName << ": "
          << it->second << "\n";
  }
  for (const auto& [key, value] : actual)
    if (!expectedMap.count(key)) out << "  " << key << ": only in " << actualName << " (" << value << ")\n";
  return out.str();
}

TEST(Abi, FactTableCoversTheApi) {
  auto facts = toMap(oursFacts());
  EXPECT_GT(facts.size(), 250u);
  EXPECT_EQ(facts["function ncclAllReduce"],
            "ncclResult_t (*)(const void*, void*, long unsigned int, ncclDataType_t, ncclRedOp_t, ncclComm*, "
            "CUstream_st*)");
  EXPECT_EQ(facts["function pncclGroupStart"], "ncclResult_t (*)()");
  EXPECT_EQ(facts["sizeof ncclUniqueId"], "128");
  EXPECT_EQ(facts["macro NCCL_VERSION_CODE"], "22809 : int");
}

TEST(Abi, MatchesNvidiaNccl) {
#if CHORUS_ABI_HAVE_NVIDIA
  std::string d = diff(nvidiaFacts(), oursFacts(), "NVIDIA", "Chorus");
  EXPECT_TRUE(d.empty()) << "include/nccl.h differs from " CHORUS_ABI_NVIDIA_HEADER ":\n" << d;
#else
  GTEST_SKIP() << "no NCCL 2.28.9 reference header: " CHORUS_ABI_NVIDIA_HEADER ": " CHORUS_ABI_NVIDIA_STATUS;
#endif
}

TEST(Abi, SameWithAndWithoutCudaHeaders) {
#if CHORUS_ABI_HAVE_CUDA_HEADERS
  std::string d = diff(oursFacts(), oursFactsWithCuda(), "without CUDA headers", "with CUDA headers");
  EXPECT_TRUE(d.empty()) << "include/nccl.h changes with the CUDA headers:\n" << d;
#else
  GTEST_SKIP() << "the CUDA runtime headers were not found when configuring";
#endif
}

TEST(Abi, CViewMatchesCxxView) {
  auto cxx = toMap(oursFacts());
  std::istringstream lines(chorus_abi_c_facts());
  std::string line;
  int compared = 0;
  while (std::getline(lines, line)) {
    auto eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << line;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    auto it = cxx.find(key);
    ASSERT_NE(it, cxx.end()) << "C fact '" << key << "' has no C++ counterpart (fix its spelling)";
    EXPECT_EQ(it->second, value) << key << " differs between C and C++";
    ++compared;
  }
  EXPECT_GT(compared, 40);
}

}  // namespace
}  // namespace chorus_abi
