// The monitoring files the package ships (issue 34 item 5):
// packaging/prometheus/logfs-alerts.yml holds one alerting rule per row of
// docs/OPERATIONS.md "What to alert on", with the row's expression and
// `for:` duration, and passes `promtool check rules`; its unit tests
// (logfs-alerts.test.yml) pass `promtool test rules` and see every alert
// both fire and stay silent; every expression of
// packaging/grafana/logfs-dashboard.json parses as PromQL. That the metrics
// they name exist is checked against a live cluster in
// tests/metrics_test.cc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/mounted_cluster.h"
#include "tests/package_util.h"

namespace logfs::testing {
namespace {

constexpr char kRules[] = "/packaging/prometheus/logfs-alerts.yml";
constexpr char kRuleTests[] = "/packaging/prometheus/logfs-alerts.test.yml";
constexpr char kDashboard[] = "/packaging/grafana/logfs-dashboard.json";

std::string Source(const char* path) {
  auto text = ReadFile(SourceDir() + path);
  EXPECT_TRUE(text.ok()) << path << ": " << text.status();
  return text.value_or("");
}

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n'); }

std::string Trimmed(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

// One row of the table "What to alert on": its expression and its `for`
// duration in Prometheus's form ("30s", "15m"; "" when the row has none).
struct AlertRow {
  std::string expr;
  std::string for_duration;
};

// The rows of the table under "### What to alert on" in `doc`: the second
// column is "`EXPR`" or "`EXPR` for 30 s".
std::vector<AlertRow> AlertTable(const std::string& doc) {
  std::vector<AlertRow> rows;
  bool in_section = false;
  for (const std::string& line : Lines(doc)) {
    if (absl::StartsWith(line, "#")) in_section = line == "### What to alert on";
    if (!in_section || !absl::StartsWith(line, "| ")) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 4) continue;
    absl::string_view cell = absl::StripAsciiWhitespace(cells[2]);
    if (!absl::ConsumePrefix(&cell, "`")) continue;  // the header and the --- line
    const size_t end = cell.find('`');
    if (end == absl::string_view::npos) continue;
    AlertRow row;
    row.expr = std::string(cell.substr(0, end));
    absl::string_view rest = absl::StripAsciiWhitespace(cell.substr(end + 1));
    if (absl::ConsumePrefix(&rest, "for ")) {
      row.for_duration = absl::StrReplaceAll(rest, {{" ", ""}});
    }
    rows.push_back(row);
  }
  return rows;
}

// Each rule of a rules file: expression -> `for:` ("" when none). The file
// keeps `for:` on the line after `expr:`.
std::map<std::string, std::string> RuleDurations(const std::string& rules) {
  std::map<std::string, std::string> durations;
  const std::vector<std::string> lines = Lines(rules);
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (!absl::ConsumePrefix(&line, "expr: ")) continue;
    absl::string_view next = i + 1 < lines.size() ? absl::StripAsciiWhitespace(lines[i + 1]) : "";
    durations[std::string(line)] =
        absl::ConsumePrefix(&next, "for: ") ? std::string(next) : std::string();
  }
  return durations;
}

// The names after "- alert: " in a rules file.
std::vector<std::string> AlertNames(const std::string& rules) {
  std::vector<std::string> names;
  for (const std::string& line : Lines(rules)) {
    absl::string_view rest = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&rest, "- alert: ")) names.emplace_back(rest);
  }
  return names;
}

// Every "expr" string of a dashboard JSON text, unescaped (the escapes
// PromQL in JSON needs: \" and \\).
std::vector<std::string> DashboardExpressions(const std::string& json) {
  std::vector<std::string> exprs;
  const std::string key = "\"expr\": \"";
  for (size_t at = json.find(key); at != std::string::npos; at = json.find(key, at)) {
    at += key.size();
    std::string expr;
    while (at < json.size() && json[at] != '"') {
      if (json[at] == '\\' && at + 1 < json.size()) ++at;
      expr.push_back(json[at++]);
    }
    exprs.push_back(expr);
  }
  return exprs;
}

TEST(MonitoringTest, AlertRulesAreTheOperationsTable) {
  // Goal: one rule per row of docs/OPERATIONS.md "What to alert on", with
  // the row's expression and duration, so the docs and the shipped rules
  // cannot drift apart.
  const std::vector<AlertRow> table = AlertTable(Source("/docs/OPERATIONS.md"));
  ASSERT_GE(table.size(), 10u) << "the table was not found";
  const std::string rules = Source(kRules);
  const std::map<std::string, std::string> durations = RuleDurations(rules);
  EXPECT_EQ(table.size(), AlertNames(rules).size());
  EXPECT_EQ(table.size(), durations.size());
  for (const AlertRow& row : table) {
    auto it = durations.find(row.expr);
    ASSERT_NE(durations.end(), it) << "no rule has the expression " << row.expr;
    EXPECT_EQ(row.for_duration, it->second) << row.expr;
  }
}

