#include "bench/svg_plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/status/syscall_error.h"

namespace logfs::bench {
namespace {

constexpr const char* kGridColour = "#e0e0e0";
constexpr const char* kFont = "font-family=\"DejaVu Sans, sans-serif\"";

const char* SeriesColour(size_t i) {
  constexpr size_t n = sizeof(kSeriesColours) / sizeof(kSeriesColours[0]);
  return kSeriesColours[i % n];
}

std::string Num(double v) { return absl::StrFormat("%.2f", v); }

// A value of a sorted vector at percentile p (nearest rank).
uint64_t PercentileOf(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// A log-scale x axis over [10^lo_decade, 10^hi_decade] ns mapped to
// [left, right] px.
struct LogAxis {
  int lo_decade = 0;
  int hi_decade = 1;
  double left = 0;
  double right = 1;
  double X(double ns) const {
    const double v = std::log10(std::max(ns, 1.0));
    return left + (v - lo_decade) / (hi_decade - lo_decade) * (right - left);
  }
  // Tick values: each decade, and 2x and 5x when the axis spans few.
  std::vector<double> Ticks() const {
    std::vector<double> ticks;
    for (int d = lo_decade; d <= hi_decade; ++d) {
      const double base = std::pow(10.0, d);
      ticks.push_back(base);
      if (hi_decade - lo_decade <= 3 && d < hi_decade) {
        ticks.push_back(2 * base);
        ticks.push_back(5 * base);
      }
    }
    return ticks;
  }
};

// The frame, grid and ticks of a panel with the log x axis and a linear y
// axis from 0 to y_max (y_ticks steps), labelled with y_label(value).
template <typename YLabel>
void DrawPanel(SvgDocument* svg, const LogAxis& x, double top, double bottom, double y_max,
               int y_steps, YLabel y_label, const std::string& y_title,
               const std::string& x_title) {
  for (double tick : x.Ticks()) {
    const double px = std::round(x.X(tick)) + 0.5;
    svg->Line(px, top, px, bottom, kGridColour);
    svg->Line(px, bottom, px, bottom + 5, kAxisColour, 1, "shape-rendering=\"crispEdges\"");
    svg->Text(px, bottom + 18, FormatLatency(tick), "middle", 11);
  }
  for (int i = 0; i <= y_steps; ++i) {
    const double v = y_max * i / y_steps;
    const double py = std::round(bottom - (bottom - top) * i / y_steps) + 0.5;
    if (i > 0 && i < y_steps) svg->Line(x.left, py, x.right, py, kGridColour);
    svg->Line(x.left - 5, py, x.left, py, kAxisColour, 1, "shape-rendering=\"crispEdges\"");
    svg->Text(x.left - 8, py + 4, y_label(v), "end", 11);
  }
  svg->Rect(x.left, top, x.right - x.left, bottom - top, "none",
            absl::StrCat("stroke=\"", kAxisColour,
                         "\" stroke-width=\"1\" shape-rendering=\"crispEdges\""));
  svg->Text(20, (top + bottom) / 2, y_title, "middle", 12, -90);
  svg->Text((x.left + x.right) / 2, bottom + 36, x_title, "middle", 12);
}

// A round step >= raw: 1, 2, 2.5 or 5 times a power of ten.
double NiceStep(double raw) {
  if (raw <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= raw - 1e-12) return m * p;
  }
  return 10 * p;
}

std::string TrimNumber(double v) {
  std::string s = absl::StrFormat("%.2f", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::vector<std::string> SplitRow(absl::string_view line) {
  absl::string_view body = absl::StripAsciiWhitespace(line);
  absl::ConsumePrefix(&body, "|");
  absl::ConsumeSuffix(&body, "|");
  std::vector<std::string> cells;
  for (absl::string_view cell : absl::StrSplit(body, '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(cell));
  }
  return cells;
}

}  // namespace

SvgDocument::SvgDocument(int width, int height) : width_(width), height_(height) {
  Rect(0, 0, width, height, "#ffffff");
}

std::string SvgDocument::Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void SvgDocument::Rect(double x, double y, double w, double h, const std::string& fill,
                       const std::string& attributes) {
  absl::StrAppend(&body_, "<rect x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"", Num(w),
                  "\" height=\"", Num(h), "\" fill=\"", fill, "\"", attributes.empty() ? "" : " ",
                  attributes, "/>\n");
}

void SvgDocument::Line(double x1, double y1, double x2, double y2, const std::string& stroke,
                       double stroke_width, const std::string& attributes) {
  absl::StrAppend(&body_, "<line x1=\"", Num(x1), "\" y1=\"", Num(y1), "\" x2=\"", Num(x2),
                  "\" y2=\"", Num(y2), "\" stroke=\"", stroke, "\" stroke-width=\"",
                  Num(stroke_width), "\"", attributes.empty() ? "" : " ", attributes, "/>\n");
}

void SvgDocument::Polyline(const std::vector<std::pair<double, double>>& points,
                           const std::string& stroke, double stroke_width) {
  if (points.empty()) return;
  std::string pts;
  for (const auto& [x, y] : points)
    absl::StrAppend(&pts, pts.empty() ? "" : " ", Num(x), ",", Num(y));
  absl::StrAppend(&body_, "<polyline points=\"", pts, "\" fill=\"none\" stroke=\"", stroke,
                  "\" stroke-width=\"", Num(stroke_width),
                  "\" stroke-linejoin=\"round\" shape-rendering=\"crispEdges\"/>\n");
}

void SvgDocument::Text(double x, double y, const std::string& text, const std::string& anchor,
                       int size, double rotate, const std::string& attributes) {
  absl::StrAppend(&body_, "<text x=\"", Num(x), "\" y=\"", Num(y), "\" font-size=\"", size,
                  "\" text-anchor=\"", anchor, "\" ", kFont);
  if (rotate != 0) {
    absl::StrAppend(&body_, " transform=\"rotate(", Num(rotate), " ", Num(x), " ", Num(y), ")\"");
  }
  absl::StrAppend(&body_, attributes.empty() ? "" : " ", attributes, ">", Escape(text),
                  "</text>\n");
}

std::string SvgDocument::Finish() const {
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width_, "\" height=\"",
                      height_, "\" viewBox=\"0 0 ", width_, " ", height_, "\">\n", body_,
                      "</svg>\n");
}

std::string FormatLatency(double ns) {
  struct Unit {
    double scale;
    const char* name;
  };
  constexpr Unit kUnits[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "\u00b5s"}, {1, "ns"}};
  for (const Unit& unit : kUnits) {
    if (ns >= unit.scale || unit.scale == 1) {
      return absl::StrCat(TrimNumber(ns / unit.scale), " ", unit.name);
    }
  }
  return "0 ns";
}

std::string LatencyChartSvg(const std::string& title, const std::vector<LatencySeries>& series) {
  constexpr int kWidth = 900, kHeight = 660;
  constexpr int kBinsPerDecade = 20;
  SvgDocument svg(kWidth, kHeight);
  svg.Text(kWidth / 2.0, 26, title, "middle", 16, 0, "font-weight=\"bold\"");

  std::vector<std::vector<uint64_t>> sorted;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const LatencySeries& s : series) {
    sorted.push_back(s.samples);
    std::sort(sorted.back().begin(), sorted.back().end());
    if (sorted.back().empty()) continue;
    lo = std::min(lo, std::max<uint64_t>(1, sorted.back().front()));
    hi = std::max(hi, sorted.back().back());
  }
  if (hi == 0) {
    lo = 1;
    hi = 10;
  }
  LogAxis x;
  x.lo_decade = static_cast<int>(std::floor(std::log10(static_cast<double>(lo))));
  x.hi_decade = static_cast<int>(std::ceil(std::log10(static_cast<double>(std::max(hi, lo)))));
  if (x.hi_decade <= x.lo_decade) x.hi_decade = x.lo_decade + 1;
  x.left = 90;
  x.right = kWidth - 30;

