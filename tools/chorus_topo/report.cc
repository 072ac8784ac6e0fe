#include "chorus_topo/report.h"

#include <algorithm>
#include <string>

#include "enqueue/task_tune.h"
#include "graph/links.h"
#include "topo/describe.h"

namespace chorus::tools {
namespace {

// "0-7", "0,4,8,12" or "0,4,8,... (64 ranks)".
std::string rankList(const std::vector<int>& ranks) {
  if (ranks.empty()) return "-";
  bool contiguous = true;
  for (size_t i = 1; i < ranks.size(); ++i) contiguous &= ranks[i] == ranks[i - 1] + 1;
  if (contiguous && ranks.size() > 2) return std::to_string(ranks.front()) + "-" + std::to_string(ranks.back());
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) s += ",... (" + std::to_string(ranks.size()) + " ranks)";
  return s;
}

std::string hostSignature(const topo::CommTopology& t, int h) {
  int nranks = 0;
  for (const topo::RankPlace& p : t.ranks) nranks += p.host == h;
  return std::to_string(t.hosts[h].nodes.size()) + "/" + std::to_string(t.hosts[h].links.size()) + "/" +
         std::to_string(nranks);
}

std::string nicLabel(const topo::CommTopology& t, int host, int nic) {
  if (nic < 0) return "[net]";
  const topo::Node& n = t.hosts[host].nodes[nic];
  return "[NIC " + std::to_string(n.index) + (n.name.empty() ? "" : " " + n.name) + "]";
}

bool sameRing(const graph::RingChannel& a, const graph::RingChannel& b) { return a.order == b.order && a.nic == b.nic; }

// One line for channels [first, last] (they share one ring).
void printRing(FILE* out, const topo::CommTopology& t, const graph::CommGraph& g, int first, int last) {
  const graph::RingChannel& ring = g.rings[first];
  std::string line;
  const int shownHosts = std::min(g.nhosts, 3);
  for (int h = 0; h < shownHosts; ++h) {
    if (g.nhosts > 1)
      line += (h ? " | " : " ") + std::string("h") + std::to_string(h) + " " + nicLabel(t, h, ring.nic[h]);
    const int shown = std::min(g.ranksOnHost[h], 16);
    for (int i = 0; i < shown; ++i) line += " " + std::to_string(ring.order[ring.hostStart[h] + i]);
    if (g.ranksOnHost[h] > shown) line += " ...(" + std::to_string(g.ranksOnHost[h]) + " ranks)";
    if (g.nhosts > 1) line += " " + nicLabel(t, h, ring.nic[h]);
  }
  if (g.nhosts > shownHosts) line += " | ... " + std::to_string(g.nhosts - shownHosts) + " more hosts";
  if (g.nhosts == 1) line += "  (-> " + std::to_string(ring.order[0]) + ")";
  const std::string label = first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
  fprintf(out, "  ch %5s:%s\n", label.c_str(), line.c_str());
}

void printTree(FILE* out, const graph::CommGraph& g, int tree) {
  int root = -1, maxDepth = 0, deepest = 0;
  const int sample = std::min(g.nranks, 4096);  // depth of every rank up to this many
  for (int r = 0; r < g.nranks; ++r)
    if (graph::treeLinks(g, 0, tree, r).parent < 0) root = r;
  for (int r = 0; r < sample; ++r) {
    const int d = graph::treeDepthOf(g, 0, tree, r);
    if (d > maxDepth) maxDepth = d, deepest = r;
  }
  fprintf(out, "  tree %d: root rank %d (host %d), deepest rank %d at %d hops\n", tree, root,
          root >= 0 ? g.hostOfRank[root] : -1, deepest, maxDepth);
  std::string edges;
  const int shown = std::min(g.nranks, 16);
  for (int r = 0; r < shown; ++r) {
    const sched::TreeLinks L = graph::treeLinks(g, 0, tree, r);
    edges += " " + std::to_string(r) + "<-" + (L.parent < 0 ? std::string("root") : std::to_string(L.parent));
  }
  fprintf(out, "          parents:%s%s\n", edges.c_str(), g.nranks > shown ? " ..." : "");
}

std::string humanBytes(size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 4 && static_cast<size_t>(v) % 1024 == 0) v /= 1024, ++u;
  char buf[32];
  snprintf(buf, sizeof(buf), "%g %s", v, units[u]);
  return buf;
}

std::string lowerName(Algo a, Proto p) {
  std::string s = std::string(algoName(a)) + "/" + protoName(p);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void printTable(FILE* out, CollType coll, const MachineModel& m, const TuneKnobs& cfg, const TableOptions& o) {
  const TuneResult probe = tuneCollective(coll, o.maxBytes, m, cfg);
  fprintf(out, "\n%s, %d ranks on %d host%s, channels %d..%d%s%s\n", collName(coll), m.nranks, m.nhosts,
          m.nhosts == 1 ? "" : "s", cfg.minChannels, cfg.maxChannels, probe.forced.empty() ? "" : ", narrowed by ",
          probe.forced.c_str());
  fprintf(out, "  %10s  %-16s %10s |", "size", "choice", "est us");
  for (const TuneCandidate& c : probe.candidates) fprintf(out, " %15s", lowerName(c.algo, c.proto).c_str());
  fprintf(out, "\n");
  for (size_t s = o.minBytes; s <= o.maxBytes && s > 0; s *= std::max<size_t>(2, o.stepFactor)) {
    const TuneResult r = tuneCollective(coll, s, m, cfg);
    const std::string choice = lowerName(r.winner.algo, r.winner.proto) + " x" + std::to_string(r.winner.nchannels);
    fprintf(out, "  %10s  %-16s %10.1f |", humanBytes(s).c_str(), choice.c_str(), r.winner.estimatedUs);
    for (const TuneCandidate& col : probe.candidates) {
      auto it = std::find_if(r.candidates.begin(), r.candidates.end(),
                             [&](const TuneCandidate& c) { return c.algo == col.algo && c.proto == col.proto; });
      if (it == r.candidates.end()) {
        fprintf(out, " %15s", "-");
        continue;
      }
      char cell[40];
      snprintf(cell, sizeof(cell), "%.1f(x%d)%s", it->us, it->nchannels,
               it->algo == r.winner.algo && it->proto == r.winner.proto ? "*" : " ");
      fprintf(out, " %15s", cell);
    }
    fprintf(out, "\n");
    if (s > o.maxBytes / std::max<size_t>(2, o.stepFactor)) break;
  }
}

}  // namespace

