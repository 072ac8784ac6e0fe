// Fixture (not compiled): an allowed include.
#pragma once
#include <cstddef>
