#include "tune/cost_model.h"

#include <algorithm>
#include <bit>

#include "sched/segment.h"
#include "sched/tree.h"

namespace chorus {
namespace {

using topo::PathType;

// Host mode: a hop is a shared-memory slot hand-over; one rank copies about
// 6 GB/s; a single channel reaches ~60% of that (the other 40% is waiting
// for the neighbour), two overlap the waits.
constexpr double kHostRankBwGBs = 6.0;
constexpr double kHostChannelShare = 0.6;

// GPU hop latency (Simple, LL) by the worst path class of a ring hop.
void gpuHopUs(PathType t, double* simple, double* ll) {
  if (t <= PathType::C2C)
    *simple = 1.0, *ll = 0.4;
  else if (t <= PathType::PHB)
    *simple = 1.5, *ll = 0.6;
  else
    *simple = 2.0, *ll = 0.8;
}

// GB/s -> bytes per microsecond.
double perUs(double gbs) { return gbs * 1e3; }

double protoBw(const MachineModel& m, Proto p, double bw) { return p == Proto::LL ? bw * m.llBwFactor : bw; }

double intraBw(const MachineModel& m, int nch) {
  return std::min(std::min(nch, m.foundChannels) * m.channelBwGBs, m.rankBwGBs);
}
double interBw(const MachineModel& m, int nch) { return std::min(nch, std::max(1, m.nics)) * m.nicBwGBs; }
double ringBw(const MachineModel& m, int nch) {
  return m.nhosts > 1 ? std::min(intraBw(m, nch), interBw(m, nch)) : intraBw(m, nch);
}

// Average latency of one hop of a ring over all ranks (H of its n hops leave a host).
double ringHopUs(const MachineModel& m, Proto p) {
  const int pi = static_cast<int>(p);
  if (m.nhosts <= 1 || m.nranks <= 0) return m.intraHopUs[pi];
  const double inter = static_cast<double>(m.nhosts) / m.nranks;
  return inter * m.interHopUs[pi] + (1 - inter) * m.intraHopUs[pi];
}

double treeLatencyUs(const MachineModel& m, Proto p) {
  const int pi = static_cast<int>(p);
  if (m.nhosts <= 1) return 2.0 * sched::treeDepth(m.nranks) * m.intraHopUs[pi];
  const int depth = sched::treeDepth(m.nhosts);
  return 2.0 * (depth * m.interHopUs[pi] + (m.ranksPerHost - 1) * m.intraHopUs[pi]);
}

// Messages one of a host's NICs sends in turn when G ranks of the host cross at once.
int messagesPerNic(const MachineModel& m, int G) { return (G + std::max(1, m.nics) - 1) / std::max(1, m.nics); }

// An inter-host hop of hier: all G ranks of a host send at once through its NICs.
double hierInterHopUs(const MachineModel& m, Proto p, int G) {
  return m.interHopUs[static_cast<int>(p)] + (messagesPerNic(m, G) - 1) * m.netMessageUs;
}

// Each channel beyond the first cuts every message that leaves a host into
// one more, and each costs the host's NIC (in host mode its kernel's TCP
// path) netMessageUs: `interMessages` is how many such messages the
// algorithm's critical path sends through one NIC in turn with one channel.
double extraChannelMessagesUs(const MachineModel& m, int nch, double interMessages) {
  if (m.nhosts <= 1) return 0;
  return (nch - 1) * interMessages * m.netMessageUs;
}

// Of a ring's `hops` hops, the share that leaves a host (H of its n links).
double ringInterHops(const MachineModel& m, double hops) {
  return m.nhosts > 1 ? hops * m.nhosts / std::max(1, m.nranks) : 0;
}

// Direct all-reduce: one exchange (2 ranks) or log2(n) of them (recursive
// doubling); with G ranks per host placed in rank order the first log2(G)
// stay inside a host, and in each later one all G ranks of a host cross.
// Each exchange moves S over the ring's slowest link and reduces S where the
// ring reduces S/2 per pass: the extra quarter is local work, priced at the
// rank's own bandwidth (intraBw), not at a NIC's.
double directUs(const MachineModel& m, Proto p, double S, double fixed, double hop, double bw, int nch) {
  const int n = m.nranks;
  if (!sched::directAllReduceRanks(n)) return -1;
  const double exchangeUs = S / bw + 0.25 * S / perUs(protoBw(m, p, intraBw(m, nch)));
  if (n == 2) return fixed + hop + exchangeUs + extraChannelMessagesUs(m, nch, 1);
  const int rounds = static_cast<int>(std::bit_width(static_cast<unsigned>(n - 1)));  // log2 n
  const int inter =
      std::min(rounds, static_cast<int>(std::bit_width(static_cast<unsigned>(std::max(1, m.nhosts) - 1))));
  const double lat =
      (rounds - inter) * m.intraHopUs[static_cast<int>(p)] + inter * hierInterHopUs(m, p, m.ranksPerHost);
  return fixed + lat + rounds * exchangeUs + extraChannelMessagesUs(m, nch, inter * messagesPerNic(m, m.ranksPerHost));
}

}  // namespace

MachineModel machineModel(const graph::CommGraph* g, int nranks) {
  return machineModel(g, nranks, g == nullptr || g->cpuDevices);
}

MachineModel machineModel(const graph::CommGraph* g, int nranks, bool hostMode) {
  MachineModel m;
  m.nranks = std::max(1, nranks);
  m.ranksPerHost = m.nranks;
  m.rankBwGBs = kHostRankBwGBs;
  m.channelBwGBs = kHostRankBwGBs * kHostChannelShare;
  if (g == nullptr || g->nranks != nranks || g->nchannels() == 0) return m;
  m.nhosts = std::max(1, g->nhosts);
  m.ranksPerHost = *std::max_element(g->ranksOnHost.begin(), g->ranksOnHost.end());
  m.uniformHosts = g->ranksPerHost > 0;
  m.hostMode = hostMode;
  m.nicBwGBs = g->nicBwGBs > 0 ? g->nicBwGBs : g->netBwGBs;
  m.nics = std::max(1, g->nicsPerHost);
  if (!m.hostMode) {
    m.foundChannels = std::max(1, g->searchedChannels);
    m.channelBwGBs = g->intraBwGBs > 0 ? std::min(g->intraBwGBs, 1e6) : 1.0;
    m.rankBwGBs = 1e9;
    m.llBwFactor = 0.5;
    m.launchUs = 4.0;
    m.channelUs = 0.05;
    m.netMessageUs = 0.5;
    gpuHopUs(g->typeIntra, &m.intraHopUs[0], &m.intraHopUs[1]);
  }
  for (int p = 0; p < kNumProtos; ++p) m.interHopUs[p] = g->netLatencyUs + m.intraHopUs[p];
  return m;
}

double estimateUs(Algo algo, Proto proto, CollType coll, size_t bytes, int nch, const MachineModel& m) {
  const double S = static_cast<double>(bytes);
  const int n = m.nranks;
  nch = std::max(1, nch);
  const double fixed = m.launchUs + (nch - 1) * m.channelUs;
  if (n <= 1) return fixed + S / perUs(m.rankBwGBs);
  const double bw = perUs(protoBw(m, proto, ringBw(m, nch)));
  const double hop = ringHopUs(m, proto);
  const int pi = static_cast<int>(proto);
  switch (coll) {
    case CollType::AllReduce:
      switch (algo) {
        case Algo::Ring:
          return fixed + 2.0 * (n - 1) * hop + 2.0 * (n - 1) / n * S / bw +
                 extraChannelMessagesUs(m, nch, ringInterHops(m, 2.0 * (n - 1)));
        case Algo::Tree:
          return fixed + treeLatencyUs(m, proto) + 2.0 * S / (0.9 * bw) +
                 extraChannelMessagesUs(m, nch, 2.0 * sched::treeDepth(m.nhosts));
        case Algo::Direct:
          return directUs(m, proto, S, fixed, hop, bw, nch);
        case Algo::Hier: {
          if (!m.uniformHosts) return -1;
          const int H = m.nhosts, G = std::max(1, n / H);
          const double lat = 2.0 * (G - 1) * m.intraHopUs[pi] + 2.0 * (H - 1) * hierInterHopUs(m, proto, G);
          const double intra = perUs(protoBw(m, proto, intraBw(m, nch)));
          const double inter = perUs(protoBw(m, proto, interBw(m, nch)));
          return fixed + lat + 2.0 * (G - 1) / G * S / intra + (H > 1 ? 2.0 * (H - 1) / H * S / inter : 0) +
                 extraChannelMessagesUs(m, nch, 2.0 * (H - 1) * messagesPerNic(m, G));
        }
      }
      return -1;
    case CollType::AllGather:
    case CollType::ReduceScatter:
      if (algo != Algo::Ring) return -1;
      return fixed + (n - 1) * hop + static_cast<double>(n - 1) / n * S / bw +
             extraChannelMessagesUs(m, nch, ringInterHops(m, n - 1));
    case CollType::Broadcast:
    case CollType::Reduce:
      if (algo != Algo::Ring) return -1;
      return fixed + (n - 1) * hop + S / bw + extraChannelMessagesUs(m, nch, ringInterHops(m, n - 1));
    default:
      if (algo != Algo::Direct) return -1;
      return fixed + hop + static_cast<double>(n - 1) / n * S / bw;
  }
}

}  // namespace chorus
