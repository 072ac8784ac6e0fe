#include "common/tree_paths.h"

namespace chorus::test {

std::string sourcePath(const std::string& rel) { return CHORUS_SOURCE_DIR + rel; }
std::string binaryPath(const std::string& rel) { return CHORUS_BINARY_DIR + rel; }

}  // namespace chorus::test
