#include "topo/path_level.h"

#include <strings.h>

#include <cctype>
#include <cstdlib>

namespace chorus::topo {

namespace {
constexpr PathType kP2pNames[] = {PathType::LOC, PathType::NVL, PathType::NVB, PathType::C2C, PathType::PIX,
                                  PathType::PXB, PathType::PXN, PathType::PHB, PathType::SYS};
constexpr PathType kGdrNames[] = {PathType::LOC, PathType::PIX, PathType::PXB, PathType::PHB, PathType::SYS};
}  // namespace

const PathLevelSyntax kP2pLevelSyntax{kP2pNames, 9};
const PathLevelSyntax kGdrLevelSyntax{kGdrNames, 1};

PathType legacyPathLevel(unsigned long number) {
  constexpr PathType kLevels[] = {PathType::LOC, PathType::PIX, PathType::PXB, PathType::PHB, PathType::SYS};
  constexpr unsigned long kLast = sizeof(kLevels) / sizeof(kLevels[0]) - 1;
  return kLevels[number > kLast ? kLast : number];
}

bool parsePathLevel(const std::string& text, const PathLevelSyntax& syntax, PathType* out) {
  for (PathType t : syntax.names) {
    if (strcasecmp(text.c_str(), pathTypeName(t)) == 0) {
      *out = t;
      return true;
    }
  }
  if (text.empty() || text.size() > syntax.maxDigits) return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  *out = legacyPathLevel(std::strtoul(text.c_str(), nullptr, 10));
  return true;
}

std::string pathLevelNames(const PathLevelSyntax& syntax) {
  std::string s;
  for (PathType t : syntax.names) {
    if (!s.empty()) s += ", ";
    s += pathTypeName(t);
  }
  return s;
}

}  // namespace chorus::topo