void printTopology(FILE* out, const topo::CommTopology& t, const std::string& source) {
  fprintf(out, "== Topology ==\nsource: %s\n%d ranks on %d host%s; between hosts: %.1f GB/s, %.1f us per hop\n",
          source.c_str(), t.nranks(), t.nhosts(), t.nhosts() == 1 ? "" : "s", t.netBwGBs, t.netLatencyUs);
  std::vector<std::string> printed;
  for (int h = 0; h < t.nhosts(); ++h) {
    const std::string sig = hostSignature(t, h);
    std::vector<int> ranks, same;
    for (int r = 0; r < t.nranks(); ++r)
      if (t.ranks[r].host == h) ranks.push_back(r);
    if (std::find(printed.begin(), printed.end(), sig) != printed.end()) continue;
    for (int o = h + 1; o < t.nhosts(); ++o)
      if (hostSignature(t, o) == sig) same.push_back(o);
    printed.push_back(sig);
    fprintf(out, "\n-- host %d (%s): ranks %s%s%s\n", h, t.hosts[h].hostName.c_str(), rankList(ranks).c_str(),
            same.empty() ? "" : "; same shape: hosts ", same.empty() ? "" : rankList(same).c_str());
    topo::Topology copy = t.hosts[h];
    if (copy.paths.size() != copy.nodes.size()) copy.computePaths();
    fprintf(out, "%s", topo::describeTopology(copy).c_str());
    if (printed.size() >= 3) {
      fprintf(out, "\n(further host shapes not shown)\n");
      break;
    }
  }
}

void printGraph(FILE* out, const topo::CommTopology& t, const graph::CommGraph& g, int maxRingLines) {
  fprintf(out, "\n== Graph ==\n");
  fprintf(out,
          "channels: %d sustained by the links, %d built; %.1f GB/s per channel inside a host (worst ring hop %s)\n",
          g.searchedChannels, g.nchannels(), g.intraBwGBs, topo::pathTypeName(g.typeIntra));
  if (g.nhosts > 1)
    fprintf(out, "between hosts: %d NIC%s per host x %.1f GB/s, %.1f us; NIC to ring ends: %s\n", g.nicsPerHost,
            g.nicsPerHost == 1 ? "" : "s", g.nicBwGBs, g.netLatencyUs, topo::pathTypeName(g.typeNic));
  fprintf(out, "rings (ranks in ring order%s):\n", g.nhosts > 1 ? "; [NIC n] where the ring leaves/enters a host" : "");
  int lines = 0, c = 0;
  for (; c < g.nchannels() && lines < maxRingLines; ++lines) {
    int last = c;
    while (last + 1 < g.nchannels() && sameRing(g.rings[last + 1], g.rings[c])) ++last;
    printRing(out, t, g, c, last);
    c = last + 1;
  }
  if (c < g.nchannels()) fprintf(out, "  ... channels %d-%d not shown (--rings N)\n", c, g.nchannels() - 1);
  fprintf(out, "trees (channel 0; %s):\n",
          g.nhosts > 1 ? "double binary tree over hosts, chain inside each host" : "double binary tree over the ring");
  for (int tree = 0; tree < 2; ++tree) printTree(out, g, tree);
  if (graph::hierSupported(g) && g.nhosts > 1)
    fprintf(out, "hier AllReduce: %d local rings of %d ranks, %d inter-host rings of %d ranks\n", g.nhosts,
            g.ranksPerHost, g.ranksPerHost, g.nhosts);
  else
    fprintf(out, "hier AllReduce: %s\n",
            g.nhosts == 1 ? "one host (same as the ring)" : "not available (uneven hosts)");
}

void printTuner(FILE* out, const graph::CommGraph& g, const CommConfig& cfg, const TableOptions& opts) {
  fprintf(out, "\n== Tuner ==\n");
  fprintf(out,
          "est us per candidate (channels in parentheses), * = chosen. Knobs: NCCL_ALGO, NCCL_PROTO,\n"
          "NCCL_MIN/MAX_NCHANNELS, NCCL_MIN/MAX_CTAS; see docs/topology.md.\n");
  // The ranks' mode is the graph's: GPU mode when they sit on GPUs.
  TuneInputs in;
  in.nranks = g.nranks;
  in.hostMode = g.cpuDevices;
  in.graph = &g;
  in.knobs = tuneKnobs(cfg);
  const MachineModel m = machineModel(in);
  for (CollType c : opts.colls) printTable(out, c, m, in.knobs, opts);
}

}  // namespace chorus::tools