TEST(MonitoringTest, AlertRulesPassPromtoolCheckAndTheirUnitTests) {
  // Goal: Prometheus 2.42 loads the rules (`promtool check rules`) and
  // each alert fires, with its labels and expanded annotations, on the
  // series its unit tests give (`promtool test rules`).
  const std::string src = SourceDir();
  const size_t alerts = AlertNames(Source(kRules)).size();
  const CommandResult check = RunCommand(absl::StrCat("promtool check rules ", src, kRules));
  EXPECT_EQ(0, check.exit_code) << check.output;
  EXPECT_TRUE(absl::StrContains(check.output, absl::StrCat("SUCCESS: ", alerts, " rules found")))
      << check.output;
  const CommandResult test = RunCommand(absl::StrCat("promtool test rules ", src, kRuleTests));
  EXPECT_EQ(0, test.exit_code) << test.output;
  EXPECT_TRUE(absl::StrContains(test.output, "SUCCESS")) << test.output;
  // The check is real: an expected value the rules do not give fails.
  const std::string broken = absl::StrReplaceAll(
      Source(kRuleTests), {{"summary: logfs fsync p99 is 99.1ms", "summary: logfs fsync p99 is 1s"},
                           {"- logfs-alerts.yml", absl::StrCat("- ", src, kRules)}});
  char tmpl[] = "/tmp/logfs-rules-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(tmpl));
  const std::string path = std::string(tmpl) + "/broken.test.yml";
  ASSERT_TRUE(WriteFile(path, broken).ok());
  const CommandResult failed = RunCommand("promtool test rules " + path);
  RunCommand(absl::StrCat("rm -rf ", tmpl));
  EXPECT_NE(0, failed.exit_code) << failed.output;
  EXPECT_TRUE(absl::StrContains(failed.output, "alertname: LogfsSlowFsync")) << failed.output;
}

TEST(MonitoringTest, EveryAlertIsTestedFiringAndSilent) {
  // Goal: the unit tests see each alert fire (an alert_rule_test with
  // exp_alerts listed) and stay silent or pending (exp_alerts: []).
  const std::vector<std::string> lines = Lines(Source(kRuleTests));
  for (const std::string& alert : AlertNames(Source(kRules))) {
    int firing = 0, silent = 0;
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
      if (Trimmed(lines[i]) != "alertname: " + alert) continue;
      const std::string next = Trimmed(lines[i + 1]);
      firing += next == "exp_alerts:" ? 1 : 0;
      silent += next == "exp_alerts: []" ? 1 : 0;
    }
    EXPECT_GE(firing, 1) << alert << " is never tested firing";
    EXPECT_GE(silent, 1) << alert << " is never tested silent";
  }
}

TEST(MonitoringTest, DashboardExpressionsAreValidPromql) {
  // Goal: Grafana can run every panel's query: each expression, with the
  // dashboard's variables given values, parses (promtool checks it as a
  // recording rule); the data source is the `datasource` variable.
  const std::string json = Source(kDashboard);
  EXPECT_TRUE(absl::StrContains(json, "\"schemaVersion\": 37")) << json.substr(0, 200);
  EXPECT_TRUE(absl::StrContains(json, "\"name\": \"datasource\""));
  EXPECT_FALSE(absl::StrContains(json, "\"uid\": \"prometheus\"")) << "a fixed data source";
  const std::vector<std::string> exprs = DashboardExpressions(json);
  ASSERT_GE(exprs.size(), 30u);
  std::string rules = "groups:\n  - name: dashboard\n    rules:\n";
  for (size_t i = 0; i < exprs.size(); ++i) {
    const std::string expr = absl::StrReplaceAll(
        exprs[i], {{"$__rate_interval", "5m"}, {"$job", ".*"}, {"$instance", ".*"}});
    EXPECT_FALSE(absl::StrContains(expr, "$")) << "a variable without a value: " << exprs[i];
    absl::StrAppend(&rules, "      - record: dashboard:expr", i, "\n        expr: '",
                    absl::StrReplaceAll(expr, {{"'", "''"}}), "'\n");
  }
  char tmpl[] = "/tmp/logfs-dashboard-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(tmpl));
  const std::string path = std::string(tmpl) + "/dashboard-rules.yml";
  ASSERT_TRUE(WriteFile(path, rules).ok());
  const CommandResult check = RunCommand("promtool check rules " + path);
  RunCommand(absl::StrCat("rm -rf ", tmpl));
  EXPECT_EQ(0, check.exit_code) << check.output << "\n" << rules;
  EXPECT_TRUE(absl::StrContains(check.output, absl::StrCat("SUCCESS: ", exprs.size(), " rules")))
      << check.output;
  // Valid JSON, when there is a parser at hand.
  if (RunCommand("command -v python3").exit_code == 0) {
    const CommandResult parsed =
        RunCommand(absl::StrCat("python3 -m json.tool ", SourceDir(), kDashboard, " >/dev/null"));
    EXPECT_EQ(0, parsed.exit_code) << parsed.output;
  }
}

}  // namespace
}  // namespace logfs::testing
