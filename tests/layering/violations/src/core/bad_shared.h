// Fixture (not compiled): a lower-layer header that pulls in an executor.
#pragma once
#include "host/bad_plan.h"
