#include "troupe/bench/sweep.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <fmt/format.h>
#include <toml++/toml.h>

#include "troupe/runtime/settings.hpp"

namespace troupe::bench {

namespace json = boost::json;

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// Splits at commas that are outside quotes ("…", '…') and brackets ([…], {…}), so that a
// TOML string or array holding a comma stays one value.
std::vector<std::string_view> split_values(std::string_view text) {
  std::vector<std::string_view> out;
  int depth = 0;
  char quote = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(text.substr(start));
  return out;
}

const setting_info* find_setting(std::string_view key) {
  for (const auto& info : setting_catalog()) {
    if (info.key == key) {
      return &info;
    }
  }
  return nullptr;
}

// The catalog's keys under the same section as `key` (all keys when none), for an error.
std::string nearby_keys(std::string_view key) {
  const auto dot = key.find('.');
  const auto section = dot == std::string_view::npos ? std::string_view() : key.substr(0, dot + 1);
  std::string out;
  for (const auto& info : setting_catalog()) {
    if (!section.empty() && !std::string_view(info.key).starts_with(section)) {
      continue;
    }
    out += (out.empty() ? "" : ", ") + info.key;
  }
  if (out.empty()) {
    for (const auto& info : setting_catalog()) {
      out += (out.empty() ? "" : ", ") + info.key;
    }
  }
  return out;
}

bool is_plain_word(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.' ||
           c == ':' || c == '/';
  });
}

std::string quoted(std::string_view word) {
  // A plain word needs no escaping.
  return fmt::format("\"{}\"", word);
}

