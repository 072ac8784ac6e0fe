// Fixture (not compiled): reaches the host executor through a core header.
#pragma once
#include "core/bad_shared.h"
#include "sched/fine.h"
