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
#include "simulator/strategy.h"
#include "simulator/strategy_simulator.h"

namespace placer {

std::string ChromeTraceJson(const SimulationContext& context,
                            const SimulationResult& result);

// A strategy's step: per device, its tasks ("F s0 j3", "B s0 j3",
// "update s0"; a wide replica's slot adding up its buffers after a
// backward, "adds s0") on the compute thread, inside a wide stage's tasks
// their nodes (named by node key, as ChromeTraceJson names them), the
// transfers between stages ("stage transfer") and between a wide
// replica's slots (TransferName) on a thread per outgoing link, and the
// stage's allreduced buckets on an "allreduce" thread of every replica.
std::string StrategyChromeTraceJson(const SimulationContext& context,
                                    const Strategy& strategy,
                                    const StrategySimulation& simulation);

}  // namespace placer

#endif  // PLACER_SIMULATOR_CHROME_TRACE_H_