// The value as a TOML value, or nothing when it is not one: parsed as the only key of a
// document, so that text after the value (a newline and another key) cannot slip in.
std::optional<std::string> toml_label(std::string_view value) {
  try {
    const std::string text = fmt::format("v = {}\n", value);
    const toml::table doc = toml::parse(std::string_view(text), std::string_view("--sweep"));
    const toml::node* node = doc.get("v");
    if (doc.size() != 1 || node == nullptr) {
      return std::nullopt;
    }
    if (auto s = node->template value<std::string>()) {
      return *s;
    }
    return std::string(value);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

// A config document setting `key` to `value` (TOML text), as the bench writes it.
std::string config_with(std::string_view key, std::string_view value) {
  const auto dot = key.find('.');
  if (dot == std::string_view::npos) {
    return fmt::format("{} = {}\n", key, value);
  }
  return fmt::format("[{}]\n{} = {}\n", key.substr(0, dot), key.substr(dot + 1), value);
}

expected<sweep_value> parse_value(std::string_view key, const setting_info& info,
                                  std::string_view raw) {
  const auto text = trim(raw);
  if (text.empty()) {
    return fail(errc::invalid_argument,
                fmt::format("--sweep {}: an empty value (values are separated by commas)", key));
  }
  if (text.find_first_of("\n\r") != std::string_view::npos) {
    return fail(errc::invalid_argument,
                fmt::format("--sweep {}: a value must be on one line", key));
  }
  sweep_value v;
  if (auto label = toml_label(text)) {
    v.toml = std::string(text);
    v.label = std::move(*label);
  } else if (info.default_value.starts_with('"') && is_plain_word(text)) {
    // A string key: a bare word can only mean that string.
    v.toml = quoted(text);
    v.label = std::string(text);
  } else {
    return fail(errc::invalid_argument,
                fmt::format("--sweep {}: '{}' is not a TOML value (the key's default is {}; "
                            "write values as --troupe-set takes them)",
                            key, text, info.default_value));
  }
  // Applied to the defaults as troupe applies its config file: the setting's own checks.
  auto applied = apply_toml(settings{}, config_with(key, v.toml), "config");
  if (!applied) {
    // "config: key 'K': why" -> "--sweep K: value V: why".
    std::string why = applied.error().message;
    const auto prefix = fmt::format("config: key '{}': ", key);
    if (why.starts_with(prefix)) {
      why.erase(0, prefix.size());
    }
    return fail(errc::invalid_argument, fmt::format("--sweep {}: value {}: {}", key, v.label, why));
  }
  return v;
}

std::string settings_key(std::string_view setting) {
  return std::string(trim(setting.substr(0, setting.find('='))));
}

double metric_of(const bench_report& report, std::string_view name) {
  for (const auto& [n, v] : report.metrics) {
    if (n == name) {
      return v;
    }
  }
  return std::nan("");
}

bool has_metric(const bench_report& report, std::string_view name) {
  return std::any_of(report.metrics.begin(), report.metrics.end(),
                     [name](const auto& m) { return m.first == name; });
}

// The highest concurrency level of an agent or storage report ("c100" of c1, c100).
std::string top_level_prefix(const bench_report& report) {
  long top = -1;
  for (const auto& [name, value] : report.metrics) {
    if (name.size() > 12 && name[0] == 'c' && name.ends_with(".runs_per_s")) {
      char* end = nullptr;
      const long n = std::strtol(name.c_str() + 1, &end, 10);
      if (end != nullptr && *end == '.' && n > top) {
        top = n;
      }
    }
  }
  return top < 0 ? std::string("c1") : fmt::format("c{}", top);
}

std::string format_figure(double v) {
  if (std::isnan(v)) {
    return "-";
  }
  if (v == std::floor(v) && std::abs(v) < 1e12) {
    return fmt::format("{:.0f}", v);
  }
  if (std::abs(v) >= 100) {
    return fmt::format("{:.1f}", v);
  }
  return fmt::format("{:.3g}", v);
}

} // namespace

expected<sweep_axis> parse_sweep(std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos) {
    return fail(errc::invalid_argument,
                fmt::format("--sweep '{}': expected KEY=V1,V2,... (a troupe config key and "
                            "TOML values)",
                            text));
  }
  sweep_axis axis;
  axis.key = std::string(trim(text.substr(0, eq)));
  if (axis.key.empty()) {
    return fail(errc::invalid_argument, fmt::format("--sweep '{}': no key before '='", text));
  }
  if (axis.key == "listen" || axis.key == "data_dir") {
    return fail(errc::invalid_argument,
                fmt::format("--sweep {}: the bench sets this key itself for each troupe it "
                            "starts; it cannot be swept",
                            axis.key));
  }
  const auto* info = find_setting(axis.key);
  if (info == nullptr) {
    return fail(errc::invalid_argument,
                fmt::format("--sweep {}: unknown key (troupe's keys{}: {})", axis.key,
                            axis.key.find('.') == std::string::npos ? "" : " near it",
                            nearby_keys(axis.key)));
  }
  const auto list = text.substr(eq + 1);
  if (trim(list).empty()) {
    return fail(errc::invalid_argument,
                fmt::format("--sweep {}: no values (give KEY=V1,V2,...)", axis.key));
  }
  std::set<std::string> seen;
  for (const auto raw : split_values(list)) {
    auto v = parse_value(axis.key, *info, raw);
    if (!v) {
      return tl::unexpected(v.error());
    }
    if (!seen.insert(v->toml).second) {
      return fail(errc::invalid_argument,
                  fmt::format("--sweep {}: value {} is given twice", axis.key, v->label));
    }
    axis.values.push_back(std::move(*v));
  }
  return axis;
}

expected<void> validate_sweep(const scenario_options& o, const std::vector<sweep_axis>& axes) {
  if (axes.empty()) {
    return fail(errc::invalid_argument, "--sweep: no key to sweep");
  }
  std::set<std::string> keys;
  std::size_t points = 1;
  for (const auto& axis : axes) {
    if (axis.values.empty()) {
      return fail(errc::invalid_argument, fmt::format("--sweep {}: no values", axis.key));
    }
    if (!keys.insert(axis.key).second) {
      return fail(errc::invalid_argument,
                  fmt::format("--sweep {}: the key is swept twice; give all its values in one "
                              "--sweep {}=V1,V2,...",
                              axis.key, axis.key));
    }
    points *= axis.values.size();
    if (points > max_sweep_points) {
      return fail(errc::invalid_argument,
                  fmt::format("--sweep: more than {} points (the cartesian product of all "
                              "--sweep options); sweep fewer values",
                              max_sweep_points));
    }
  }
  for (const auto& kv : o.troupe_settings) {
    const auto key = settings_key(kv);
    if (keys.contains(key)) {
      return fail(
          errc::invalid_argument,
          fmt::format("--sweep {}: also given by --troupe-set '{}'; give it once", key, kv));
    }
  }
  if (!o.troupe_url.empty()) {
    return fail(errc::invalid_argument,
                "--sweep starts a fresh troupe per value: it cannot change the settings of the "
                "running troupe given by --troupe");
  }
  if ((o.scenario == "overhead" || o.scenario == "throughput" || o.scenario == "stream") &&
      o.via != "troupe") {
    return fail(errc::invalid_argument,
                fmt::format("--sweep changes troupe's settings, and scenario '{}' reaches "
                            "troupe only with --via troupe: add --via troupe",
                            o.scenario));
  }
  if (!o.peers_out.empty()) {
    return fail(errc::invalid_argument,
                "--sweep: no --peers-out (every point would overwrite the same files)");
  }
  return {};
}

