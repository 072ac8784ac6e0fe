// chorusCommGetStats: the communicator's traffic counters (core/traffic_stats.h).
#include "api/arg_checks.h"
#include "api/export.h"
#include "chorus/chorus.h"
#include "core/comm.h"
#include "core/comm_query.h"
#include "core/result.h"

using namespace chorus;

static_assert(chorusLinkCount == kLinkKinds, "chorusLink_t and LinkKind number the links alike");
static_assert(static_cast<int>(LinkKind::Net) == chorusLinkNet && static_cast<int>(LinkKind::Shm) == chorusLinkShm &&
                  static_cast<int>(LinkKind::P2p) == chorusLinkP2p &&
                  static_cast<int>(LinkKind::Inproc) == chorusLinkInproc,
              "chorusLink_t and LinkKind number the links alike");

CHORUS_EXPORT ncclResult_t chorusCommGetStats(ncclComm_t comm, chorusCommStats_t* stats) try {
  constexpr const char* fn = "chorusCommGetStats";
  CHORUS_CHECK(checkComm(comm, fn));
  CHORUS_CHECK(checkPtr(stats, fn, "stats"));
  if (stats->size != sizeof(chorusCommStats_t))
    return fail(ncclInvalidArgument,
                "%s: stats->size is %zu but this library's chorusCommStats_t has %zu bytes (set stats->size = sizeof "
                "*stats before the call, with the chorus.h the library was built with)",
                fn, stats->size, sizeof(chorusCommStats_t));
  const TrafficStats& t = comm->traffic;
  stats->ops = t.ops.read();
  for (int k = 0; k < kLinkKinds; ++k) {
    stats->bytesSent[k] = t.sent[k].read();
    stats->bytesRecv[k] = t.recv[k].read();
  }
  return ncclSuccess;
}
CHORUS_API_CATCH