  // Legend: one line per series under the title.
  double legend_y = 50;
  for (size_t i = 0; i < series.size(); ++i) {
    const std::vector<uint64_t>& s = sorted[i];
    const double lx = 90 + (i % 2) * 400;
    const double ly = legend_y + (i / 2) * 18;
    svg.Rect(lx, ly - 9, 18, 10, SeriesColour(i), "shape-rendering=\"crispEdges\"");
    svg.Text(lx + 24, ly,
             absl::StrCat(series[i].name, ": n=", s.size(),
                          s.empty() ? ""
                                    : absl::StrCat(", p50=", FormatLatency(PercentileOf(s, 50)),
                                                   ", p99=", FormatLatency(PercentileOf(s, 99)))),
             "start", 12);
  }
  const double top1 = legend_y + 18 * ((series.size() + 1) / 2) + 6;

  // Histogram panel: % of samples per bin.
  const int bins = (x.hi_decade - x.lo_decade) * kBinsPerDecade;
  std::vector<std::vector<double>> share(series.size(), std::vector<double>(bins, 0));
  double share_max = 0;
  for (size_t i = 0; i < series.size(); ++i) {
    if (sorted[i].empty()) continue;
    for (uint64_t ns : sorted[i]) {
      const double v = std::log10(static_cast<double>(std::max<uint64_t>(ns, 1)));
      int b = static_cast<int>(std::floor((v - x.lo_decade) * kBinsPerDecade));
      b = std::clamp(b, 0, bins - 1);
      share[i][b] += 100.0 / sorted[i].size();
    }
    share_max = std::max(share_max, *std::max_element(share[i].begin(), share[i].end()));
  }
  const double hist_step = NiceStep(std::max(share_max, 1.0) / 5);
  const int hist_steps = static_cast<int>(std::ceil(std::max(share_max, 1.0) / hist_step - 1e-9));
  const double hist_max = hist_step * hist_steps;
  const double bottom1 = top1 + 230;
  DrawPanel(
      &svg, x, top1, bottom1, hist_max, hist_steps, [](double v) { return TrimNumber(v) + "%"; },
      "% of samples per bin", "latency (log scale), histogram: 20 bins per decade");
  for (size_t i = 0; i < series.size(); ++i) {
    if (sorted[i].empty()) continue;
    std::vector<std::pair<double, double>> steps;
    auto y_of = [&](double v) { return bottom1 - (bottom1 - top1) * v / hist_max; };
    for (int b = 0; b < bins; ++b) {
      const double x0 = x.X(std::pow(10.0, x.lo_decade + static_cast<double>(b) / kBinsPerDecade));
      const double x1 =
          x.X(std::pow(10.0, x.lo_decade + static_cast<double>(b + 1) / kBinsPerDecade));
      steps.push_back({x0, y_of(share[i][b])});
      steps.push_back({x1, y_of(share[i][b])});
    }
    svg.Polyline(steps, SeriesColour(i), 2);
  }

