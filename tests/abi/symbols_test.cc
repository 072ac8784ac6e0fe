// Link-level compatibility: the dynamic symbols our libraries export, compared
// with NVIDIA's libnccl.so.2, and a program linked against NVIDIA's library
// loading ours instead.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace {

const char* kOurNccl = CHORUS_ABI_OUR_NCCL;      // $<TARGET_FILE:nccl>
const char* kOurChorus = CHORUS_ABI_OUR_CHORUS;  // $<TARGET_FILE:chorus>
const char* kNvidiaNccl = CHORUS_ABI_NVIDIA_LIB;

bool exists(const char* path) { return access(path, R_OK) == 0; }

std::string run(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int rc = pclose(pipe);
  if (status) *status = rc;
  return out;
}

// name -> nm type letter for every defined dynamic symbol.
std::map<std::string, char> exportedSymbols(const std::string& lib) {
  int status = 0;
  std::istringstream lines(run("nm -D --defined-only '" + lib + "' 2>&1", &status));
  std::map<std::string, char> syms;
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string a, b, c;
    fields >> a >> b >> c;
    if (c.empty()) {  // absolute symbols have no address column
      c = b;
      b = a;
    }
    if (b.size() == 1) syms[c] = b[0];
  }
  EXPECT_EQ(status, 0) << "nm failed on " << lib;
  return syms;
}

