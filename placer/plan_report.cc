#include "placer/plan_report.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "placer/human_bytes.h"

namespace placer {
namespace {

constexpr int kLaneHeight = 18;
constexpr int kLabelWidth = 150;
constexpr int kMemoryHeight = 70;

std::string Escape(absl::string_view text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// A layer family of a forward op key: its first path component (PyTorch
// exports "/encoder/layer.0/...") or, for dotted keys, its first two parts.
std::string Family(absl::string_view key) {
  while (!key.empty() && key.front() == '/') key.remove_prefix(1);
  size_t slash = key.find('/');
  if (slash != absl::string_view::npos)
    return std::string(key.substr(0, slash));
  size_t dot = key.find('.');
  if (dot == absl::string_view::npos) return std::string(key);
  size_t second = key.find('.', dot + 1);
  return std::string(key.substr(0, second));
}

// What fills each pixel column of a lane: per column, seconds of each kind.
struct Lane {
  std::string label;
  std::vector<std::array<double, 4>>
      columns;  // forward, backward, update, transfer
};

void AddInterval(Lane& lane, double start, double end, int kind,
                 double seconds_per_pixel) {
  if (end <= start) return;
  int first = static_cast<int>(start / seconds_per_pixel);
  int last = static_cast<int>(end / seconds_per_pixel);
  first = std::clamp(first, 0, kTimelinePixels - 1);
  last = std::clamp(last, 0, kTimelinePixels - 1);
  for (int x = first; x <= last; ++x) {
    const double lo = std::max(start, x * seconds_per_pixel);
    const double hi = std::min(end, (x + 1) * seconds_per_pixel);
    if (hi > lo) lane.columns[x][kind] += hi - lo;
  }
}

const char* kColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1"};
const char* kKinds[] = {"forward", "backward", "update", "transfer"};

// Runs of columns with the same dominant kind, as boxes whose height says
// how busy the columns were.
std::string DrawLane(const Lane& lane, int y, double seconds_per_pixel) {
  std::string svg =
      absl::StrFormat("<text x=\"%d\" y=\"%d\" class=\"label\">%s</text>",
                      kLabelWidth - 6, y + kLaneHeight - 5, Escape(lane.label));
  int x = 0;
  while (x < kTimelinePixels) {
    const auto& c = lane.columns[x];
    const double total = c[0] + c[1] + c[2] + c[3];
    if (total <= 0) {
      ++x;
      continue;
    }
    const int kind =
        static_cast<int>(std::max_element(c.begin(), c.end()) - c.begin());
    int end = x + 1;
    double sum = total;
    while (end < kTimelinePixels) {
      const auto& n = lane.columns[end];
      const double t = n[0] + n[1] + n[2] + n[3];
      if (t <= 0 || std::max_element(n.begin(), n.end()) - n.begin() != kind) {
        break;
      }
      sum += t;
      ++end;
    }
    const double fill = std::min(1.0, sum / ((end - x) * seconds_per_pixel));
    const double height = std::max(2.0, fill * (kLaneHeight - 2));
    absl::StrAppendFormat(
        &svg,
        "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" "
        "fill=\"%s\"><title>%s, %.0f%% busy</title></rect>",
        kLabelWidth + x, y + (kLaneHeight - 1) - height, end - x, height,
        kColors[kind], kKinds[kind], 100 * fill);
    x = end;
  }
  return svg;
}

// The busiest links (by seconds of transfers), busiest first, at most
// kReportLinks: what the timeline draws and the link table lists.
struct LinkLoad {
  int src = -1;
  int dst = -1;
  double seconds = 0;
  int64_t bytes = 0;
  int count = 0;
};
std::vector<LinkLoad> BusiestLinks(const SimulationResult& result) {
  std::map<std::pair<int, int>, LinkLoad> loads;
  for (const ScheduledTransfer& t : result.transfers) {
    LinkLoad& l = loads[{t.src, t.dst}];
    l.src = t.src;
    l.dst = t.dst;
    l.seconds += t.end_seconds - t.start_seconds;
    l.bytes += t.bytes;
    ++l.count;
  }
  std::vector<LinkLoad> busiest;
  for (const auto& [link, load] : loads) busiest.push_back(load);
  std::stable_sort(busiest.begin(), busiest.end(),
                   [](const LinkLoad& a, const LinkLoad& b) {
                     return a.seconds > b.seconds;
                   });
  if (busiest.size() > kReportLinks) busiest.resize(kReportLinks);
  return busiest;
}

std::string Timeline(const PlanReport& report, double seconds_per_pixel) {
  const SimulationContext& context = *report.context;
  const SimulationResult& result = *report.result;
  const TrainingView& view = context.view();
  const Cluster& cluster = context.cluster();
  std::vector<Lane> lanes(cluster.num_devices());
  for (int d = 0; d < cluster.num_devices(); ++d) {
    lanes[d].label = cluster.device(d).name;
    lanes[d].columns.assign(kTimelinePixels, {0, 0, 0, 0});
  }
  for (const ScheduledNode& s : result.schedule) {
    if (s.device < 0) continue;
    const int kind = static_cast<int>(view.node(s.node).kind);
    AddInterval(lanes[s.device], s.start_seconds, s.end_seconds, kind,
                seconds_per_pixel);
  }
  if (report.strategy_result != nullptr) {
    for (const StrategyTask& t : report.strategy_result->tasks) {
      const int kind = t.micro_batch < 0 ? 2 : (t.backward ? 1 : 0);
      AddInterval(lanes[t.device], t.start_seconds, t.end_seconds, kind,
                  seconds_per_pixel);
    }
    // One lane per allreducing group: a stage's slot across its replicas.
    std::map<std::pair<int, int>, int> lane_of_group;
    for (const StrategyBucket& b : report.strategy_result->buckets) {
      auto [at, fresh] = lane_of_group.emplace(std::make_pair(b.stage, b.slot),
                                               static_cast<int>(lanes.size()));
      if (fresh) {
        Lane lane;
        lane.label =
            report.strategy->stages[b.stage].width() > 1
                ? absl::StrCat("allreduce stage ", b.stage, " slot ", b.slot)
                : absl::StrCat("allreduce stage ", b.stage);
        lane.columns.assign(kTimelinePixels, {0, 0, 0, 0});
        lanes.push_back(std::move(lane));
      }
      AddInterval(lanes[at->second], b.start_seconds, b.end_seconds, 3,
                  seconds_per_pixel);
    }
  }
  std::map<std::pair<int, int>, int> lane_of_link;
  for (const LinkLoad& link : BusiestLinks(result)) {
    lane_of_link[{link.src, link.dst}] = static_cast<int>(lanes.size());
    Lane lane;
    lane.label = absl::StrCat(cluster.device(link.src).name, " \u2192 ",
                              cluster.device(link.dst).name);
    lane.columns.assign(kTimelinePixels, {0, 0, 0, 0});
    lanes.push_back(std::move(lane));
  }
  for (const ScheduledTransfer& t : result.transfers) {
    auto it = lane_of_link.find({t.src, t.dst});
    if (it == lane_of_link.end()) continue;
    AddInterval(lanes[it->second], t.start_seconds, t.end_seconds, 3,
                seconds_per_pixel);
  }
  const int height = static_cast<int>(lanes.size()) * kLaneHeight + 24;
  std::string svg = absl::StrFormat(
      "<svg width=\"%d\" height=\"%d\" role=\"img\" "
      "aria-label=\"timeline\">",
      kLabelWidth + kTimelinePixels + 80, height);
  for (size_t i = 0; i < lanes.size(); ++i) {
    absl::StrAppend(&svg, DrawLane(lanes[i], static_cast<int>(i) * kLaneHeight,
                                   seconds_per_pixel));
  }
  const int axis = static_cast<int>(lanes.size()) * kLaneHeight;
  for (int tick = 0; tick <= 4; ++tick) {
    const int x = kLabelWidth + tick * kTimelinePixels / 4;
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%d\" y1=\"0\" x2=\"%d\" y2=\"%d\" class=\"grid\"/>"
        "<text x=\"%d\" y=\"%d\" class=\"tick\">%.6f s</text>",
        x, x, axis, x, axis + 16,
        tick * seconds_per_pixel * kTimelinePixels / 4);
  }
  absl::StrAppend(&svg, "</svg>");
  return svg;
}

// Per device: the highest memory in each pixel column (a sample holds
// until the next), against the device's capacity.
// What was live at a device's peak, largest first: "activations 1.2 GiB,
// parameters 300 MiB"; empty when not known.
std::string Contributors(const SimulationResult& result, int device) {
  if (device >= static_cast<int>(result.peak_breakdown.size())) return "";
  const MemoryBreakdown& at = result.peak_breakdown[device];
  std::vector<std::pair<int64_t, const char*>> parts = {
      {at.activations, "activations"},
      {at.parameters, "parameters and optimizer state"},
      {at.gradients, "gradients"},
      {at.workspace, "op workspace"},
      {at.inputs, "inputs and constants"}};
  std::stable_sort(
      parts.begin(), parts.end(),
      [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> named;
  for (const auto& [bytes, what] : parts) {
    if (bytes > 0) named.push_back(absl::StrCat(what, " ", HumanBytes(bytes)));
  }
  return absl::StrJoin(named, ", ");
}

// A strategy's peaks, one bar per device against its capacity.
std::string StrategyPeaks(const PlanReport& report) {
  const Cluster& cluster = report.context->cluster();
  const SimulationResult& result = *report.result;
  int64_t top = 1;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    top = std::max(
        {top, result.peak_memory_bytes[d], cluster.device(d).memory_bytes});
  }
  std::string html =
      "<table><tr><th>device</th><th>peak</th><th>capacity</th>"
      "<th>micro-batches in flight</th><th></th></tr>\n";
  for (int d = 0; d < cluster.num_devices(); ++d) {
    const int64_t peak = result.peak_memory_bytes[d];
    const int64_t capacity = cluster.device(d).memory_bytes;
    const int in_flight =
        d < static_cast<int>(report.strategy_result->most_in_flight.size())
            ? report.strategy_result->most_in_flight[d]
            : 0;
    absl::StrAppendFormat(
        &html,
        "<tr><td>%s</td><td%s>%s</td><td>%s</td><td>%d</td><td><svg "
        "width=\"300\" height=\"12\"><rect width=\"%.1f\" height=\"12\" "
        "fill=\"#4e79a7\"/><line x1=\"%.1f\" y1=\"0\" x2=\"%.1f\" "
        "y2=\"12\" class=\"capacity\"/></svg></td></tr>\n",
        Escape(cluster.device(d).name),
        peak > capacity ? " class=\"over\"" : "", HumanBytes(peak),
        HumanBytes(capacity), in_flight,
        300.0 * static_cast<double>(peak) / static_cast<double>(top),
        300.0 * static_cast<double>(capacity) / static_cast<double>(top),
        300.0 * static_cast<double>(capacity) / static_cast<double>(top));
  }
  absl::StrAppend(&html, "</table>\n");
  return html;
}

std::string MemoryCharts(const PlanReport& report, double seconds_per_pixel) {
  const Cluster& cluster = report.context->cluster();
  const SimulationResult& result = *report.result;
  // One scale for every device, so that their charts compare: the highest
  // peak with room above it; a capacity above that is said, not drawn.
  int64_t highest = 1;
  for (int64_t peak : result.peak_memory_bytes) {
    highest = std::max(highest, peak);
  }
  const double top = 1.15 * static_cast<double>(highest);
  std::string html;
  for (int d = 0; d < cluster.num_devices(); ++d) {
    std::vector<int64_t> high(kTimelinePixels, -1);
    int64_t current = 0;
    int column = 0;
    double peak_seconds = 0;
    int64_t peak = -1;
    for (const MemorySample& s : result.memory) {
      if (s.device != d) continue;
      const int x = std::clamp(static_cast<int>(s.seconds / seconds_per_pixel),
                               0, kTimelinePixels - 1);
      for (; column < x; ++column) {
        high[column] = std::max(high[column], current);
      }
      current = s.bytes;
      high[x] = std::max(high[x], current);
      if (s.bytes > peak) {
        peak = s.bytes;
        peak_seconds = s.seconds;
      }
    }
    for (; column < kTimelinePixels; ++column) {
      high[column] = std::max(high[column], current);
    }
    const int64_t capacity = cluster.device(d).memory_bytes;
    std::string points;
    for (int x = 0; x < kTimelinePixels; ++x) {
      absl::StrAppendFormat(
          &points, "%d,%.1f ", kLabelWidth + x,
          kMemoryHeight - kMemoryHeight * static_cast<double>(high[x]) / top);
    }
    std::string capacity_line;
    if (capacity <= top) {
      const double y =
          kMemoryHeight - kMemoryHeight * static_cast<double>(capacity) / top;
      capacity_line = absl::StrFormat(
          "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
          "class=\"capacity\"><title>capacity %s</title></line>",
          kLabelWidth, y, kLabelWidth + kTimelinePixels, y,
          HumanBytes(capacity));
    }
    absl::StrAppendFormat(
        &html,
        "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"memory of "
        "%s\"><text x=\"%d\" y=\"%d\" class=\"label\">%s</text>"
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"grid\"/>%s"
        "<polyline points=\"%s\" class=\"memory\"/>"
        "<text x=\"%d\" y=\"12\" class=\"tick\">peak %s at %.6f s "
        "(capacity %s)%s</text></svg>\n",
        kLabelWidth + kTimelinePixels + 80, kMemoryHeight + 4,
        Escape(cluster.device(d).name), kLabelWidth - 6, kMemoryHeight / 2,
        Escape(cluster.device(d).name), kLabelWidth, kMemoryHeight,
        kLabelWidth + kTimelinePixels, kMemoryHeight, capacity_line, points,
        kLabelWidth + 4, HumanBytes(result.peak_memory_bytes[d]), peak_seconds,
        HumanBytes(capacity),
        Contributors(result, d).empty()
            ? std::string()
            : absl::StrCat(": ", Escape(Contributors(result, d))));
  }
  return html;
}

std::string DeviceTable(const PlanReport& report) {
  const SimulationContext& context = *report.context;
  const SimulationResult& result = *report.result;
  const TrainingView& view = context.view();
  const Cluster& cluster = context.cluster();
  const int devices = cluster.num_devices();
  std::vector<int> ops(devices, 0);
  std::vector<std::map<std::string, double>> families(devices);
  for (const ScheduledNode& s : result.schedule) {
    if (s.device < 0) continue;
    const TrainingNode& node = view.node(s.node);
    if (node.kind == NodeKind::kForward) ++ops[s.device];
    families[s.device][Family(view.forward().op(node.forward_op).key)] +=
        s.end_seconds - s.start_seconds;
  }
  // A strategy: each device runs its slot's ops of its stage, for every
  // micro-batch of its replica (seconds at this device's node times).
  std::vector<std::string> runs(devices);
  if (report.strategy != nullptr) {
    const Strategy& strategy = *report.strategy;
    std::vector<int> stage_of(devices, -1), slot_of(devices, -1),
        replica_of(devices, -1);
    for (int s = 0; s < static_cast<int>(strategy.stages.size()); ++s) {
      const PipelineStage& stage = strategy.stages[s];
      for (int k = 0; k < stage.num_replicas(); ++k) {
        for (int slot = 0; slot < stage.width(); ++slot) {
          const int d = stage.device(k, slot);
          stage_of[d] = s;
          slot_of[d] = slot;
          replica_of[d] = k;
        }
      }
    }
    for (int n = 0; n < static_cast<int>(view.nodes().size()); ++n) {
      const TrainingNode& node = view.node(n);
      const int op = node.forward_op;
      for (int d = 0; d < devices; ++d) {
        if (stage_of[d] != strategy.stage_of_op[op] ||
            slot_of[d] != SlotOfOp(strategy, op)) {
          continue;
        }
        if (node.kind == NodeKind::kForward) ++ops[d];
        families[d][Family(view.forward().op(op).key)] +=
            context.node_seconds(n, d);
      }
    }
    for (int d = 0; d < devices; ++d) {
      if (stage_of[d] < 0) continue;
      runs[d] =
          strategy.stages[stage_of[d]].width() > 1
              ? absl::StrFormat("stage %d, replica %d, slot %d: ", stage_of[d],
                                replica_of[d], slot_of[d])
              : absl::StrFormat("stage %d, replica %d: ", stage_of[d],
                                replica_of[d]);
    }
  }
  std::string html =
      "<table><tr><th>device</th><th>busy s</th><th>busy %</th>"
      "<th>peak memory</th><th>capacity</th><th>forward ops</th>"
      "<th>most of its time goes to</th></tr>\n";
  for (int d = 0; d < devices; ++d) {
    std::vector<std::pair<double, std::string>> top;
    for (const auto& [family, seconds] : families[d]) {
      top.push_back({-seconds, family});
    }
    std::sort(top.begin(), top.end());
    if (top.size() > 4) top.resize(4);
    std::vector<std::string> names;
    for (const auto& [seconds, family] : top) {
      names.push_back(absl::StrFormat("%s (%.6f s)", Escape(family), -seconds));
    }
    const bool over =
        result.peak_memory_bytes[d] > cluster.device(d).memory_bytes;
    absl::StrAppendFormat(
        &html,
        "<tr><td>%s</td><td>%.6f</td><td>%.1f%%</td><td%s>%s</td><td>%s</td>"
        "<td>%d</td><td class=\"text\">%s</td></tr>\n",
        Escape(cluster.device(d).name), result.busy_seconds[d],
        result.step_seconds > 0
            ? 100 * result.busy_seconds[d] / result.step_seconds
            : 0.0,
        over ? " class=\"over\"" : "", HumanBytes(result.peak_memory_bytes[d]),
        HumanBytes(cluster.device(d).memory_bytes), ops[d],
        absl::StrCat(runs[d], absl::StrJoin(names, ", ")));
  }
  absl::StrAppend(&html, "</table>\n");
  return html;
}

std::string LinkTable(const PlanReport& report) {
  const Cluster& cluster = report.context->cluster();
  const std::vector<LinkLoad> busiest = BusiestLinks(*report.result);
  if (busiest.empty()) {
    return "<p>No transfers: every op runs on one device.</p>\n";
  }
  std::string html =
      "<table><tr><th>link</th><th>busy s</th><th>bytes</th>"
      "<th>transfers</th></tr>\n";
  for (const LinkLoad& l : busiest) {
    absl::StrAppendFormat(&html,
                          "<tr><td>%s \u2192 %s</td><td>%.6f</td><td>%s</td>"
                          "<td>%d</td></tr>\n",
                          Escape(cluster.device(l.src).name),
                          Escape(cluster.device(l.dst).name), l.seconds,
                          HumanBytes(l.bytes), l.count);
  }
  absl::StrAppend(&html, "</table>\n");
  return html;
}

std::string ComparisonTable(const PlanReport& report) {
  if (report.comparison.empty()) return "";
  double fastest = 0;
  for (const PolicyComparison& c : report.comparison) {
    if (c.ok && (fastest == 0 || c.step_seconds < fastest)) {
      fastest = c.step_seconds;
    }
  }
  std::string html =
      "<h2>Policies compared</h2>\n<table><tr><th>policy</th><th>step s</th>"
      "<th></th><th>max peak</th><th>moved</th><th>place s</th></tr>\n";
  for (const PolicyComparison& c : report.comparison) {
    if (!c.ok) {
      absl::StrAppendFormat(
          &html, "<tr><td>%s</td><td colspan=\"5\">failed</td></tr>\n",
          Escape(c.policy));
      continue;
    }
    const double width = fastest > 0 ? 300 * fastest / c.step_seconds : 0;
    absl::StrAppendFormat(
        &html,
        "<tr><td>%s</td><td>%.6f</td><td><svg width=\"300\" height=\"12\">"
        "<rect width=\"%.1f\" height=\"12\" fill=\"#4e79a7\"/></svg></td>"
        "<td>%s</td><td>%s</td><td>%.3f</td></tr>\n",
        Escape(c.policy), c.step_seconds, width, HumanBytes(c.max_peak_bytes),
        HumanBytes(c.bytes_moved), c.placement_seconds);
  }
  absl::StrAppend(&html,
                  "</table>\n<p class=\"note\">Bars: the fastest step over "
                  "each policy's (longer is faster).</p>\n");
  return html;
}

}  // namespace

std::string PlanReportHtml(const PlanReport& report) {
  const SimulationResult& result = *report.result;
  const double span = std::max(result.step_seconds, 1e-12);
  const double seconds_per_pixel = span / kTimelinePixels;
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>",
      Escape(report.title),
      "</title>\n<style>"
      "body{font:14px system-ui,sans-serif;margin:24px;color:#222}"
      "table{border-collapse:collapse;margin:8px 0}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
      "td:first-child,th:first-child,td.text{text-align:left}"
      ".over{color:#c00;font-weight:bold}"
      ".label{font-size:11px;text-anchor:end}.tick{font-size:11px}"
      ".grid{stroke:#ddd}.capacity{stroke:#c00;stroke-dasharray:4 3}"
      ".memory{fill:none;stroke:#4e79a7;stroke-width:1.5}"
      ".key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 "
      "12px;vertical-align:middle}.note{color:#666}"
      "</style></head><body>\n<h1>",
      Escape(report.title), "</h1>\n");
  absl::StrAppendFormat(
      &html,
      "<table id=\"summary\"><tr><th>step</th><td id=\"step_seconds\">%.6f "
      "s</td></tr><tr><th>lower bound</th><td id=\"lower_bound_seconds\">"
      "%.6f s (step is %.2fx)</td></tr><tr><th>bytes moved</th>"
      "<td id=\"bytes_moved\">%s in %d transfers</td></tr>"
      "<tr><th>out of memory</th><td id=\"out_of_memory\">%s</td></tr>"
      "<tr><th>ops with guessed costs</th><td>%d</td></tr></table>\n",
      result.step_seconds, result.lower_bound_seconds,
      result.lower_bound_seconds > 0
          ? result.step_seconds / result.lower_bound_seconds
          : 0.0,
      HumanBytes(result.bytes_moved), result.transfers_count,
      result.oom ? "yes" : "no", result.inaccurate_nodes);
  if (report.strategy != nullptr) {
    absl::StrAppendFormat(
        &html,
        "<table id=\"strategy\"><tr><th>strategy</th><td class=\"text\">"
        "%s</td></tr><tr><th>per graph batch</th>"
        "<td id=\"seconds_per_batch\">%.6f s</td></tr><tr><th>allreduce"
        "</th><td>%.6f s</td></tr></table>\n",
        Escape(DescribeStrategy(*report.strategy)),
        report.strategy_result->seconds_per_batch,
        report.strategy_result->allreduce_seconds);
  }
  absl::StrAppend(&html, "<h2>Devices</h2>\n", DeviceTable(report));
  absl::StrAppend(&html, "<h2>Timeline</h2>\n<p class=\"key\">");
  for (int k = 0; k < 4; ++k) {
    absl::StrAppendFormat(&html, "<span style=\"background:%s\"></span>%s",
                          kColors[k], kKinds[k]);
  }
  absl::StrAppend(&html,
                  " &mdash; box height: how busy the device or link is in "
                  "that stretch; colour: what dominates it</p>\n",
                  Timeline(report, seconds_per_pixel));
  if (report.strategy != nullptr) {
    absl::StrAppend(
        &html,
        "<h2>Memory</h2>\n<p class=\"note\">A strategy's peak per device: "
        "parameters and optimizer state, gradient buffers, the stash of the "
        "micro-batches in flight and the rest of one micro-batch's peak "
        "(docs/parallelism.md); dashed: the capacity.</p>\n",
        StrategyPeaks(report));
  }
  if (report.strategy == nullptr || !report.result->memory.empty()) {
    absl::StrAppend(&html,
                    "<h2>Memory over the step</h2>\n<p class=\"note\">The "
                    "highest live bytes in each stretch of the step, on one "
                    "scale for every device (up to the highest peak); dashed: "
                    "a device's capacity where it is on the scale.</p>\n",
                    MemoryCharts(report, seconds_per_pixel));
  }
  absl::StrAppend(&html, "<h2>Busiest links</h2>\n", LinkTable(report));
  absl::StrAppend(&html, ComparisonTable(report), "</body></html>\n");
  return html;
}

}  // namespace placer
