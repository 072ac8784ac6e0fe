// Segments left in the shm directory by processes that died during
// connection setup (the sender unlinks a segment as soon as it opens it, so
// only a crash between the receiver creating it and the sender opening it
// leaves one behind). The next process of ours that sets up shm removes them.
//
// A segment's name starts with chorus-<pid>-p<pid namespace>-: the owner's
// pid and the inode of its pid namespace (/proc/self/ns/pid). A segment is
// removed only when it is owned by our uid, was made in our pid namespace
// (so its pid means the same process here) and that pid no longer exists.
#pragma once

#include <string>

namespace chorus {

// "chorus-<pid>-p<namespace>-": the start of this process's segment names.
std::string shmSegmentPrefix();

// Whether `path` (a handle from a peer) names a segment that process
// `ownerPid` made, in some directory: anything else is refused before it is
// opened, let alone unlinked.
bool isSegmentPathOf(const std::string& path, int ownerPid);

// Removes the leftover segments in `dir`; returns how many. Logs one INFO
// line when it removed any.
int removeLeftoverSegments(const std::string& dir);

}  // namespace chorus
