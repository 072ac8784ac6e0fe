// What the proxy thread may sleep on for one link (NetProxy::sleep).
#include "transports/net/net_link.h"
#include "transports/net/net_wake.h"

namespace chorus {
namespace {

bool addFd(NetPollFdFn fn, void* comm, std::vector<pollfd>* fds) {
  if (comm == nullptr) return true;
  int fd = -1;
  short events = 0;
  if (!fn(comm, &fd, &events)) return false;
  if (fd >= 0) fds->push_back(pollfd{fd, events, 0});
  return true;
}

}  // namespace

bool linkPollFds(const NetLink& link, std::vector<pollfd>* fds) {
  if (link.failed || link.verdictSeen) return true;  // nothing moves on it any more
  if (link.kernelDriven || link.draining || link.comm == nullptr || link.listenComm != nullptr) return false;
  const NetPollFdFn fn = netPollFdFor(link.net);
  if (fn == nullptr) return false;
  if (link.framed()) {
    const bool setUp = link.sender ? link.helloReq == nullptr && link.revListen == nullptr
                                   : link.helloDone && (link.revComm != nullptr || link.reverseGone);
    if (!setUp || link.verdictReq != nullptr || link.markListen != nullptr || (link.sender && link.markReq != nullptr))
      return false;
  }
  if (!addFd(fn, link.comm, fds)) return false;
  if (!link.reverseGone && !addFd(fn, link.revComm, fds)) return false;
  return link.sender || link.markGone || addFd(fn, link.markComm, fds);
}

}  // namespace chorus
