// Pictures of bench results: `logfs bench wal --plot` on a real mount and
// `logfs bench plot-ratios` on a small fixed compare.sh table write SVG
// that rsvg-convert renders; the PNG has the size the SVG says, and the
// axes (kAxisColour) and each series (kSeriesColours) are drawn where they
// belong. The SVG text names the axes and the workload.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/svg_plot.h"
#include "tests/mounted_cluster.h"
#include "tests/png_reader.h"

namespace logfs::testing {
namespace {

using bench::kAxisColour;
using bench::kReferenceColour;
using bench::kSeriesColours;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The width and height attributes of the <svg> element.
std::pair<int, int> SvgSize(const std::string& svg) {
  std::smatch m;
  int w = 0, h = 0;
  if (std::regex_search(svg, m, std::regex("<svg [^>]*width=\"([0-9]+)\" height=\"([0-9]+)\""))) {
    EXPECT_TRUE(absl::SimpleAtoi(m[1].str(), &w));
    EXPECT_TRUE(absl::SimpleAtoi(m[2].str(), &h));
  }
  return {w, h};
}

// Renders `svg_path` to PNG with rsvg-convert and decodes it; checks the
// exit status, the signature and that IHDR has the SVG's size.
PngImage Render(const std::string& svg_path) {
  const std::string png_path = svg_path.substr(0, svg_path.size() - 4) + ".png";
  CommandResult r = RunCommand("rsvg-convert -f png -o " + png_path + " " + svg_path);
  EXPECT_EQ(0, r.exit_code) << r.output;
  const std::string bytes = Slurp(png_path);
  EXPECT_EQ(0, bytes.compare(0, 8, "\x89PNG\r\n\x1a\n")) << png_path;
  auto image = DecodePng(bytes);
  EXPECT_TRUE(image.ok()) << image.status();
  if (!image.ok()) return {};
  const auto [w, h] = SvgSize(Slurp(svg_path));
  EXPECT_EQ(static_cast<uint32_t>(w), image->width);
  EXPECT_EQ(static_cast<uint32_t>(h), image->height);
  return *std::move(image);
}

// Pixels of `colour` ("#rrggbb") in rows [y0, y1).
size_t CountIn(const PngImage& image, const std::string& colour, uint32_t y0, uint32_t y1) {
  uint32_t rgb = 0;
  EXPECT_TRUE(absl::SimpleHexAtoi(colour.substr(1), &rgb)) << colour;
  size_t n = 0;
  for (uint32_t y = y0; y < std::min(y1, image.height); ++y) {
    for (uint32_t x = 0; x < image.width; ++x) {
      const uint8_t* p = &image.rgba[(size_t{y} * image.width + x) * 4];
      n +=
          p[0] == (rgb >> 16) && p[1] == ((rgb >> 8) & 0xff) && p[2] == (rgb & 0xff) && p[3] == 255;
    }
  }
  return n;
}

TEST(PlotTest, WalBenchPlotShowsHistogramAndCdf) {
  // Goal: --plot writes the latency chart of the run it measured: the
  // histogram in the upper half, the CDF in the lower, both framed and on
  // a log axis with µs/ms labels. Method: a 200-append run on a mount.
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_EQ(0, mkdir((*mc)->Path("wal").c_str(), 0755));
  ASSERT_EQ(0, setxattr((*mc)->Path("wal").c_str(), "user.logfs.kind", "wal", 3, 0));
  const std::string svg_path = (*mc)->root() + "/wal.svg";
  auto run = RunCommand(LogfsBinary() + " bench wal --records=200 --plot=" + svg_path +
                        " --dir=" + (*mc)->Path("wal"));
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "plot: " + svg_path)) << run.output;
  const std::string svg = Slurp(svg_path);
  EXPECT_TRUE(absl::StrContains(svg,
                                ">logfs bench wal: 512 B appends, fdatasync every 1, 1 "
                                "thread, 1 file</text>"))
      << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">append+sync: n=200, p50=")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">% of samples per bin</text>")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">samples \u2264 x (CDF)</text>")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">latency (log scale)</text>")) << svg;
  // Decade ticks in µs or ms (a synced append takes 10 µs to 1 s).
  EXPECT_TRUE(std::regex_search(svg, std::regex(">(1|10|100) (\u00b5s|ms)</text>"))) << svg;
  EXPECT_TRUE(absl::StrContains(svg, ">100%</text>")) << svg;
  PngImage png = Render(svg_path);
  ASSERT_EQ(900u, png.width);
  const std::string series = kSeriesColours[0];
  // The histogram (upper half) and the CDF (lower half) in the series colour.
  EXPECT_GT(CountIn(png, series, 0, png.height / 2), 200u);
  EXPECT_GT(CountIn(png, series, png.height / 2, png.height), 200u);
  // Two frames of about 780 x 230 px.
  EXPECT_GT(CountIn(png, kAxisColour, 0, png.height / 2), 1500u);
  EXPECT_GT(CountIn(png, kAxisColour, png.height / 2, png.height), 1500u);
  // A path that is no .svg is refused before the run.
  auto bad = RunCommand(LogfsBinary() + " bench wal --records=1 --plot=/tmp/x.png --dir=/tmp");
  EXPECT_EQ(1, bad.exit_code);
  EXPECT_TRUE(absl::StrContains(bad.output, "--plot=/tmp/x.png: want a file name ending in .svg"))
      << bad.output;
}

class PlotRatiosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-plot-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override { RunCommand("rm -rf " + dir_); }
  std::string dir_;
};

