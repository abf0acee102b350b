#include "bench/svg_plot.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace logfs::bench {
namespace {

TEST(SvgPlotTest, LatencyLabelsInNsUsMsS) {
  EXPECT_EQ("500 ns", FormatLatency(500));
  EXPECT_EQ("1 \u00b5s", FormatLatency(1000));
  EXPECT_EQ("20 \u00b5s", FormatLatency(20000));
  EXPECT_EQ("1.5 ms", FormatLatency(1.5e6));
  EXPECT_EQ("2 s", FormatLatency(2e9));
}

TEST(SvgPlotTest, TextIsEscaped) {
  SvgDocument svg(10, 10);
  svg.Text(1, 1, "a<b & \"c\"");
  const std::string out = svg.Finish();
  EXPECT_TRUE(absl::StrContains(out, ">a&lt;b &amp; &quot;c&quot;</text>")) << out;
  EXPECT_TRUE(absl::StartsWith(out, "<?xml")) << out;
  EXPECT_TRUE(absl::EndsWith(out, "</svg>\n")) << out;
}

TEST(SvgPlotTest, LatencyChartHasDecadeTicksOverTheSamplesAndALegend) {
  // Samples from 30 µs to 4 ms: decades 10 µs .. 10 ms.
  LatencySeries s{"warm", {30000, 50000, 200000, 4000000}};
  LatencySeries empty{"cold", {}};
  const std::string svg = LatencyChartSvg("t", {s, empty});
  for (const char* tick : {">10 \u00b5s<", ">100 \u00b5s<", ">1 ms<", ">10 ms<"}) {
    EXPECT_TRUE(absl::StrContains(svg, tick)) << tick << "\n" << svg;
  }
  EXPECT_FALSE(absl::StrContains(svg, ">100 ms<")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">warm: n=4, p50=50 \u00b5s, p99=4 ms</text>")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">cold: n=0</text>")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, std::string("stroke=\"") + kSeriesColours[0])) << svg;
  EXPECT_FALSE(absl::StrContains(svg, std::string("stroke=\"") + kSeriesColours[1])) << svg;
  EXPECT_FALSE(WriteLatencyChart("/nonexistent/x.svg", "t", {empty}).ok());
}

TEST(SvgPlotTest, ParsesRatioColumnsOfTheCompareTable) {
  const std::string table =
      "intro\n\n"
      "| workload | variant | metric | ext4 | logfs (baseline) | logfs | logfs (baseline)/ext4 | "
      "logfs/ext4 | logfs/baseline | target | logfs met |\n"
      "|---|---|---|--:|--:|--:|--:|--:|--:|---|---|\n"
      "| A fio | 512 B, 1 job | syncs/s | 7732 | 4271 | 4212 | 0.55x | 0.54x | 0.986x | t | y |\n"
      "| C db_bench | fillseq | ops/s | 7780 | 4229 | 4029 | n/a | 0.52x | 0.953x | t | y |\n"
      "\n| id | ext4 |\n|---|---|\n| A.512.1 | 1 |\n";
  auto charts = ParseCompareTable(table);
  ASSERT_TRUE(charts.ok()) << charts.status();
  ASSERT_EQ(2u, charts->size());
  const RatioChart& a = charts->at('A');
  EXPECT_EQ("ext4", a.reference);
  EXPECT_EQ((std::vector<std::string>{"logfs (baseline)", "logfs"}), a.targets);
  ASSERT_EQ(1u, a.rows.size());
  EXPECT_EQ("512 B, 1 job: syncs/s", a.rows[0].label);
  EXPECT_DOUBLE_EQ(0.55, *a.rows[0].ratio[0]);
  EXPECT_DOUBLE_EQ(0.54, *a.rows[0].ratio[1]);
  EXPECT_FALSE(charts->at('C').rows[0].ratio[0].has_value());
  const std::string svg = RatioChartSvg(a);
  EXPECT_TRUE(absl::StrContains(svg, ">1.0 = ext4</text>")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, std::string("stroke=\"") + kReferenceColour)) << svg;
  EXPECT_FALSE(ParseCompareTable("no table here").ok());
}

}  // namespace
}  // namespace logfs::bench