bool isFunction(char type) { return type == 'T' || type == 'W' || type == 'i'; }

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string realPath(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

std::string dirOf(const std::string& p) { return p.substr(0, p.rfind('/')); }

TEST(Symbols, NvidiaFunctionsAreExported) {
  if (!CHORUS_ABI_HAVE_NVIDIA) GTEST_SKIP() << "no NCCL 2.28.9 reference: nccl.h " CHORUS_ABI_NVIDIA_STATUS;
  if (!exists(kNvidiaNccl)) GTEST_SKIP() << kNvidiaNccl << " not found; nothing to compare against";
  auto theirs = exportedSymbols(kNvidiaNccl);
  ASSERT_GT(theirs.size(), 50u);
  for (const char* lib : {kOurNccl, kOurChorus}) {
    auto ours = exportedSymbols(lib);
    std::string missing;
    for (const auto& [name, type] : theirs) {
      if (!isFunction(type)) continue;
      auto it = ours.find(name);
      if (it == ours.end() || !isFunction(it->second)) missing += "  " + name + "\n";
    }
    EXPECT_TRUE(missing.empty()) << lib << " does not export these functions of " << kNvidiaNccl << ":\n" << missing;
  }
}

TEST(Symbols, OnlyTheApiIsExported) {
  for (const char* lib : {kOurNccl, kOurChorus}) {
    auto ours = exportedSymbols(lib);
    EXPECT_GT(ours.size(), 80u) << lib;
    std::string extra;
    for (const auto& [name, type] : ours)
      if (!startsWith(name, "nccl") && !startsWith(name, "pnccl") && !startsWith(name, "chorus"))
        extra += "  " + name + " (" + type + ")\n";
    EXPECT_TRUE(extra.empty()) << lib << " exports symbols outside nccl*/pnccl*/chorus* (check exports.map):\n"
                               << extra;
  }
}

// A net plugin defines a global function with the mangled name of one inside
// Chorus (chorus::lastErrorMessage). Neither may bind to the other's copy,
// whichever is loaded first with RTLD_GLOBAL (each order runs in its own
// ctest process).
constexpr const char* kInternalSymbol = "_ZN6chorus16lastErrorMessageEv";
constexpr const char* kPluginsAnswer = "nccl-test-net's own";

void expectSeparateInternals(void* nccl, void* plugin) {
  ASSERT_NE(nccl, nullptr) << dlerror();
  ASSERT_NE(plugin, nullptr) << dlerror();
  EXPECT_EQ(dlsym(nccl, kInternalSymbol), nullptr) << "libnccl.so.2 exports a Chorus internal";
  EXPECT_NE(dlsym(plugin, kInternalSymbol), nullptr) << "the test plugin lost its colliding symbol";
  auto pluginCall = reinterpret_cast<const char* (*)()>(dlsym(plugin, "ncclTestNetWhoseLastError"));
  ASSERT_NE(pluginCall, nullptr);
  EXPECT_STREQ(pluginCall(), kPluginsAnswer);
  auto getLastError = reinterpret_cast<const char* (*)(void*)>(dlsym(nccl, "ncclGetLastError"));
  ASSERT_NE(getLastError, nullptr);
  EXPECT_STRNE(getLastError(nullptr), kPluginsAnswer) << "Chorus called the plugin's function";
}

TEST(Symbols, PluginLoadedAfterTheLibraryKeepsItsOwnGlobals) {
  void* nccl = dlopen(kOurNccl, RTLD_NOW | RTLD_GLOBAL);
  void* plugin = dlopen(CHORUS_ABI_TEST_NET_PLUGIN, RTLD_NOW | RTLD_GLOBAL);
  expectSeparateInternals(nccl, plugin);
}

TEST(Symbols, LibraryLoadedAfterAPluginKeepsItsOwnInternals) {
  void* plugin = dlopen(CHORUS_ABI_TEST_NET_PLUGIN, RTLD_NOW | RTLD_GLOBAL);
  void* nccl = dlopen(kOurNccl, RTLD_NOW | RTLD_GLOBAL);
  expectSeparateInternals(nccl, plugin);
}

// Every ncclX has its profiling twin pncclX and vice versa.
TEST(Symbols, ProfilingTwins) {
  auto ours = exportedSymbols(kOurNccl);
  const std::set<std::string> noTwin = {"ncclResetDebugInitInternal"};  // NVIDIA has no twin either
  std::string unpaired;
  for (const auto& [name, type] : ours) {
    if (startsWith(name, "pnccl") && !ours.count(name.substr(1)))
      unpaired += "  " + name + " without " + name.substr(1) + "\n";
    if (startsWith(name, "nccl") && !noTwin.count(name) && !ours.count("p" + name))
      unpaired += "  " + name + " without p" + name + "\n";
  }
  EXPECT_TRUE(unpaired.empty()) << unpaired;
}

TEST(Symbols, BothLibrariesExportTheSameSet) {
  auto nccl = exportedSymbols(kOurNccl);
  auto chorus = exportedSymbols(kOurChorus);
  std::set<std::string> a, b;
  for (const auto& kv : nccl) a.insert(kv.first);
  for (const auto& kv : chorus) b.insert(kv.first);
  EXPECT_EQ(a, b);
}

TEST(Symbols, Sonames) {
  EXPECT_NE(run(std::string("readelf -d '") + kOurNccl + "'").find("Library soname: [libnccl.so.2]"),
            std::string::npos);
  EXPECT_NE(run(std::string("readelf -d '") + kOurChorus + "'").find("Library soname: [libchorus.so.0]"),
            std::string::npos);
}

// A binary linked against NVIDIA's libnccl.so.2 runs on ours, picked up
// through LD_LIBRARY_PATH. NVIDIA's library itself is never loaded.
TEST(Symbols, NvidiaLinkedProgramLoadsChorus) {
#ifndef CHORUS_ABI_LOAD_PROBE
  GTEST_SKIP() << "no NCCL 2.28.9 reference (nccl.h " CHORUS_ABI_NVIDIA_STATUS ", library " << kNvidiaNccl
               << "), so no program could be linked against it";
#else
  const std::string probe = CHORUS_ABI_LOAD_PROBE;
  const std::string ourDir = dirOf(kOurNccl);
  std::string dynamic = run("readelf -d '" + probe + "'");
  ASSERT_NE(dynamic.find("Shared library: [libnccl.so.2]"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("RPATH"), std::string::npos) << "the probe must not carry an rpath:\n" << dynamic;

  const std::string env = "env LD_LIBRARY_PATH='" + ourDir + "' ";
  std::string ldd = run(env + "ldd '" + probe + "'");
  EXPECT_NE(ldd.find("libnccl.so.2 => " + ourDir + "/libnccl.so.2"), std::string::npos) << ldd;

  int status = 0;
  std::string out = run(env + "'" + probe + "' 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("result=0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("version=22809\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("error=\n"), std::string::npos) << "ncclGetErrorString returned an empty string\n" << out;
  auto at = out.find("library=");
  ASSERT_NE(at, std::string::npos) << out;
  std::string loaded = out.substr(at + 8, out.find('\n', at) - at - 8);
  EXPECT_EQ(realPath(loaded), realPath(kOurNccl)) << out;
#endif
}

}  // namespace
