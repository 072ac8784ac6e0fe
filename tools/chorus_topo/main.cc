// chorus-topo: what Chorus sees (topology), what it builds (rings, trees) and
// what it will pick (tuner table). The first thing to run when performance
// looks wrong.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "chorus_topo/plan_report.h"
#include "chorus_topo/report.h"
#include "core/comm_config.h"
#include "core/params.h"
#include "core/result.h"
#include "graph/search.h"
#include "graph/synthetic.h"
#include "topo/discover.h"
#include "topo/xml_read.h"

namespace {

using namespace chorus;

const char* kUsage =
    "usage: chorus-topo [options]\n"
    "\n"
    "Prints the topology Chorus sees, the rings and trees the graph search builds on it,\n"
    "and the tuner's choice for a range of message sizes.\n"
    "\n"
    "Machine (default: NCCL_TOPO_FILE if set, else this machine as detected):\n"
    "  --topo FILE             load an NCCL-format topology XML\n"
    "  --synthetic SPEC        a synthetic machine: SHAPE:HOSTSxGPUS[,nics=N][,nvlinks=N][,rr]\n"
    "                          SHAPE: nvswitch, pcie, pairwise, mesh, host (CPU-only, host mode)\n"
    "  --hosts N               replicate the loaded/detected machine on N hosts (default 1)\n"
    "  --nranks N              total ranks (default: one per GPU; CPU-only machines: 4 per host)\n"
    "  --round-robin           place rank r on host r mod hosts (default: host by host)\n"
    "Tuner table:\n"
    "  --coll NAME             allreduce (default), allgather, reducescatter, broadcast, reduce, all\n"
    "  --min BYTES, --max BYTES  size range (default 64 to 1G; K, M, G suffixes)\n"
    "  --factor F              size step factor (default 4)\n"
    "Plan:\n"
    "  --plan COLL BYTES       print the plan one rank runs for COLL (allreduce, allgather, reducescatter,\n"
    "                          broadcast, reduce) of BYTES (the nccl-tests size; K, M, G suffixes), float\n"
    "  --rank R                the rank whose plan is printed (default 0)\n"
    "Output:\n"
    "  --rings N               print at most N ring channels (default 8)\n"
    "  --xml                   also print the NCCL_GRAPH_DUMP_FILE form of the graph\n"
    "  --no-topo               skip the topology section\n"
    "  -h, --help              this text\n"
    "\n"
    "Environment knobs that change the result: NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS,\n"
    "NCCL_MAX_NCHANNELS, NCCL_MIN_CTAS, NCCL_MAX_CTAS, NCCL_TOPO_FILE (see docs/topology.md).\n";

struct Options {
  std::string topoFile, synthetic;
  int hosts = 1;
  int nranks = 0;
  bool roundRobin = false;
  bool xml = false;
  bool topoSection = true;
  int rings = 8;
  tools::TableOptions table;
  tools::PlanOptions plan;
};

bool parseBytes(const char* s, size_t* out) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || v < 1) return false;
  switch (*end) {
    case 'k':
    case 'K':
      v *= 1024;
      ++end;
      break;
    case 'm':
    case 'M':
      v *= 1024.0 * 1024;
      ++end;
      break;
    case 'g':
    case 'G':
      v *= 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool parseColl(const std::string& name, std::vector<CollType>* out) {
  const struct {
    const char* name;
    CollType coll;
  } table[] = {{"allreduce", CollType::AllReduce},
               {"allgather", CollType::AllGather},
               {"reducescatter", CollType::ReduceScatter},
               {"broadcast", CollType::Broadcast},
               {"reduce", CollType::Reduce}};
  out->clear();
  for (auto& e : table)
    if (name == "all" || name == e.name) out->push_back(e.coll);
  return !out->empty();
}

// Returns 0 to continue, 1 after --help, -1 on a usage error.
int parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") return fputs(kUsage, stdout), 1;
    if (a == "--round-robin") {
      o->roundRobin = true;
      continue;
    }
    if (a == "--xml") {
      o->xml = true;
      continue;
    }
    if (a == "--plan") {
      std::vector<CollType> colls;
      const char* name = value();
      const char* size = value();
      if (name == nullptr || size == nullptr || !parseColl(name, &colls) || colls.size() != 1 ||
          !parseBytes(size, &o->plan.bytes))
        return fprintf(stderr, "chorus-topo: --plan takes a collective and a size (e.g. --plan allreduce 1M)\n"), -1;
      o->plan.enabled = true;
      o->plan.coll = colls[0];
      continue;
    }
    if (a == "--no-topo") {
      o->topoSection = false;
      continue;
    }
    static const char* const kWithValue[] = {"--topo", "--synthetic", "--hosts", "--nranks",    "--rings",  "--coll",
                                             "--min",  "--min-bytes", "--max",   "--max-bytes", "--factor", "--rank"};
    if (std::find(std::begin(kWithValue), std::end(kWithValue), a) == std::end(kWithValue))
      return fprintf(stderr, "chorus-topo: unknown option %s (see --help)\n", a.c_str()), -1;
    if ((v = value()) == nullptr) return fprintf(stderr, "chorus-topo: %s needs a value\n", a.c_str()), -1;
    bool ok = true;
    if (a == "--topo")
      o->topoFile = v;
    else if (a == "--synthetic")
      o->synthetic = v;
    else if (a == "--hosts")
      ok = (o->hosts = atoi(v)) > 0;
    else if (a == "--nranks")
      ok = (o->nranks = atoi(v)) > 0;
    else if (a == "--rings")
      ok = (o->rings = atoi(v)) >= 0;
    else if (a == "--coll")
      ok = parseColl(v, &o->table.colls);
    else if (a == "--min" || a == "--min-bytes")
      ok = parseBytes(v, &o->table.minBytes);
    else if (a == "--max" || a == "--max-bytes")
      ok = parseBytes(v, &o->table.maxBytes);
    else if (a == "--rank")
      ok = (o->plan.rank = atoi(v)) >= 0;
    else if (a == "--factor")
      ok = parseBytes(v, &o->table.stepFactor) && o->table.stepFactor >= 2;
    else
      return fprintf(stderr, "chorus-topo: unknown option %s\n%s", a.c_str(), kUsage), -1;
    if (!ok) return fprintf(stderr, "chorus-topo: bad value '%s' for %s\n", v, a.c_str()), -1;
  }
  if (o->table.minBytes > o->table.maxBytes) return fprintf(stderr, "chorus-topo: --min is above --max\n"), -1;
  return 0;
}

