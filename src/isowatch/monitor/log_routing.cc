// SPDX-License-Identifier: Apache-2.0
#include "isowatch/monitor/log_routing.h"

#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

#include "isowatch/common/check.h"

namespace isowatch::monitor {

void RouteProcessLogsToSpdlog() {
  common::SetBugReporter([](const char* report) {
    spdlog::error("{}", report);
    spdlog::default_logger()->flush();
  });
  gpr_set_log_function([](gpr_log_func_args* args) {
    spdlog::level::level_enum level = spdlog::level::err;
    if (args->severity == GPR_LOG_SEVERITY_DEBUG) level = spdlog::level::debug;
    if (args->severity == GPR_LOG_SEVERITY_INFO) level = spdlog::level::info;
    spdlog::log(level, "grpc: {} ({}:{})", args->message, args->file, args->line);
  });
}

}  // namespace isowatch::monitor
