#include "tune/tuner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <strings.h>

#include "core/log.h"
#include "core/result.h"
#include "sched/tree.h"

namespace chorus {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string collKey(CollType c) { return lower(collName(c)); }

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
  std::string want = collKey(coll);
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

constexpr const char* kAlgoNames[] = {"ring", "tree", "direct"};
constexpr const char* kProtoNames[] = {"simple", "ll"};

double pipelineUs(int hops, double chunkBytes, double pieceBytes, double alphaUs, double betaGBs) {
  if (hops <= 0) return 0;
  double pieces = std::max(1.0, std::ceil(chunkBytes / pieceBytes));
  double piece = chunkBytes / pieces;
  return (hops + pieces - 1) * (alphaUs + piece / (betaGBs * 1e3));
}

}  // namespace

const char* algoName(Algo a) { return a == Algo::Ring ? "Ring" : a == Algo::Tree ? "Tree" : "Direct"; }
const char* protoName(Proto p) { return p == Proto::Simple ? "Simple" : "LL"; }

unsigned allowedAlgos(const std::string& spec, CollType coll) {
  if (spec.empty()) return 0x7;
  std::string section = sectionFor(spec, coll);
  if (section.empty()) return 0x7;
  return parseList(section, kAlgoNames, 3);
}

unsigned allowedProtos(const std::string& spec) {
  if (spec.empty()) return 0x3;
  unsigned m = parseList(spec, kProtoNames, 2);
  return m == 0 ? 0x3 : m;
}

double estimateUs(Algo algo, Proto proto, CollType coll, size_t bytes, int nranks, const CommConfig& cfg,
                  const CostParams& cost) {
  const double alpha = proto == Proto::LL ? cost.llAlphaUs : cost.alphaUs;
  const double beta = cost.betaGBs * (proto == Proto::LL ? cost.llBetaFactor : 1.0);
  const double piece = proto == Proto::LL ? cfg.llSlotBytes : cfg.slotBytes;
  const double S = static_cast<double>(bytes);
  const int n = nranks;
  if (n <= 1) return cost.launchUs + S / (cost.betaGBs * 1e3);
  double t = 0;
  switch (coll) {
    case CollType::AllReduce:
      if (algo == Algo::Tree) t = pipelineUs(2 * sched::treeDepth(n), S / 2, piece, alpha, beta);
      else if (algo == Algo::Direct) t = pipelineUs(1, S, piece, alpha, beta) + S / (cost.betaGBs * 1e3);
      else t = pipelineUs(2 * (n - 1), S / n, piece, alpha, beta);
      break;
    case CollType::AllGather:
    case CollType::ReduceScatter: t = pipelineUs(n - 1, S / n, piece, alpha, beta); break;
    case CollType::Broadcast:
    case CollType::Reduce: t = pipelineUs(n - 1, S, piece, alpha, beta); break;
    default: t = pipelineUs(1, S * (n - 1) / n, piece, alpha, beta); break;  // direct exchanges
  }
  return cost.launchUs + t;
}

ncclResult_t tuneTask(const Task& task, int nranks, const CommConfig& cfg, TuneDecision* out) {
  const size_t bytes = taskBytes(task, nranks);
  TuneDecision best;
  best.estimatedUs = -1;
  const bool p2p = task.type == CollType::Send || task.type == CollType::Recv || task.type == CollType::AlltoAll ||
                   task.type == CollType::Gather || task.type == CollType::Scatter;
  unsigned algos = p2p ? (1u << static_cast<int>(Algo::Direct)) : allowedAlgos(cfg.algo, task.type);
  if (task.type != CollType::AllReduce) algos &= ~(1u << static_cast<int>(Algo::Tree));
  // Direct exchange (both ranks reduce everything) exists for 2-rank all-reduce only.
  if (!p2p && (task.type != CollType::AllReduce || nranks != 2)) algos &= ~(1u << static_cast<int>(Algo::Direct));
  if (algos == 0) {
    // The forced algorithm does not implement this collective: use the ring.
    CHORUS_INFO(kLogTune, "NCCL_ALGO=%s has no algorithm for %s; using Ring", cfg.algo.c_str(), collName(task.type));
    algos = 1u << static_cast<int>(Algo::Ring);
  }
  const unsigned protos = p2p ? 1u : allowedProtos(cfg.proto);
  for (int a = 0; a < 3; ++a) {
    if (!(algos & (1u << a))) continue;
    for (int p = 0; p < 2; ++p) {
      if (!(protos & (1u << p))) continue;
      double us = estimateUs(static_cast<Algo>(a), static_cast<Proto>(p), task.type, bytes, nranks, cfg);
      CHORUS_INFO(kLogTune, "tune %s bytes=%zu nranks=%d candidate=%s/%s est_us=%.2f", collName(task.type), bytes,
                  nranks, algoName(static_cast<Algo>(a)), protoName(static_cast<Proto>(p)), us);
      if (best.estimatedUs < 0 || us < best.estimatedUs) {
        best.algo = static_cast<Algo>(a);
        best.proto = static_cast<Proto>(p);
        best.estimatedUs = us;
      }
    }
  }
  // Channels: enough that each carries at least a few slots of data.
  const size_t perChannel = 4 * static_cast<size_t>(cfg.slotBytes);
  int nch = static_cast<int>(std::min<size_t>(bytes / perChannel + 1, static_cast<size_t>(cfg.maxChannels)));
  best.nchannels = std::clamp(nch, cfg.minChannels, std::max(cfg.minChannels, cfg.maxChannels));
  CHORUS_INFO(kLogTune, "tune %s bytes=%zu nranks=%d choice=%s/%s channels=%d est_us=%.2f", collName(task.type),
              bytes, nranks, algoName(best.algo), protoName(best.proto), best.nchannels, best.estimatedUs);
  *out = best;
  return ncclSuccess;
}

}  // namespace chorus