sweep_headline headline_of(const bench_report& report) {
  std::vector<sweep_metric> wanted;
  std::string errors = "errors";
  const auto& s = report.scenario;
  if (s == "agent" || s == "storage") {
    const auto p = top_level_prefix(report);
    if (s == "storage") {
      wanted.push_back({"persisted.messages_per_s", "msgs/s", true});
    }
    wanted.push_back({p + ".runs_per_s", p + " runs/s", true});
    wanted.push_back({p + ".cpu_ms_per_run", "cpu ms/run", false});
    wanted.push_back({p + ".latency.p50_us", "p50 us", false});
    wanted.push_back({p + ".latency.p99_us", "p99 us", false});
    wanted.push_back({p + ".rss_peak_kib", "rss peak KiB", false});
    errors = p + ".errors";
  } else if (s == "overhead") {
    wanted.push_back({"added.p50_us", "added p50 us", false});
    wanted.push_back({"added.p99_us", "added p99 us", false});
    wanted.push_back({"via.p50_us", "via p50 us", false});
    wanted.push_back({"via.p99_us", "via p99 us", false});
    wanted.push_back({"pairs_per_s", "pairs/s", true});
    wanted.push_back({"troupe.cpu_s", "troupe cpu s", false});
  } else if (s == "throughput") {
    if (has_metric(report, "best_rate")) {
      wanted.push_back({"best_rate", "best rate/s", true});
      wanted.push_back({"at_best.p50_us", "p50 us", false});
      wanted.push_back({"at_best.p99_us", "p99 us", false});
    } else {
      wanted.push_back({"achieved_rate", "rate/s", true});
      wanted.push_back({"latency.p50_us", "p50 us", false});
      wanted.push_back({"latency.p99_us", "p99 us", false});
    }
    wanted.push_back({"troupe.cpu_s", "troupe cpu s", false});
  } else if (s == "stream") {
    const bool fire_hose = report.options.contains("fire_hose") &&
                           report.options.at("fire_hose").is_bool() &&
                           report.options.at("fire_hose").as_bool();
    if (fire_hose || !has_metric(report, "added.ttft.p99_us")) {
      wanted.push_back({"tokens_per_s", "tokens/s", true});
      wanted.push_back({"added.ttft.p99_us", "added ttft p99 us", false});
    } else {
      wanted.push_back({"added.ttft.p99_us", "added ttft p99 us", false});
      wanted.push_back({"tokens_per_s", "tokens/s", true});
    }
    wanted.push_back({"ttft.p50_us", "ttft p50 us", false});
    wanted.push_back({"gap.p50_us", "gap p50 us", false});
    wanted.push_back({"gap.p99_us", "gap p99 us", false});
    wanted.push_back({"streams_completed", "streams", true});
    wanted.push_back({"troupe.cpu_s", "troupe cpu s", false});
  } else if (s == "idle") {
    wanted.push_back({"kib_per_conversation_with_subscriber", "KiB/conv+run+sub", false});
    wanted.push_back({"kib_per_conversation", "KiB/conv", false});
    wanted.push_back({"kib_per_waiting_run", "KiB/run", false});
    wanted.push_back({"kib_per_subscriber", "KiB/sub", false});
    errors.clear();
  }
  sweep_headline h;
  for (auto& m : wanted) {
    // The main metric stays even when missing, so that the table says "-" for it.
    if (h.columns.empty() || has_metric(report, m.name)) {
      h.columns.push_back(std::move(m));
    }
  }
  if (h.columns.empty() && !report.metrics.empty()) {
    h.columns.push_back({report.metrics.front().first, report.metrics.front().first, true});
  }
  if (!errors.empty() && has_metric(report, errors)) {
    h.errors_metric = errors;
  }
  return h;
}

