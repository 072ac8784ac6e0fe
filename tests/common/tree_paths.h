// Paths in the source and build trees: CHORUS_SOURCE_DIR and
// CHORUS_BINARY_DIR, compile definitions of every test executable.
//
// Not std::string(CHORUS_SOURCE_DIR) + "/rel": GCC 12 at -O2 reports a false
// -Warray-bounds on that expression's moved result for some lengths of the
// directory's name (a clean clone in /tmp/ci-clone hit it), and the tests
// build with -Werror. Defined out of line, so no caller sees the lengths.
#pragma once

#include <string>

namespace chorus::test {

// rel starts with '/'.
std::string sourcePath(const std::string& rel);
std::string binaryPath(const std::string& rel);

}  // namespace chorus::test