// The shape of bench/compare.sh's table (header lines, then the table).
constexpr char kTable[] = R"(# logfs comparison: ext4 vs passthrough vs logfs

- ratio = target / ext4 of the same figure

| workload | variant | metric | ext4 | passthrough | logfs | passthrough/ext4 | logfs/ext4 | target | logfs met |
|---|---|---|--:|--:|--:|--:|--:|---|---|
| A fio append+fdatasync | 512 B, 1 job | syncs/s | 7732 | 6445 | 4212 | 0.83x | 0.54x | logfs/ext4 >= 0.5 | yes (0.545) |
| A fio append+fdatasync | 512 B, 16 jobs | syncs/s | 41222 | 23763 | 21862 | 0.58x | 0.53x | logfs/ext4 >= 0.5 | yes (0.530) |
| B logfs bench read | 4 KiB, 1 thr, warm | p50 us | 3.10 | 9.30 | 12.4 | 3.00x | 4.00x |  |  |
| B logfs bench read | 4 KiB warm, p50 10 thr / 1 thr | ratio | 1.00 | 1.10 | 1.00 | - | - | <= 1.5 | yes (1.000) |
| C db_bench | fillseq --sync=1 (30000 keys) | ops/s | 7780 | 6288 | 4029 | 0.81x | n/a | logfs/ext4 >= 0.5 | n/a |

Per-run values (run 1, 2, ...):

| id | ext4 | passthrough | logfs |
|---|---|---|---|
| A.512.1 | 7391.5, 7918.6, 7731.9 | 5674.3 | 3925 |
)";

TEST_F(PlotRatiosTest, OneChartPerWorkloadWithBarsAndTheLineAtOne) {
  // Goal: a chart per workload letter from the table's ratio columns: a
  // group per row, a bar per target, the 1.0 line; "n/a" and "-" cells
  // have no bar and a row with none is left out.
  const std::string table = dir_ + "/compare.md";
  std::ofstream(table) << kTable;
  auto run = RunCommand(LogfsBinary() + " bench plot-ratios --table=" + table);
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_EQ(
      absl::StrCat(dir_, "/compare-A.svg\n", dir_, "/compare-B.svg\n", dir_, "/compare-C.svg\n"),
      run.output);
  const std::string a = Slurp(dir_ + "/compare-A.svg");
  EXPECT_TRUE(absl::StrContains(a, ">A fio append+fdatasync: ratio to ext4 per target</text>"))
      << a;
  EXPECT_TRUE(absl::StrContains(a, ">512 B, 16 jobs: syncs/s</text>")) << a;
  EXPECT_TRUE(absl::StrContains(a, ">0.54x</text>")) << a;
  EXPECT_TRUE(absl::StrContains(a, ">0.83x</text>")) << a;
  EXPECT_TRUE(absl::StrContains(a, ">1.0 = ext4</text>")) << a;
  EXPECT_TRUE(absl::StrContains(a, ">ratio to ext4</text>")) << a;
  EXPECT_TRUE(absl::StrContains(a, ">passthrough</text>") && absl::StrContains(a, ">logfs</text>"));
  const std::string b = Slurp(dir_ + "/compare-B.svg");
  EXPECT_FALSE(absl::StrContains(b, "10 thr / 1 thr")) << "the row without ratios: " << b;
  EXPECT_TRUE(absl::StrContains(b, ">4.00x</text>")) << b;
  const std::string c = Slurp(dir_ + "/compare-C.svg");
  EXPECT_TRUE(absl::StrContains(c, ">n/a</text>")) << c;

  PngImage png = Render(dir_ + "/compare-A.svg");
  ASSERT_GT(png.height, 0u);
  // Two rows: bars of about 0.5-0.8 of 540 px / 1.25 and 12 px high.
  const size_t passthrough = CountIn(png, kSeriesColours[0], 0, png.height);
  const size_t logfs = CountIn(png, kSeriesColours[1], 0, png.height);
  EXPECT_GT(passthrough, 2 * 200u * 12);
  EXPECT_GT(logfs, 2 * 200u * 12);
  EXPECT_GT(passthrough, logfs);                                  // 0.83 + 0.58 against 0.54 + 0.53
  EXPECT_GT(CountIn(png, kReferenceColour, 0, png.height), 50u);  // the 1.0 line
  EXPECT_GT(CountIn(png, kAxisColour, 0, png.height), 1000u);
  Render(dir_ + "/compare-C.svg");
}

TEST_F(PlotRatiosTest, BadTablesGetAClearError) {
  auto missing = RunCommand(LogfsBinary() + " bench plot-ratios --table=" + dir_ + "/none.md");
  EXPECT_EQ(1, missing.exit_code);
  EXPECT_TRUE(absl::StrContains(missing.output, "cannot read " + dir_ + "/none.md"))
      << missing.output;
  const std::string table = dir_ + "/noref.md";
  std::ofstream(table) << "| workload | variant | metric | logfs |\n|---|---|---|--:|\n"
                          "| A fio | 512 B | syncs/s | 4212 |\n";
  auto noref = RunCommand(LogfsBinary() + " bench plot-ratios --table=" + table);
  EXPECT_EQ(1, noref.exit_code);
  EXPECT_TRUE(absl::StrContains(noref.output, "no TARGET/REFERENCE ratio column")) << noref.output;
  auto none = RunCommand(LogfsBinary() + " bench plot-ratios");
  EXPECT_EQ(1, none.exit_code);
  EXPECT_TRUE(absl::StrContains(none.output, "--table=FILE.md is required")) << none.output;
}

}  // namespace
}  // namespace logfs::testing