std::string sweep_point::describe() const {
  std::string out;
  for (const auto& [key, value] : settings) {
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", key, value.label);
  }
  return out;
}

std::vector<sweep_point> sweep_points(const std::vector<sweep_axis>& axes) {
  std::vector<sweep_point> points(1);
  for (const auto& axis : axes) {
    std::vector<sweep_point> next;
    for (const auto& p : points) {
      for (const auto& v : axis.values) {
        auto q = p;
        q.settings.emplace_back(axis.key, v);
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }
  return points;
}

void choose_best(sweep_result& result) {
  result.best.reset();
  if (result.headline.columns.empty()) {
    result.notes.push_back("no point ran: no best value");
    return;
  }
  const auto& main = result.headline.main();
  std::vector<std::pair<double, std::size_t>> ranked;
  for (std::size_t i = 0; i < result.points.size(); ++i) {
    const auto& p = result.points[i];
    if (!p.report) {
      continue;
    }
    if (!result.headline.errors_metric.empty() &&
        metric_of(*p.report, result.headline.errors_metric) > 0) {
      continue;
    }
    const double v = metric_of(*p.report, main.name);
    if (!std::isnan(v)) {
      ranked.emplace_back(v, i);
    }
  }
  if (ranked.empty()) {
    result.notes.push_back(
        fmt::format("no point ran without errors and reported {}: no best value", main.name));
    return;
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    return main.higher_is_better ? a.first > b.first : a.first < b.first;
  });
  result.best = ranked.front().second;
  if (ranked.size() > 1) {
    const double best = ranked[0].first;
    const double second = ranked[1].first;
    const double margin = second != 0 ? std::abs(best - second) / std::abs(second) * 100 : 0;
    result.notes.push_back(fmt::format(
        "best {} is {:.1f}% {} than the next point without errors ({}: {}); one run per "
        "point, so a margin within the run-to-run noise of the machine (a few % on a quiet "
        "machine, more on a shared one) is no finding",
        main.name, margin, main.higher_is_better ? "higher" : "lower",
        result.points[ranked[1].second].describe(), format_figure(second)));
  }
}

expected<sweep_result> run_sweep(const scenario_options& o, const std::vector<sweep_axis>& axes,
                                 const sweep_progress& progress) {
  if (auto ok = validate(o); !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto ok = validate_sweep(o, axes); !ok) {
    return tl::unexpected(ok.error());
  }
  sweep_result result;
  result.scenario = o.scenario;
  result.command_line = o.command_line;
  result.axes = axes;
  result.machine = machine_info();
  result.points = sweep_points(axes);
  for (std::size_t i = 0; i < result.points.size(); ++i) {
    auto& point = result.points[i];
    auto point_options = o;
    for (const auto& [key, value] : point.settings) {
      point_options.troupe_settings.push_back(fmt::format("{}={}", key, value.toml));
    }
    auto report = run_scenario(point_options);
    if (report) {
      if (result.headline.columns.empty()) {
        result.headline = headline_of(*report);
      }
      point.report = std::move(*report);
    } else {
      point.error = report.error().message;
    }
    if (progress) {
      progress(point, i, result.points.size());
    }
  }
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) == 3) {
    result.machine["load_average_end"] = json::array{load[0], load[1], load[2]};
  }
  choose_best(result);
  return result;
}

