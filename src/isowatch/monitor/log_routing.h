// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace isowatch::monitor {

// Sends to spdlog's default logger what the rest of the process would write to standard error on
// its own: ISOWATCH_BUG's reports (at error) and gRPC's log (at its severity, from the verbosity
// GRPC_VERBOSITY lets through, error by default). So every line of the daemon's log has the
// format log.format asks for. Call once the default logger is set; it stays in place for the
// process's life.
void RouteProcessLogsToSpdlog();

}  // namespace isowatch::monitor
