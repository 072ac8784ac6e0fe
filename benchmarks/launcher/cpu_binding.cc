#include "launcher/cpu_binding.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace chorusrun {
namespace {

// Parses a sysfs CPU list ("0-3,8,10-11"); stops at the first malformed item.
std::vector<int> parseCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    char* end = nullptr;
    const long first = std::strtol(item.c_str(), &end, 10);
    if (end == item.c_str() || first < 0) break;
    long last = first;
    if (*end == '-') {
      const char* rest = end + 1;
      last = std::strtol(rest, &end, 10);
      if (end == rest || last < first) break;
    }
    for (long c = first; c <= last && c < CPU_SETSIZE; ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

std::string readSiblings(int cpu) {
  const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  for (const char* name : {"core_cpus_list", "thread_siblings_list"}) {
    std::ifstream f(dir + name);
    std::string line;
    if (f && std::getline(f, line) && !line.empty()) return line;
  }
  return "";
}

}  // namespace

bool parseBindMode(const std::string& text, BindMode* mode) {
  if (text == "core")
    *mode = BindMode::kCore;
  else if (text == "none")
    *mode = BindMode::kNone;
  else
    return false;
  return true;
}

std::vector<std::vector<int>> groupByCore(const std::vector<int>& allowed,
                                          const std::function<std::string(int)>& siblingsOf) {
  // Key: the lowest CPU of the core, so cores come out in CPU order.
  std::map<int, std::vector<int>> cores;
  for (int cpu : allowed) {
    std::vector<int> siblings = parseCpuList(siblingsOf(cpu));
    if (std::find(siblings.begin(), siblings.end(), cpu) == siblings.end()) siblings = {cpu};
    cores[*std::min_element(siblings.begin(), siblings.end())].push_back(cpu);
  }
  std::vector<std::vector<int>> out;
  for (auto& [first, cpus] : cores) {
    std::sort(cpus.begin(), cpus.end());
    out.push_back(std::move(cpus));
  }
  return out;
}

std::vector<std::vector<int>> allowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) allowed.push_back(c);
  return groupByCore(allowed, readSiblings);
}

std::vector<std::vector<int>> planBinding(BindMode mode, int nlocal, const std::vector<std::vector<int>>& cores) {
  std::vector<std::vector<int>> plan(static_cast<size_t>(std::max(nlocal, 0)));
  if (mode == BindMode::kNone || nlocal > static_cast<int>(cores.size())) return plan;
  for (int i = 0; i < nlocal; ++i) plan[static_cast<size_t>(i)] = cores[static_cast<size_t>(i)];
  return plan;
}

bool bindSelf(const std::vector<int>& cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

std::string cpuListText(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace chorusrun
