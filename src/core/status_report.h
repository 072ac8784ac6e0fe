// The status report (docs/reliability.md, "Stall reports"): one JSON document
// describing every live communicator of this process: its identity, its
// operation counters, the call in flight and on whom it waits. Written on
// SIGUSR1 and at every stall report, to CHORUS_STATUS_FILE when set, else (on
// SIGUSR1) to the log.
#pragma once

#include <string>

namespace chorus {

// The report, built now.
std::string statusReportJson();

// Writes the report to CHORUS_STATUS_FILE (%p, %h expanded) if it is set.
void writeStatusReportIfConfigured();

// Installs the SIGUSR1 handler (once per process, only over the default
// action, only when CHORUS_STATUS_SIGNAL=1); called at communicator init.
void installStatusSignal();

}  // namespace chorus