std::string format_sweep_table(const sweep_result& r) {
  std::vector<std::string> headings;
  for (const auto& axis : r.axes) {
    headings.push_back(axis.key);
  }
  for (const auto& c : r.headline.columns) {
    headings.push_back(c.heading);
  }
  const bool errors = !r.headline.errors_metric.empty();
  if (errors) {
    headings.emplace_back("errors");
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : r.points) {
    std::vector<std::string> row;
    for (const auto& [key, value] : p.settings) {
      row.push_back(value.label);
    }
    if (p.report) {
      for (const auto& c : r.headline.columns) {
        row.push_back(format_figure(metric_of(*p.report, c.name)));
      }
      if (errors) {
        row.push_back(format_figure(metric_of(*p.report, r.headline.errors_metric)));
      }
    } else {
      row.push_back("failed: " + p.error);
    }
    rows.push_back(std::move(row));
  }
  const std::size_t key_columns = r.axes.size();
  std::vector<std::size_t> width(headings.size());
  for (std::size_t i = 0; i < headings.size(); ++i) {
    width[i] = headings[i].size();
  }
  for (const auto& row : rows) {
    // A failure message spans the figure columns: it does not widen them.
    const bool failed = row.size() == key_columns + 1 && headings.size() > key_columns + 1;
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      if (!(failed && i == key_columns)) {
        width[i] = std::max(width[i], row[i].size());
      }
    }
  }
  auto line = [&](const std::vector<std::string>& cells, std::string_view mark) {
    std::string out = fmt::format("{:<2}", mark);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const bool last = i + 1 == cells.size();
      if (i < key_columns) {
        out += fmt::format("{:<{}}  ", cells[i], width[i]);
      } else if (last && cells.size() < headings.size()) {
        out += cells[i];
      } else {
        out += fmt::format("{:>{}}  ", cells[i], width[i]);
      }
    }
    while (!out.empty() && out.back() == ' ') {
      out.pop_back();
    }
    return out + "\n";
  };
  std::string out = fmt::format("troupe bench --scenario {} --sweep: {} point{}\n", r.scenario,
                                r.points.size(), r.points.size() == 1 ? "" : "s");
  out += line(headings, "");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out += line(rows[i], r.best && *r.best == i ? "*" : "");
  }
  if (!r.headline.columns.empty()) {
    const auto& main = r.headline.main();
    out += fmt::format("main metric: {} ({} is better)\n", main.name,
                       main.higher_is_better ? "higher" : "lower");
  }
  if (r.best) {
    const auto& p = r.points[*r.best];
    out += fmt::format("best: {} ({} {})\n", p.describe(), r.headline.main().name,
                       format_figure(metric_of(*p.report, r.headline.main().name)));
  } else {
    out += "best: none\n";
  }
  for (const auto& n : r.notes) {
    out += fmt::format("note: {}\n", n);
  }
  return out;
}

std::string sweep_to_json(const sweep_result& r) {
  json::object root;
  root["tool"] = "troupe bench";
  root["mode"] = "sweep";
  root["scenario"] = r.scenario;
  json::array cmd;
  for (const auto& a : r.command_line) {
    cmd.push_back(json::string(a));
  }
  root["command_line"] = std::move(cmd);
  root["machine"] = r.machine;
  json::array axes;
  for (const auto& axis : r.axes) {
    json::array values;
    for (const auto& v : axis.values) {
      values.push_back(json::string(v.toml));
    }
    axes.push_back(json::object{{"key", axis.key}, {"values", std::move(values)}});
  }
  root["axes"] = std::move(axes);
  if (!r.headline.columns.empty()) {
    const auto& main = r.headline.main();
    root["main_metric"] = json::object{{"name", main.name},
                                       {"direction", main.higher_is_better ? "higher" : "lower"}};
    json::array columns;
    for (const auto& c : r.headline.columns) {
      columns.push_back(json::string(c.name));
    }
    root["headline_metrics"] = std::move(columns);
  }
  json::array points;
  for (const auto& p : r.points) {
    json::object point;
    json::object settings;
    for (const auto& [key, value] : p.settings) {
      settings[key] = value.toml;
    }
    point["settings"] = std::move(settings);
    if (p.report) {
      json::object headline;
      for (const auto& c : r.headline.columns) {
        const double v = metric_of(*p.report, c.name);
        headline[c.name] = std::isnan(v) ? json::value(nullptr) : json::value(v);
      }
      if (!r.headline.errors_metric.empty()) {
        headline[r.headline.errors_metric] = metric_of(*p.report, r.headline.errors_metric);
      }
      point["headline"] = std::move(headline);
      point["report"] = to_json_object(*p.report);
    } else {
      point["error"] = p.error;
    }
    points.push_back(std::move(point));
  }
  root["points"] = std::move(points);
  if (r.best) {
    json::object settings;
    for (const auto& [key, value] : r.points[*r.best].settings) {
      settings[key] = value.toml;
    }
    root["best"] = json::object{{"index", *r.best}, {"settings", std::move(settings)}};
  } else {
    root["best"] = nullptr;
  }
  json::array notes;
  for (const auto& n : r.notes) {
    notes.push_back(json::string(n));
  }
  root["notes"] = std::move(notes);
  return to_pretty_json(root);
}

} // namespace troupe::bench