  // CDF panel.
  const double top2 = bottom1 + 60;
  const double bottom2 = kHeight - 50;
  DrawPanel(
      &svg, x, top2, bottom2, 1.0, 4, [](double v) { return TrimNumber(v * 100) + "%"; },
      "samples \u2264 x (CDF)", "latency (log scale)");
  for (size_t i = 0; i < series.size(); ++i) {
    const std::vector<uint64_t>& s = sorted[i];
    if (s.empty()) continue;
    std::vector<std::pair<double, double>> points;
    constexpr size_t kPoints = 400;
    const size_t n = s.size();
    points.push_back({x.X(static_cast<double>(s.front())), bottom2});
    for (size_t k = 1; k <= std::min(n, kPoints); ++k) {
      const size_t idx =
          std::min(n - 1, (k * n + std::min(n, kPoints) - 1) / std::min(n, kPoints) - 1);
      const double frac = static_cast<double>(idx + 1) / n;
      points.push_back({x.X(static_cast<double>(s[idx])), bottom2 - (bottom2 - top2) * frac});
    }
    svg.Polyline(points, SeriesColour(i), 2);
  }
  return svg.Finish();
}

absl::Status WriteLatencyChart(const std::string& path, const std::string& title,
                               const std::vector<LatencySeries>& series) {
  bool any = false;
  for (const LatencySeries& s : series) any = any || !s.samples.empty();
  if (!any) return absl::InvalidArgumentError("no latency samples to plot");
  const std::string svg = LatencyChartSvg(title, series);
  std::ofstream out(path, std::ios::trunc);
  if (!out) return SyscallError(errno, absl::StrCat("open ", path));
  out << svg;
  out.close();
  if (!out) return SyscallError(errno ? errno : EIO, absl::StrCat("write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::map<char, RatioChart>> ParseCompareTable(const std::string& markdown) {
  std::vector<std::string> header;
  std::map<char, RatioChart> charts;
  // Ratio columns: index -> (target index, target name).
  std::vector<std::pair<size_t, std::string>> ratio_columns;
  std::string reference;
  bool in_table = false;
  for (absl::string_view line : absl::StrSplit(markdown, '\n')) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (!in_table) {
      if (!absl::StartsWith(trimmed, "| workload |")) continue;
      header = SplitRow(line);
      in_table = true;
      for (size_t c = 3; c < header.size(); ++c) {
        const size_t slash = header[c].rfind('/');
        if (slash == std::string::npos) continue;
        const std::string target = header[c].substr(0, slash);
        const std::string ref = header[c].substr(slash + 1);
        bool known_target = false, known_ref = false;
        for (size_t k = 3; k < c; ++k) {
          known_target = known_target || header[k] == target;
          known_ref = known_ref || header[k] == ref;
        }
        if (!known_target || !known_ref || (!reference.empty() && ref != reference)) continue;
        reference = ref;
        ratio_columns.push_back({c, target});
      }
      if (ratio_columns.empty()) {
        return absl::InvalidArgumentError(
            "the comparison table has no TARGET/REFERENCE ratio column (was ext4 measured?)");
      }
      continue;
    }
    if (!absl::StartsWith(trimmed, "|")) break;  // the table ended
    if (absl::StartsWith(trimmed, "|---")) continue;
    const std::vector<std::string> cells = SplitRow(line);
    if (cells.size() < header.size() || cells[0].empty()) continue;
    RatioChart::Row row;
    row.label = absl::StrCat(cells[1], ": ", cells[2]);
    bool any = false;
    for (const auto& [column, target] : ratio_columns) {
      absl::string_view cell = cells[column];
      double value = 0;
      if (absl::ConsumeSuffix(&cell, "x") && absl::SimpleAtod(cell, &value) &&
          std::isfinite(value)) {
        row.ratio.push_back(value);
        any = true;
      } else {
        row.ratio.push_back(std::nullopt);
      }
    }
    if (!any) continue;
    RatioChart& chart = charts[cells[0][0]];
    if (chart.targets.empty()) {
      chart.workload = cells[0];
      chart.reference = reference;
      for (const auto& column : ratio_columns) chart.targets.push_back(column.second);
    }
    chart.rows.push_back(std::move(row));
  }
  if (!in_table) return absl::InvalidArgumentError("no table with a \"| workload |\" header");
  return charts;
}

std::string RatioChartSvg(const RatioChart& chart) {
  constexpr int kWidth = 900;
  constexpr double kBar = 14, kGroupGap = 14, kLeft = 330, kRight = kWidth - 30;
  const size_t targets = chart.targets.size();
  const double group = targets * kBar + kGroupGap;
  const double top = 70 + 18 * ((targets + 2) / 3);
  const double bottom = top + chart.rows.size() * group + kGroupGap;
  const int height = static_cast<int>(bottom + 60);
  SvgDocument svg(kWidth, height);
  svg.Text(kWidth / 2.0, 26,
           absl::StrCat(chart.workload, ": ratio to ", chart.reference, " per target"), "middle",
           16, 0, "font-weight=\"bold\"");
  svg.Text(kWidth / 2.0, 46,
           "target / " + chart.reference +
               " of the same figure; above 1 is better for syncs/s and ops/s, below 1 for latency",
           "middle", 11);
  for (size_t t = 0; t < targets; ++t) {
    const double lx = kLeft + (t % 3) * 180;
    const double ly = 66 + (t / 3) * 18;
    svg.Rect(lx, ly - 9, 18, 10, SeriesColour(t), "shape-rendering=\"crispEdges\"");
    svg.Text(lx + 24, ly, chart.targets[t], "start", 12);
  }
  double max_ratio = 1.2;
  for (const auto& row : chart.rows) {
    for (const auto& r : row.ratio) {
      if (r) max_ratio = std::max(max_ratio, *r * 1.05);
    }
  }
  const double step = NiceStep(max_ratio / 6);
  const int steps = static_cast<int>(std::ceil(max_ratio / step - 1e-9));
  const double x_max = step * steps;
  auto X = [&](double v) { return kLeft + (kRight - kLeft) * v / x_max; };
  for (int i = 0; i <= steps; ++i) {
    const double px = std::round(X(step * i)) + 0.5;
    if (i > 0 && i < steps) svg.Line(px, top, px, bottom, kGridColour);
    svg.Line(px, bottom, px, bottom + 5, kAxisColour, 1, "shape-rendering=\"crispEdges\"");
    svg.Text(px, bottom + 18, TrimNumber(step * i) + "x", "middle", 11);
  }
  svg.Text((kLeft + kRight) / 2, bottom + 38, "ratio to " + chart.reference, "middle", 12);
  for (size_t r = 0; r < chart.rows.size(); ++r) {
    const double gy = top + kGroupGap + r * group;
    svg.Text(kLeft - 8, gy + targets * kBar / 2 + 4, chart.rows[r].label, "end", 11);
    for (size_t t = 0; t < targets; ++t) {
      const auto& v = chart.rows[r].ratio[t];
      const double y = gy + t * kBar;
      if (!v) {
        svg.Text(kLeft + 4, y + kBar - 3, "n/a", "start", 10);
        continue;
      }
      svg.Rect(kLeft, y + 1, X(*v) - kLeft, kBar - 2, SeriesColour(t),
               "shape-rendering=\"crispEdges\"");
      svg.Text(X(*v) + 4, y + kBar - 3, absl::StrFormat("%.2fx", *v), "start", 10);
    }
  }
  svg.Rect(kLeft, top, kRight - kLeft, bottom - top, "none",
           absl::StrCat("stroke=\"", kAxisColour,
                        "\" stroke-width=\"1\" shape-rendering=\"crispEdges\""));
  const double one = std::round(X(1.0)) + 0.5;
  svg.Line(one, top, one, bottom, kReferenceColour, 2,
           "stroke-dasharray=\"6,3\" shape-rendering=\"crispEdges\"");
  svg.Text(one, top - 4, "1.0 = " + chart.reference, "middle", 10);
  return svg.Finish();
}

}  // namespace logfs::bench
