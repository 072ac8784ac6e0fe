// Portable driver for the tests/fuzz/ targets, for compilers without
// libFuzzer (the CI's gcc): runs the target's seeds, then deterministic
// random mutations of them (bit flips, random and boundary bytes, inserted,
// erased and truncated runs, splices of two inputs) for a bounded number of
// inputs and seconds. A crash, sanitizer report or fuzzCheck failure ends
// the run with the input that caused it saved to a file.
//
//   chorus_fuzz_X [--iterations N] [--seconds S] [--seed K] [--write-seeds DIR] [FILE...]
//
// FILE arguments are run as inputs (reproducing a saved crash) instead.
// Defaults: 100000 inputs or 5 s, whichever comes first (CHORUS_FUZZ_ITERATIONS,
// CHORUS_FUZZ_SECONDS override them).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_target.h"

namespace chorus::fuzz {
namespace {

constexpr size_t kMaxInput = 4096;

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed ? seed : 0x9E3779B97F4A7C15ull) {}
  uint64_t next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }

 private:
  uint64_t s_;
};

// Values that sit on the edges parsers get wrong.
uint64_t boundaryValue(Rng& rng) {
  static const uint64_t kValues[] = {0,          1,           0x7f,   0x80,       0xff,       0x100,
                                     0x7fff,     0x8000,      0xffff, 0x10000,    0x7fffffff, 0x80000000,
                                     0xffffffff, 0x100000000, ~0ull,  ~0ull >> 1, 64u << 20,  (64u << 20) + 1};
  return kValues[rng.below(std::size(kValues))];
}

void mutate(Bytes& b, const std::vector<Bytes>& pool, Rng& rng) {
  const int edits = 1 + static_cast<int>(rng.below(4));
  for (int e = 0; e < edits; ++e) {
    const size_t at = rng.below(b.size() + 1);
    switch (rng.below(7)) {
      case 0:  // flip a bit
        if (!b.empty()) b[rng.below(b.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
        break;
      case 1:  // a random byte
        if (!b.empty()) b[rng.below(b.size())] = static_cast<uint8_t>(rng.next());
        break;
      case 2: {  // a boundary value of 1, 2, 4 or 8 bytes, little-endian
        const size_t width = size_t(1) << rng.below(4);
        const uint64_t v = boundaryValue(rng);
        for (size_t i = 0; i < width && at + i < b.size(); ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
      case 3: {  // insert random bytes
        const size_t n = 1 + rng.below(16);
        for (size_t i = 0; i < n; ++i)
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng.next()));
        break;
      }
      case 4: {  // erase a run
        const size_t n = std::min(b.size() - std::min(at, b.size()), 1 + rng.below(16));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(std::min(at, b.size())),
                b.begin() + static_cast<std::ptrdiff_t>(std::min(at, b.size()) + n));
        break;
      }
      case 5:  // truncate
        b.resize(rng.below(b.size() + 1));
        break;
      case 6: {  // splice in a piece of another input
        const Bytes& other = pool[rng.below(pool.size())];
        if (other.empty()) break;
        const size_t from = rng.below(other.size()), n = 1 + rng.below(other.size() - from);
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), other.begin() + static_cast<std::ptrdiff_t>(from),
                 other.begin() + static_cast<std::ptrdiff_t>(from + n));
        break;
      }
    }
  }
  if (b.size() > kMaxInput) b.resize(kMaxInput);
}

// The input being run, saved from the signal handler when it crashes.
const Bytes* gCurrent = nullptr;
char gCrashPath[256] = "fuzz-crash.bin";

void saveCurrent(int sig) {
  if (gCurrent != nullptr) {
    FILE* f = std::fopen(gCrashPath, "wb");
    if (f != nullptr) {
      std::fwrite(gCurrent->data(), 1, gCurrent->size(), f);
      std::fclose(f);
    }
    std::fprintf(stderr, "fuzz: input of %zu bytes that crashed saved to %s\n", gCurrent->size(), gCrashPath);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void run(const Bytes& b) {
  gCurrent = &b;
  // Like libFuzzer, never a null pointer, also for the empty input (targets
  // may memcpy from it).
  static const uint8_t kEmpty = 0;
  LLVMFuzzerTestOneInput(b.empty() ? &kEmpty : b.data(), b.size());
  gCurrent = nullptr;
}

int64_t envOr(const char* name, int64_t def) {
  const char* s = std::getenv(name);
  return s != nullptr && *s != '\0' ? std::strtoll(s, nullptr, 10) : def;
}

Bytes readFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

int writeSeeds(const std::string& dir) {
  mkdir(dir.c_str(), 0755);
  const std::vector<Bytes> all = seeds();
  for (size_t i = 0; i < all.size(); ++i) {
    std::ofstream out(dir + "/seed-" + std::to_string(i), std::ios::binary);
    out.write(reinterpret_cast<const char*>(all[i].data()), static_cast<std::streamsize>(all[i].size()));
  }
  std::printf("fuzz: wrote %zu seeds to %s\n", all.size(), dir.c_str());
  return 0;
}

}  // namespace
}  // namespace chorus::fuzz

int main(int argc, char** argv) {
  using namespace chorus::fuzz;
  int64_t iterations = envOr("CHORUS_FUZZ_ITERATIONS", 100000), seconds = envOr("CHORUS_FUZZ_SECONDS", 5);
  uint64_t seed = 1;
  std::vector<const char*> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--iterations" && hasValue)
      iterations = std::strtoll(argv[++i], nullptr, 10);
    else if (a == "--seconds" && hasValue)
      seconds = std::strtoll(argv[++i], nullptr, 10);
    else if (a == "--seed" && hasValue)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--write-seeds" && hasValue)
      return writeSeeds(argv[++i]);
    else
      files.push_back(argv[i]);
  }
  setenv("NCCL_DEBUG", "VERSION", 0);  // rejected junk would log a WARN per input
  std::snprintf(gCrashPath, sizeof(gCrashPath), "fuzz-crash-%d.bin", static_cast<int>(getpid()));
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, saveCurrent);
  if (!files.empty()) {
    for (const char* f : files) run(readFile(f));
    std::printf("fuzz: ran %zu file(s)\n", files.size());
    return 0;
  }
  std::vector<Bytes> pool = seeds();
  pool.emplace_back();  // the empty input
  for (const Bytes& b : pool) run(b);
  Rng rng(seed);
  const auto t0 = std::chrono::steady_clock::now();
  const auto limit = std::chrono::seconds(seconds);
  int64_t n = 0;
  for (; n < iterations && std::chrono::steady_clock::now() - t0 < limit; ++n) {
    Bytes b = pool[rng.below(pool.size())];
    mutate(b, pool, rng);
    run(b);
    // Keep some mutants as parents, so edits accumulate over generations.
    if (rng.below(8) == 0 && pool.size() < 256) pool.push_back(std::move(b));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("fuzz: %lld mutated inputs (+%zu seeds) in %.2f s, no failure\n", static_cast<long long>(n),
              seeds().size(), s);
  return 0;
}
