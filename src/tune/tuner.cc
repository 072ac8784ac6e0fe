#include "tune/tuner.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "core/log.h"
#include "core/result.h"
#include "sched/segment.h"

namespace chorus {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Applies one "a,b" or "^a,b" list to the names table.
unsigned parseList(const std::string& list, const char* const* names, int count) {
  bool invert = !list.empty() && list[0] == '^';
  unsigned mask = 0;
  size_t pos = invert ? 1 : 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string tok = lower(list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    for (int i = 0; i < count; ++i)
      if (tok == names[i]) mask |= 1u << i;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  unsigned all = (1u << count) - 1;
  return invert ? (all & ~mask) : mask;
}

// Picks the part of a "coll:list;coll:list" spec that applies to `coll`.
std::string sectionFor(const std::string& spec, CollType coll) {
  if (spec.find(':') == std::string::npos) return spec;
  std::string want = lower(collName(coll));
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t semi = spec.find(';', pos);
    std::string part = spec.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    size_t colon = part.find(':');
    if (colon != std::string::npos && lower(part.substr(0, colon)) == want) return part.substr(colon + 1);
    if (semi == std::string::npos) break;
    pos = semi + 1;
  }
  return "";
}

constexpr const char* kAlgoNames[kNumAlgos] = {"ring", "tree", "direct", "hier"};
constexpr const char* kProtoNames[kNumProtos] = {"simple", "ll"};
constexpr unsigned kAllAlgos = (1u << kNumAlgos) - 1;

unsigned bit(Algo a) { return 1u << static_cast<int>(a); }

// Algorithms that implement `coll` here. Hier is offered only where it is
// not just a ring (several hosts with several ranks each), unless forced.
unsigned implementable(CollType coll, const MachineModel& m, bool forced) {
  if (isPointToPoint(coll)) return bit(Algo::Direct);
  if (coll != CollType::AllReduce) return bit(Algo::Ring);
  unsigned a = bit(Algo::Ring) | bit(Algo::Tree);
  // Recursive doubling (n > 2) runs in host mode only until the lane kernel
  // has run it on a device.
  if (m.nranks == 2 || (m.hostMode && sched::directAllReduceRanks(m.nranks))) a |= bit(Algo::Direct);
  if (m.uniformHosts && (forced || (m.nhosts > 1 && m.ranksPerHost > 1))) a |= bit(Algo::Hier);
  return a;
}

void appendCandidate(std::string& s, const TuneCandidate& c) {
  char buf[160];
  snprintf(buf, sizeof(buf), "{\"algo\":\"%s\",\"proto\":\"%s\",\"nch\":%d,\"us\":%.3f}", kAlgoNames[(int)c.algo],
           kProtoNames[(int)c.proto], c.nchannels, c.us);
  s += buf;
}

}  // namespace

unsigned allowedAlgos(const std::string& spec, CollType coll) {
  if (spec.empty()) return kAllAlgos;
  std::string section = sectionFor(spec, coll);
  if (section.empty()) return kAllAlgos;
  return parseList(section, kAlgoNames, kNumAlgos);
}

unsigned allowedProtos(const std::string& spec) {
  if (spec.empty()) return 0x3;
  unsigned m = parseList(spec, kProtoNames, kNumProtos);
  return m == 0 ? 0x3 : m;
}

TuneResult tuneCollective(CollType coll, size_t bytes, const MachineModel& m, const TuneKnobs& cfg) {
  TuneResult r;
  const unsigned requested = allowedAlgos(cfg.algo, coll);
  const bool algoForced = requested != kAllAlgos;
  unsigned algos = requested & implementable(coll, m, algoForced);
  if (algos == 0) {
    CHORUS_INFO(kLogTune, "NCCL_ALGO=%s has no algorithm for %s; using Ring", cfg.algo.c_str(), collName(coll));
    algos = isPointToPoint(coll) ? bit(Algo::Direct) : bit(Algo::Ring);
  }
  unsigned protos = isPointToPoint(coll) ? 1u : allowedProtos(cfg.proto);
  if (!m.llAcrossHosts && (m.nhosts > 1 || m.proxiedPeers)) protos &= 1u << static_cast<int>(Proto::Simple);
  if (protos == 0) protos = 1u << static_cast<int>(Proto::Simple);
  if (algoForced && !isPointToPoint(coll)) r.forced = "NCCL_ALGO";
  if (!cfg.proto.empty() && !isPointToPoint(coll)) r.forced += r.forced.empty() ? "NCCL_PROTO" : ",NCCL_PROTO";
  const int lo = std::max(1, cfg.minChannels);
  const int hi = isPointToPoint(coll) ? lo : std::max(lo, cfg.maxChannels);
  r.winner.estimatedUs = -1;
  for (int a = 0; a < kNumAlgos; ++a) {
    if (!(algos & (1u << a))) continue;
    for (int p = 0; p < kNumProtos; ++p) {
      if (!(protos & (1u << p))) continue;
      TuneCandidate best{static_cast<Algo>(a), static_cast<Proto>(p), lo, -1};
      for (int nch = lo; nch <= hi; ++nch) {
        const double us = estimateUs(best.algo, best.proto, coll, bytes, nch, m);
        if (us >= 0 && (best.us < 0 || us < best.us)) best.nchannels = nch, best.us = us;
      }
      if (best.us < 0) continue;
      r.candidates.push_back(best);
      if (r.winner.estimatedUs < 0 || best.us < r.winner.estimatedUs)
        r.winner = TuneDecision{best.algo, best.proto, best.nchannels, best.us};
    }
  }
  if (r.winner.estimatedUs < 0) {  // nothing applicable (cannot happen with the fallbacks above)
    r.winner = TuneDecision{isPointToPoint(coll) ? Algo::Direct : Algo::Ring, Proto::Simple, lo, 0};
  }
  return r;
}

std::string tuningJson(CollType coll, size_t bytes, const MachineModel& m, const TuneResult& r) {
  char head[200];
  snprintf(head, sizeof(head), "{\"coll\":\"%s\",\"bytes\":%zu,\"nranks\":%d,\"nhosts\":%d,\"candidates\":[",
           collName(coll), bytes, m.nranks, m.nhosts);
  std::string s = head;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    if (i) s += ",";
    appendCandidate(s, r.candidates[i]);
  }
  s += "],\"winner\":";
  appendCandidate(s, TuneCandidate{r.winner.algo, r.winner.proto, r.winner.nchannels, r.winner.estimatedUs});
  s += ",\"forced\":";
  s += r.forced.empty() ? "null" : "\"" + r.forced + "\"";
  return s + "}";
}

MachineModel machineModel(const TuneInputs& in) {
  MachineModel model = machineModel(in.graph, in.nranks, in.hostMode);
  if (!in.hostMode) model.llAcrossHosts = false;
  model.proxiedPeers = in.proxiedPeers;
  return model;
}

TuneDecision tuneCollective(CollType coll, size_t bytes, const TuneInputs& in) {
  const MachineModel model = machineModel(in);
  const TuneResult r = tuneCollective(coll, bytes, model, in.knobs);
  if (logEnabled(LogLevel::Info, kLogTune))
    CHORUS_INFO(kLogTune, "TUNING %s", tuningJson(coll, bytes, model, r).c_str());
  return r.winner;
}

}  // namespace chorus
