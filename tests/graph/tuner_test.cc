// The tuner over graphs of synthetic machines: small messages at large rank
// counts go to tree (or LL), large ones to ring/Simple; the crossover moves
// the right way with latency and bandwidth; overrides are honoured; the
// TUNING log line is one JSON object.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/log.h"
#include "enqueue/task_tune.h"
#include "graph/graph_test_util.h"
#include "transport/transport.h"

namespace chorus::graph::test {
namespace {

TuneKnobs freeConfig(int maxChannels = 16) {
  TuneKnobs c;
  c.minChannels = 1;
  c.maxChannels = maxChannels;
  return c;
}

MachineModel gpuCluster(int hosts, double latencyScale = 1, double bwScale = 1) {
  auto t = synthetic(SyntheticShape::NvSwitch, hosts, 8);
  t.netLatencyUs *= latencyScale;
  CommGraph g = searchOk(t);
  g.nicBwGBs *= bwScale;
  g.intraBwGBs *= bwScale;
  return machineModel(&g, g.nranks);
}

TuneDecision decide(CollType coll, size_t bytes, const MachineModel& m, const TuneKnobs& cfg) {
  return tuneCollective(coll, bytes, m, cfg).winner;
}

// Size (bisected to 1%) above which the ring wins.
double ringCrossover(const MachineModel& m) {
  double lo = 1024, hi = 1024;
  while (decide(CollType::AllReduce, static_cast<size_t>(hi), m, freeConfig()).algo != Algo::Ring) {
    lo = hi;
    hi *= 2;
    if (hi > 1e13) return 0;
  }
  while (hi / lo > 1.01) {
    const double mid = (lo + hi) / 2;
    (decide(CollType::AllReduce, static_cast<size_t>(mid), m, freeConfig()).algo == Algo::Ring ? hi : lo) = mid;
  }
  return hi;
}

TEST(Tuner, SmallMessagesAtScaleAvoidRingSimple) {
  for (int hosts : {16, 128}) {
    const MachineModel m = gpuCluster(hosts);
    const TuneDecision d = decide(CollType::AllReduce, 4096, m, freeConfig());
    EXPECT_TRUE(d.algo == Algo::Tree || d.proto == Proto::LL)
        << hosts << " hosts: " << algoName(d.algo) << "/" << protoName(d.proto);
    EXPECT_NE(d.algo, Algo::Ring);
  }
  // Host mode, one host: small AllReduce goes to recursive doubling over 8
  // ranks (3 hops), to the tree over 6 (no power of two).
  EXPECT_EQ(decide(CollType::AllReduce, 1024, machineModel(nullptr, 8), freeConfig(2)).algo, Algo::Direct);
  EXPECT_EQ(decide(CollType::AllReduce, 1024, machineModel(nullptr, 6), freeConfig(2)).algo, Algo::Tree);
}

// GPU kernels cannot send LL across hosts (the network proxy forwards only
// what `tail` publishes): a GPU-mode communicator spanning hosts is offered
// Simple only, even for tiny messages where LL would win.
TEST(Tuner, GpuKernelsAcrossHostsUseSimpleOnly) {
  MachineModel m = gpuCluster(16);
  ASSERT_EQ(decide(CollType::AllReduce, 8, m, freeConfig()).proto, Proto::LL) << "LL should win here by default";
  m.llAcrossHosts = false;
  const TuneResult r = tuneCollective(CollType::AllReduce, 8, m, freeConfig());
  EXPECT_EQ(r.winner.proto, Proto::Simple);
  for (const TuneCandidate& c : r.candidates) EXPECT_EQ(c.proto, Proto::Simple) << algoName(c.algo);
}

// The communicator's mode reaches the model through TuneInputs: the same
// graph offers LL across hosts to host-mode ranks only.
TEST(Tuner, ModeOfTheInputsDecidesLlAcrossHosts) {
  auto t = synthetic(SyntheticShape::NvSwitch, 16, 8);
  const CommGraph g = searchOk(t);
  TuneInputs in;
  in.nranks = g.nranks;
  in.graph = &g;
  in.knobs = freeConfig();
  in.hostMode = true;
  EXPECT_EQ(tuneCollective(CollType::AllReduce, 8, in).proto, Proto::LL);
  in.hostMode = false;
  EXPECT_FALSE(machineModel(in).llAcrossHosts);
  EXPECT_EQ(tuneCollective(CollType::AllReduce, 8, in).proto, Proto::Simple);
}

// One host, GPU mode: LL wins a tiny AllReduce, unless some ranks talk
// through the network transport, whose proxy cannot forward LL: see
// PeersOnOtherHostsOrOtherProcessesWithoutShmAreBehindTheProxy.
TEST(Tuner, GpuRanksOfOneHostBehindTheProxyUseSimpleOnly) {
  auto t = synthetic(SyntheticShape::NvSwitch, 1, 8);
  const CommGraph g = searchOk(t);
  TuneInputs in;
  in.nranks = g.nranks;
  in.graph = &g;
  in.knobs = freeConfig();
  in.hostMode = false;
  ASSERT_EQ(tuneCollective(CollType::AllReduce, 8, in).proto, Proto::LL) << "LL should win on one host";
  in.proxiedPeers = true;
  EXPECT_EQ(tuneCollective(CollType::AllReduce, 8, in).proto, Proto::Simple);
  in.hostMode = true;  // host threads move LL through the proxy
  EXPECT_EQ(machineModel(in).llAcrossHosts, true);
}

// Which communicators' peers may talk through the network proxy: any on
// another host (whatever the graph says: CHORUS_GRAPH_FLAT builds it as one
// host, the transports still go by host hashes), and, with shm off, several
// processes on one host.
TEST(Tuner, PeersOnOtherHostsOrOtherProcessesWithoutShmAreBehindTheProxy) {
  auto peer = [](uint64_t host, uint64_t process) {
    PeerInfo p;
    p.hostHash = host;
    p.processToken = process;
    return p;
  };
  const std::vector<PeerInfo> oneProcess = {peer(7, 1), peer(7, 1), peer(7, 1)};
  const std::vector<PeerInfo> twoProcesses = {peer(7, 1), peer(7, 2)};
  const std::vector<PeerInfo> twoHosts = {peer(7, 1), peer(8, 2)};
  EXPECT_FALSE(peersBehindProxy(oneProcess, false));
  EXPECT_FALSE(peersBehindProxy(oneProcess, true));
  EXPECT_FALSE(peersBehindProxy(twoProcesses, false));
  EXPECT_TRUE(peersBehindProxy(twoProcesses, true));
  EXPECT_TRUE(peersBehindProxy(twoHosts, false));
  EXPECT_TRUE(peersBehindProxy(twoHosts, true));
}

// Point-to-point operations get the Direct algorithm, one channel, Simple.
TEST(Tuner, PointToPointOperationsGoDirect) {
  const MachineModel m = gpuCluster(2);
  int p2p = 0;
  for (CollType c :
       {CollType::AllReduce, CollType::Broadcast, CollType::Reduce, CollType::AllGather, CollType::ReduceScatter,
        CollType::AlltoAll, CollType::Gather, CollType::Scatter, CollType::Send, CollType::Recv}) {
    const TuneDecision d = decide(c, 1 << 20, m, freeConfig());
    if (!isPointToPoint(c)) {
      EXPECT_NE(d.algo, Algo::Direct) << collName(c);
      continue;
    }
    ++p2p;
    EXPECT_EQ(d.algo, Algo::Direct) << collName(c);
    EXPECT_EQ(d.proto, Proto::Simple) << collName(c);
    EXPECT_EQ(d.nchannels, 1) << collName(c);
  }
  EXPECT_EQ(p2p, 5);
}

TEST(Tuner, LargeMessagesUseRingSimpleWithSeveralChannels) {
  const MachineModel m = gpuCluster(16);
  const TuneDecision d = decide(CollType::AllReduce, size_t(1) << 30, m, freeConfig());
  EXPECT_EQ(d.algo, Algo::Ring);
  EXPECT_EQ(d.proto, Proto::Simple);
  EXPECT_GT(d.nchannels, 1);
  const MachineModel host = machineModel(nullptr, 8);
  const TuneDecision h = decide(CollType::AllReduce, size_t(64) << 20, host, freeConfig(2));
  EXPECT_EQ(h.algo, Algo::Ring);
  EXPECT_EQ(h.proto, Proto::Simple);
}

TEST(Tuner, CrossoverMovesWithLatencyAndBandwidth) {
  const double base = ringCrossover(gpuCluster(32));
  const double slowNet = ringCrossover(gpuCluster(32, 4.0));
  const double fastNic = ringCrossover(gpuCluster(32, 1.0, 4.0));
  printf("[ tuner ] ring crossover: base %.3g, 4x latency %.3g, 4x bandwidth %.3g bytes\n", base, slowNet, fastNic);
  ASSERT_GT(base, 0);
  EXPECT_GT(slowNet, base);  // more latency: latency-lean algorithms win longer
  EXPECT_GT(fastNic, base);  // more bandwidth: bandwidth terms shrink, latency dominates longer
}

// Host-mode ranks on 2 hosts of `perHost` over one 10 Gb/s NIC each (sockets, 5 us).
MachineModel socketHosts(int perHost) {
  SyntheticSpec spec;
  spec.shape = SyntheticShape::Host;
  spec.hosts = 2;
  spec.perHost = perHost;
  spec.nics = 1;
  spec.netBwGBs = 1.25;
  spec.netLatencyUs = 5.0;
  const CommGraph g = searchOk(syntheticCommTopology(spec));
  return machineModel(&g, g.nranks, true);
}

// Host-mode ranks on 2 hosts x 2 over one 10 Gb/s NIC each (sockets): a
// second channel only adds a TCP message to every hop that leaves a host, so
// a 32 KiB AllReduce keeps one channel whatever the algorithm; 64 MiB
// still spreads over several, where the intra-host copies gain from them.
TEST(Tuner, ChannelsAcrossHostsPayForTheirMessages) {
  const MachineModel m = socketHosts(2);
  ASSERT_EQ(m.nhosts, 2);
  const TuneResult small = tuneCollective(CollType::AllReduce, 32 << 10, m, freeConfig(2));
  for (const TuneCandidate& c : small.candidates) EXPECT_EQ(c.nchannels, 1) << algoName(c.algo);
  // The price is what the extra messages cost: hier with 2 channels is
  // dearer than with 1 by 2 inter hops x 2 ranks' messages x netMessageUs,
  // less what the second channel gains on the intra-host copies.
  const double one = estimateUs(Algo::Hier, Proto::Simple, CollType::AllReduce, 32 << 10, 1, m);
  const double two = estimateUs(Algo::Hier, Proto::Simple, CollType::AllReduce, 32 << 10, 2, m);
  EXPECT_GT(two, one);
  EXPECT_GE(two - one, 4 * m.netMessageUs - 32768.0 / (m.channelBwGBs * 1e3));
  const TuneDecision big = decide(CollType::AllReduce, size_t(64) << 20, m, freeConfig(2));
  EXPECT_EQ(big.nchannels, 2) << algoName(big.algo);
}

// Host-mode ranks on 2 hosts x 1 over a 10 Gb/s NIC: both the direct
// exchange and the 2-rank ring send S per rank through the NIC; direct saves
// a hop and reduces S/2 more on the rank's own CPU. That reduction costs the
// rank's copy rate, not the NIC's, so direct wins up to 64 KiB (measured on
// loopback: 15 us against the ring's 21-28 at 32 KiB) and the ring takes over
// where the extra reduction outweighs a hop.
TEST(Tuner, TwoRanksAcrossHostsReduceAtTheirOwnRateNotTheNics) {
  const MachineModel m = socketHosts(1);
  ASSERT_EQ(m.nhosts, 2);
  for (size_t bytes : {size_t(8) << 10, size_t(32) << 10, size_t(64) << 10})
    EXPECT_EQ(decide(CollType::AllReduce, bytes, m, freeConfig(2)).algo, Algo::Direct) << bytes;
  EXPECT_EQ(decide(CollType::AllReduce, size_t(1) << 20, m, freeConfig(2)).algo, Algo::Ring);
  // Direct's price over the ring's: one hop less, the extra S/4 reduced at the
  // rank's copy rate (one channel: channelBwGBs).
  const double S = 32 << 10;
  const double ring = estimateUs(Algo::Ring, Proto::Simple, CollType::AllReduce, 32 << 10, 1, m);
  const double direct = estimateUs(Algo::Direct, Proto::Simple, CollType::AllReduce, 32 << 10, 1, m);
  EXPECT_NEAR(direct - ring, 0.25 * S / (m.channelBwGBs * 1e3) - m.interHopUs[static_cast<int>(Proto::Simple)], 1e-6);
}

TEST(Tuner, HierIsACandidateAcrossHosts) {
  const MachineModel m = gpuCluster(8);
  TuneResult r = tuneCollective(CollType::AllReduce, 1 << 20, m, freeConfig());
  bool hier = false;
  for (const TuneCandidate& c : r.candidates) hier |= c.algo == Algo::Hier;
  EXPECT_TRUE(hier);
  // One host: hier is a ring and is not offered unless forced.
  r = tuneCollective(CollType::AllReduce, 1 << 20, machineModel(nullptr, 8), freeConfig());
  for (const TuneCandidate& c : r.candidates) EXPECT_NE(c.algo, Algo::Hier);
}

TEST(Tuner, OverridesAreHonoured) {
  const MachineModel m = gpuCluster(16);
  TuneKnobs cfg = freeConfig();
  cfg.algo = "ring";
  EXPECT_EQ(decide(CollType::AllReduce, 1024, m, cfg).algo, Algo::Ring);
  cfg.algo = "hier";
  EXPECT_EQ(decide(CollType::AllReduce, 1024, m, cfg).algo, Algo::Hier);
  cfg.algo = "^ring,hier";
  const TuneDecision big = decide(CollType::AllReduce, size_t(1) << 30, m, cfg);
  EXPECT_TRUE(big.algo == Algo::Tree || big.algo == Algo::Direct);
  cfg.algo = "allgather:ring;allreduce:tree";
  EXPECT_EQ(decide(CollType::AllReduce, size_t(1) << 30, m, cfg).algo, Algo::Tree);
  cfg.algo = "tree";  // no tree AllGather: falls back to the ring
  EXPECT_EQ(decide(CollType::AllGather, 1 << 20, m, cfg).algo, Algo::Ring);
  cfg.algo.clear();
  cfg.proto = "LL";
  EXPECT_EQ(decide(CollType::AllReduce, size_t(1) << 30, m, cfg).proto, Proto::LL);
  cfg.proto = "simple";
  EXPECT_EQ(decide(CollType::AllReduce, 64, m, cfg).proto, Proto::Simple);
  cfg.proto.clear();
  cfg.minChannels = cfg.maxChannels = 3;
  EXPECT_EQ(decide(CollType::AllReduce, 64, m, cfg).nchannels, 3);
  EXPECT_EQ(decide(CollType::AllReduce, size_t(1) << 30, m, cfg).nchannels, 3);
  cfg.minChannels = 1;
  cfg.maxChannels = 1;
  EXPECT_EQ(decide(CollType::AllReduce, size_t(1) << 30, m, cfg).nchannels, 1);
  EXPECT_EQ(allowedAlgos("Hier", CollType::AllReduce), 1u << static_cast<int>(Algo::Hier));
}

// ---- A minimal JSON reader, enough to check the TUNING line ----

struct Json;
using JsonObject = std::map<std::string, Json>;
using JsonArray = std::vector<Json>;
struct Json {
  std::variant<std::nullptr_t, double, std::string, JsonArray, JsonObject> v;
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  bool parse(Json* out) {
    if (!value(out)) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool lit(const char* w) {
    const size_t n = strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool str(std::string* out) {
    if (s_[i_] != '"') return false;
    for (++i_; i_ < s_.size() && s_[i_] != '"'; ++i_) {
      if (s_[i_] == '\\') return false;  // the tuner never escapes
      out->push_back(s_[i_]);
    }
    return i_++ < s_.size();
  }
  bool value(Json* out) {
    ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == 'n') return lit("null") && (out->v = nullptr, true);
    if (c == '"') {
      std::string s;
      if (!str(&s)) return false;
      out->v = s;
      return true;
    }
    if (c == '[') {
      JsonArray a;
      ++i_;
      ws();
      if (s_[i_] == ']') return ++i_, out->v = a, true;
      for (;;) {
        Json e;
        if (!value(&e)) return false;
        a.push_back(e);
        ws();
        if (s_[i_] == ']') return ++i_, out->v = a, true;
        if (s_[i_++] != ',') return false;
      }
    }
    if (c == '{') {
      JsonObject o;
      ++i_;
      for (;;) {
        ws();
        std::string key;
        if (!str(&key)) return false;
        ws();
        if (s_[i_++] != ':') return false;
        Json e;
        if (!value(&e)) return false;
        o[key] = e;
        ws();
        if (s_[i_] == '}') return ++i_, out->v = o, true;
        if (s_[i_++] != ',') return false;
      }
    }
    char* end = nullptr;
    const double d = strtod(s_.c_str() + i_, &end);
    if (end == s_.c_str() + i_) return false;
    i_ = end - s_.c_str();
    out->v = d;
    return true;
  }
  const std::string& s_;
  size_t i_ = 0;
};

TEST(Tuner, TuningLineIsJson) {
  char path[] = "/tmp/chorus_tuning_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  logReset();
  auto t = synthetic(SyntheticShape::NvSwitch, 4, 8);
  CommGraph g = searchOk(t);
  Task task;
  task.type = CollType::AllReduce;
  task.count = 262144;
  task.dtype = ncclFloat32;
  CommConfig cfg;
  cfg.minChannels = 1;
  cfg.maxChannels = 16;
  cfg.algo = "ring,tree";
  TuneDecision d;
  EXPECT_EQ(tuneTask(task, g.nranks, cfg, &g, &d), ncclSuccess);
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG_FILE");
  logReset();
  std::ifstream in(path);
  std::string line, json;
  while (std::getline(in, line))
    if (line.find("TUNING {") != std::string::npos) json = line.substr(line.find("TUNING {") + 7);
  unlink(path);
  ASSERT_FALSE(json.empty()) << "no TUNING line logged";
  Json doc;
  ASSERT_TRUE(JsonParser(json).parse(&doc)) << json;
  const auto& o = std::get<JsonObject>(doc.v);
  EXPECT_EQ(std::get<std::string>(o.at("coll").v), "AllReduce");
  EXPECT_EQ(std::get<double>(o.at("bytes").v), 1048576.0);
  EXPECT_EQ(std::get<double>(o.at("nranks").v), 32.0);
  EXPECT_EQ(std::get<double>(o.at("nhosts").v), 4.0);
  EXPECT_EQ(std::get<std::string>(o.at("forced").v), "NCCL_ALGO");
  const auto& cands = std::get<JsonArray>(o.at("candidates").v);
  EXPECT_EQ(cands.size(), 4u);  // {ring, tree} x {simple, ll}
  const auto& w = std::get<JsonObject>(o.at("winner").v);
  EXPECT_EQ(std::get<std::string>(w.at("algo").v), d.algo == Algo::Ring ? "ring" : "tree");
  EXPECT_EQ(std::get<double>(w.at("nch").v), d.nchannels);
  double best = 1e300;
  for (const Json& c : cands) best = std::min(best, std::get<double>(std::get<JsonObject>(c.v).at("us").v));
  EXPECT_NEAR(std::get<double>(w.at("us").v), best, 1e-3);
}

}  // namespace
}  // namespace chorus::graph::test
