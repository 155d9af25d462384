// Writes a simulated schedule as a Chrome trace (the JSON object format that
// Perfetto and chrome://tracing open): one process per device, a compute
// thread, and one thread per outgoing link for transfers.
//
// Contract: needs a result simulated with record_schedule; times in
// microseconds; every event names its node key or transferred value.
#ifndef PLACER_SIMULATOR_CHROME_TRACE_H_
#define PLACER_SIMULATOR_CHROME_TRACE_H_

#include <string>

#include "simulator/simulator.h"

namespace placer {

std::string ChromeTraceJson(const SimulationContext& context,
                            const SimulationResult& result);

}  // namespace placer

#endif  // PLACER_SIMULATOR_CHROME_TRACE_H_
