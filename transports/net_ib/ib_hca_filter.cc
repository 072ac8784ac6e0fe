#include "transports/net_ib/ib_hca_filter.h"

#include <cstdlib>

namespace chorus::ib {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool parsePort(const std::string& text, int* port) {
  if (text.empty() || text.size() > 3) return false;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > 255) return false;
  *port = value;
  return true;
}

}  // namespace

IbHcaFilter IbHcaFilter::parse(const std::string& spec, int* malformed) {
  IbHcaFilter filter;
  int bad = 0;
  std::string rest = trim(spec);
  if (!rest.empty() && rest[0] == '^') {
    filter.exclude = true;
    rest = rest.substr(1);
  }
  if (!rest.empty() && rest[0] == '=') {
    filter.exact = true;
    rest = rest.substr(1);
  }
  size_t start = 0;
  while (start <= rest.size() && !rest.empty()) {
    size_t comma = rest.find(',', start);
    std::string item = trim(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? rest.size() + 1 : comma + 1;
    if (item.empty()) continue;
    IbHcaEntry entry;
    size_t colon = item.find(':');
    entry.device = trim(item.substr(0, colon));
    if (entry.device.empty() || (colon != std::string::npos && !parsePort(trim(item.substr(colon + 1)), &entry.port))) {
      ++bad;
      continue;
    }
    filter.entries.push_back(entry);
  }
  if (malformed != nullptr) *malformed = bad;
  return filter;
}

bool IbHcaFilter::allows(const std::string& device, int port) const {
  if (entries.empty()) return true;  // "" and "^" alone restrict nothing
  bool listed = false;
  for (const IbHcaEntry& e : entries) {
    bool nameMatches = exact ? device == e.device : device.compare(0, e.device.size(), e.device) == 0;
    if (nameMatches && (e.port < 0 || e.port == port)) {
      listed = true;
      break;
    }
  }
  return exclude ? !listed : listed;
}

}  // namespace chorus::ib
