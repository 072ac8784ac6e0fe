// Where chorusrun pins its processes: local process i runs on core i of the
// CPUs chorusrun itself may use (all hardware threads of that core), as
// `mpirun --bind-to core` places ranks. Unbound, the scheduler may start two
// ranks on one core and leave them there for a whole run: each then spins
// through its poll budget while the peer it waits for cannot run, and every
// hand-over costs a time slice or a yield (docs/performance.md, issue 10).
// Binding only happens when every process gets a core of its own; with more
// processes than cores they stay free to move (waits yield then).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace chorusrun {

enum class BindMode { kCore, kNone };

// "core" or "none"; false for anything else.
bool parseBindMode(const std::string& text, BindMode* mode);

// The CPUs of `allowed` grouped by physical core, cores ordered by their
// lowest CPU. siblingsOf(cpu) returns the sysfs list of the CPUs sharing
// cpu's core ("0,64", "2-3"); an empty or unreadable list counts as the CPU
// alone.
std::vector<std::vector<int>> groupByCore(const std::vector<int>& allowed,
                                          const std::function<std::string(int)>& siblingsOf);

// The cores this process may run on, from sched_getaffinity and sysfs.
std::vector<std::vector<int>> allowedCores();

// The CPUs to pin each of `nlocal` processes to; all lists empty (no
// binding) for BindMode::kNone or when there are fewer cores than processes.
std::vector<std::vector<int>> planBinding(BindMode mode, int nlocal, const std::vector<std::vector<int>>& cores);

// Restricts the calling process to `cpus` (inherited across exec). True on
// success or when `cpus` is empty.
bool bindSelf(const std::vector<int>& cpus);

// "0-3,8" style text of a CPU list, for messages.
std::string cpuListText(const std::vector<int>& cpus);

}  // namespace chorusrun
