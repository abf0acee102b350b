// Charts of bench results as SVG (plain text, no dependency): a small
// document builder, the latency chart of `logfs bench wal|read --plot`
// (histogram and CDF of one or more series on a log-scale x axis in
// ns/µs/ms/s) and the ratio chart of bench/compare.sh (grouped horizontal
// bars of target/ext4 per row, a line at 1.0), parsed from its markdown
// table. The chart layout follows common practice (gnuplot's and
// matplotlib's defaults: ticks outside the frame, decade ticks on log
// axes, a legend naming each series); the code is ours.
//
// Thread-safety: plain functions and a value type; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace logfs::bench {

// The series colours, in order (matplotlib's "tab10" without its red,
// which the ratio chart's 1.0 line uses: kReferenceColour).
inline constexpr const char* kSeriesColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                                 "#9467bd", "#8c564b", "#17becf"};
inline constexpr const char* kReferenceColour = "#d62728";
inline constexpr const char* kAxisColour = "#444444";  // frames and ticks

// An SVG document of `width` x `height` px built element by element.
// Coordinates in px from the top left. Text is escaped.
class SvgDocument {
 public:
  SvgDocument(int width, int height);

  void Rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& attributes = "");
  void Line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double stroke_width = 1, const std::string& attributes = "");
  // An open line through `points`; crisp (no anti-aliasing), so its pixels
  // have exactly `stroke`.
  void Polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                double stroke_width);
  // `anchor`: "start", "middle" or "end"; `rotate`: degrees about (x, y).
  void Text(double x, double y, const std::string& text, const std::string& anchor = "start",
            int size = 12, double rotate = 0, const std::string& attributes = "");
  // The document so far, closed.
  std::string Finish() const;

  // `text` with &, <, > and " as entities.
  static std::string Escape(const std::string& text);

 private:
  int width_;
  int height_;
  std::string body_;
};

// A latency in ns as a tick label: "500 ns", "1 µs", "20 µs", "1.5 ms", "2 s".
std::string FormatLatency(double ns);

struct LatencySeries {
  std::string name;               // "append+sync", "cold", ...
  std::vector<uint64_t> samples;  // ns, any order
};

// The latency chart: title, a legend (name, count, p50, p99 per series),
// above a histogram (% of samples per bin, 20 log-spaced bins per decade)
// and below the CDF (fraction of samples <= x), both on the same log x
// axis. Series with no samples are listed in the legend only. 900 x 660 px.
std::string LatencyChartSvg(const std::string& title, const std::vector<LatencySeries>& series);

// Writes LatencyChartSvg to `path` (replaced). Errors: the errno of a
// failed open or write, kInvalidArgument when every series is empty.
absl::Status WriteLatencyChart(const std::string& path, const std::string& title,
                               const std::vector<LatencySeries>& series);

// One workload's ratios to the reference (ext4) per row and target.
struct RatioChart {
  std::string workload;              // "A fio append+fdatasync"
  std::string reference;             // "ext4"
  std::vector<std::string> targets;  // "passthrough", "logfs", ...
  struct Row {
    std::string label;                         // "512 B, 1 job: syncs/s"
    std::vector<std::optional<double>> ratio;  // per target; nullopt: n/a
  };
  std::vector<Row> rows;
};

// The charts of bench/compare.sh's markdown table (the first table whose
// header starts "| workload |"), one per workload letter (A, B, C: the
// first letter of the workload column), from its "TARGET/REFERENCE" ratio
// columns ("0.54x"; "-" and "n/a" are n/a; rows with no ratio are left
// out). Errors: kInvalidArgument when there is no such table or it has no
// ratio column.
absl::StatusOr<std::map<char, RatioChart>> ParseCompareTable(const std::string& markdown);

// Grouped horizontal bars: a group per row, a bar per target (legend), the
// x axis in "0.5x" steps from 0 and a vertical line at 1.0x.
std::string RatioChartSvg(const RatioChart& chart);

}  // namespace logfs::bench
