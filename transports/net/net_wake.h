// Lets a backend's own threads wake the network proxy of this process when
// something it waits for finished (the socket backend's helper threads after
// a part of a message moved), so the proxy can sleep in poll() instead of
// polling on a timer. Cheap when the proxy is awake: one fence and one load.
#pragma once

namespace chorus {

void netProxyKick();

// Backends whose connections expose a file descriptor to wait on: the fd of
// `comm` and the events (POLLIN/POLLOUT) that mean "call test() again", or
// -1 when nothing on it is awaited (or the backend has none). Returns false
// when the backend cannot tell (the proxy then polls on a timer).
using NetPollFdFn = bool (*)(void* comm, int* fd, short* events);
NetPollFdFn netPollFdFor(const void* backendTable);

// Backends whose connections may be called from any thread, one call per
// connection at a time, where what connections share is locked inside the
// backend (the built-in socket backend; UCX, whose one worker is
// UCS_THREAD_MODE_SERIALIZED behind a mutex every call takes): the
// executor's thread may then step its own links (net_link_inline.cc).
// Plugins are not: NCCL's plugin contract does not promise it.
bool netInlineMovesFor(const void* backendTable);

}  // namespace chorus