// One host machine: from --topo, NCCL_TOPO_FILE or discovery.
bool loadMachine(const Options& o, topo::Topology* t, std::string* source) {
  if (!o.topoFile.empty()) {
    if (topo::loadTopologyXml(o.topoFile, t) != ncclSuccess) {
      fprintf(stderr, "chorus-topo: %s\n", lastErrorMessage());
      return false;
    }
    *source = "file " + o.topoFile;
    return true;
  }
  std::shared_ptr<const topo::LocalTopology> local;
  if (topo::localTopology(&local) != ncclSuccess) {
    fprintf(stderr, "chorus-topo: topology discovery failed: %s\n", lastErrorMessage());
    return false;
  }
  *t = local->topo;
  *source = local->source == "discovered" ? "this machine (discovered)" : "NCCL_TOPO_FILE " + local->source;
  return true;
}

bool buildTopology(const Options& o, topo::CommTopology* ct, std::string* source) {
  if (!o.synthetic.empty()) {
    graph::SyntheticSpec spec;
    std::string error;
    if (!graph::parseSyntheticSpec(o.synthetic, &spec, &error)) {
      fprintf(stderr, "chorus-topo: --synthetic %s: %s\n", o.synthetic.c_str(), error.c_str());
      return false;
    }
    spec.roundRobin |= o.roundRobin;
    *ct = graph::syntheticCommTopology(spec);
    *source = "synthetic " + o.synthetic;
    return true;
  }
  topo::Topology machine;
  if (!loadMachine(o, &machine, source)) return false;
  int gpus = 0;
  for (const topo::Node& n : machine.nodes) gpus += n.type == topo::NodeType::Gpu;
  int perHost = gpus > 0 ? gpus : 4;
  if (o.nranks > 0) {
    if (o.nranks % o.hosts != 0 || (gpus > 0 && o.nranks / o.hosts > gpus)) {
      fprintf(stderr, "chorus-topo: --nranks %d does not fit %d host(s) of %d GPU(s)\n", o.nranks, o.hosts, gpus);
      return false;
    }
    perHost = o.nranks / o.hosts;
  }
  *ct = graph::replicateHost(machine, o.hosts, perHost, o.roundRobin);
  if (gpus > perHost) {  // fewer ranks than GPUs: keep the first perHost GPUs of each host
    topo::CommTopology trimmed = *ct;
    trimmed.ranks.clear();
    for (const topo::RankPlace& p : ct->ranks)
      if (p.localRank < perHost) trimmed.ranks.push_back(p);
    *ct = trimmed;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const int parsed = parseArgs(argc, argv, &o);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  topo::CommTopology ct;
  std::string source;
  if (!buildTopology(o, &ct, &source)) return 1;
  graph::CommGraph g;
  if (graph::searchGraph(ct, graph::searchOptionsFromEnv(), &g) != ncclSuccess) {
    fprintf(stderr, "chorus-topo: graph search failed: %s\n", lastErrorMessage());
    return 1;
  }
  CommConfig cfg;
  if (resolveCommConfig(nullptr, nullptr, &cfg) != ncclSuccess) {
    fprintf(stderr, "chorus-topo: %s\n", lastErrorMessage());
    return 1;
  }
  // Collective slots widen where every host holds one rank, as at init (comm_lifecycle.cc).
  if (cfg.slotBytesAuto) {
    std::vector<int> ranksOnHost(static_cast<size_t>(std::max(g.nhosts, 1)), 0);
    for (const int host : g.hostOfRank) ++ranksOnHost[static_cast<size_t>(host)];
    cfg.collSlotBytes = slotBytesForPlacement(g.nranks, *std::max_element(ranksOnHost.begin(), ranksOnHost.end()));
  }
  // GPU communicators may use every channel the graph found unless a knob caps them.
  if (!g.cpuDevices && params::maxChannels() <= 0 && params::maxCtas() <= 0)
    cfg.maxChannels = std::max(cfg.minChannels, g.nchannels());
  if (o.plan.enabled) return tools::printPlan(stdout, g, cfg, o.plan);
  if (o.topoSection) tools::printTopology(stdout, ct, source);
  tools::printGraph(stdout, ct, g, o.rings);
  if (o.xml) printf("\n== Graph XML (NCCL_GRAPH_DUMP_FILE) ==\n%s", graph::graphToXml(ct, g, 0).c_str());
  tools::printTuner(stdout, g, cfg, o.table);
  return 0;
}
