#include "troupe/bench/report.hpp"

#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

extern char** environ;

namespace troupe::bench {

namespace json = boost::json;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string first_line_with(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      auto value = colon == std::string::npos ? line : line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  }
  return {};
}

double us(std::uint64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

// Pretty JSON: boost::json::serialize writes one line; reports are read by people too.
void pretty(std::string& out, const json::value& v, int indent) {
  const std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
  const std::string inner(static_cast<std::size_t>(indent + 1) * 2, ' ');
  if (v.is_object() && !v.as_object().empty()) {
    out += "{\n";
    bool first = true;
    for (const auto& [key, value] : v.as_object()) {
      out += first ? "" : ",\n";
      first = false;
      out += inner + json::serialize(json::string(key)) + ": ";
      pretty(out, value, indent + 1);
    }
    out += "\n" + pad + "}";
  } else if (v.is_array() && !v.as_array().empty()) {
    const auto& a = v.as_array();
    // Short arrays of scalars (a [percentile, value] pair) stay on one line.
    const bool flat =
        std::all_of(a.begin(), a.end(), [](const json::value& e) { return !e.is_structured(); });
    if (flat) {
      out += json::serialize(v);
      return;
    }
    out += "[\n";
    bool first = true;
    for (const auto& e : a) {
      out += first ? "" : ",\n";
      first = false;
      out += inner;
      pretty(out, e, indent + 1);
    }
    out += "\n" + pad + "]";
  } else if (v.is_double()) {
    // Shortest round-trip form ("4869.64", "9740") instead of Boost's "9.74E3".
    const double d = v.as_double();
    out += std::isfinite(d) ? fmt::format("{}", d) : std::string("null");
  } else {
    out += json::serialize(v);
  }
}

std::string format_number(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e12) {
    return fmt::format("{:.0f}", v);
  }
  if (v != 0 && (std::abs(v) >= 1e6 || std::abs(v) < 0.01)) {
    return fmt::format("{:.4g}", v);
  }
  return fmt::format("{:.2f}", v);
}

} // namespace

void bench_report::add(std::string name, double value) {
  metrics.emplace_back(std::move(name), value);
}

void bench_report::add_latency(const std::string& prefix, const latency_histogram& h) {
  add(prefix + ".count", static_cast<double>(h.count()));
  add(prefix + ".p50_us", us(h.percentile_ns(50)));
  add(prefix + ".p90_us", us(h.percentile_ns(90)));
  add(prefix + ".p99_us", us(h.percentile_ns(99)));
  add(prefix + ".p99_9_us", us(h.percentile_ns(99.9)));
  add(prefix + ".max_us", us(h.max_ns()));
  add(prefix + ".mean_us", h.mean_ns() / 1e3);
  distributions[prefix] = percentile_curve(h);
}

json::array percentile_curve(const latency_histogram& h) {
  static constexpr double points[] = {0,  1,  5,  10, 20,   25, 30,   40,   50,    60,    70,
                                      75, 80, 90, 95, 97.5, 99, 99.5, 99.9, 99.95, 99.99, 100};
  json::array curve;
  if (h.count() == 0) {
    return curve;
  }
  for (const double p : points) {
    const auto ns = p == 0 ? h.min_ns() : h.percentile_ns(p);
    curve.push_back(json::array{p, us(ns)});
  }
  return curve;
}

json::object machine_info() {
  json::object m;
  m["cores"] = std::thread::hardware_concurrency();
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) == 3) {
    m["load_average"] = json::array{load[0], load[1], load[2]};
  }
  struct utsname u {};
  if (::uname(&u) == 0) {
    m["kernel"] = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
    m["hostname"] = u.nodename;
  }
  m["cpu_model"] = first_line_with(read_text("/proc/cpuinfo"), "model name");
  m["mem_total"] = first_line_with(read_text("/proc/meminfo"), "MemTotal");
  return m;
}

json::object to_json_object(const bench_report& report) {
  json::object root;
  root["tool"] = "troupe bench";
  root["scenario"] = report.scenario;
  json::array cmd;
  for (const auto& a : report.command_line) {
    cmd.push_back(json::string(a));
  }
  root["command_line"] = std::move(cmd);
  root["machine"] = report.machine;
  root["targets"] = report.targets;
  root["options"] = report.options;
  json::object metrics;
  for (const auto& [name, value] : report.metrics) {
    metrics[name] = value;
  }
  root["metrics"] = std::move(metrics);
  root["steps"] = report.steps;
  root["distributions"] = report.distributions;
  for (const auto& [key, value] : report.extra) {
    root[key] = value;
  }
  json::array tables;
  for (const auto& t : report.tables) {
    tables.push_back(json::string(t));
  }
  root["tables"] = std::move(tables);
  json::array notes;
  for (const auto& n : report.notes) {
    notes.push_back(json::string(n));
  }
  root["notes"] = std::move(notes);
  return root;
}

std::string to_pretty_json(const json::value& value) {
  std::string out;
  pretty(out, value, 0);
  out += "\n";
  return out;
}

std::string to_json(const bench_report& report) {
  return to_pretty_json(to_json_object(report));
}

std::string format_table(const bench_report& report) {
  std::size_t width = 6;
  for (const auto& [name, value] : report.metrics) {
    width = std::max(width, name.size());
  }
  std::string out = fmt::format("troupe bench --scenario {}\n", report.scenario);
  out += fmt::format("  {:<{}}  {:>14}\n", "metric", width, "value");
  for (const auto& [name, value] : report.metrics) {
    out += fmt::format("  {:<{}}  {:>14}\n", name, width, format_number(value));
  }
  for (const auto& t : report.tables) {
    out += "\n" + t + (t.ends_with('\n') ? "" : "\n");
  }
  for (const auto& n : report.notes) {
    out += fmt::format("note: {}\n", n);
  }
  return out;
}

expected<std::string> compare_reports(const std::string& path_a, const std::string& path_b) {
  auto load = [](const std::string& path) -> expected<json::object> {
    std::ifstream probe(path);
    if (!probe) {
      return fail(errc::not_found, fmt::format("cannot read report {}", path));
    }
    boost::system::error_code ec;
    auto v = json::parse(read_text(path), ec);
    if (ec || !v.is_object() || !v.as_object().contains("metrics") ||
        !v.as_object().at("metrics").is_object()) {
      return fail(errc::parse_error,
                  fmt::format("{} is not a troupe bench report (no \"metrics\" object)", path));
    }
    return v.as_object();
  };
  auto a = load(path_a);
  if (!a) {
    return tl::unexpected(a.error());
  }
  auto b = load(path_b);
  if (!b) {
    return tl::unexpected(b.error());
  }
  const auto& ma = a->at("metrics").as_object();
  const auto& mb = b->at("metrics").as_object();
  std::size_t width = 6;
  for (const auto& [name, value] : ma) {
    width = std::max(width, name.size());
  }
  auto scenario = [](const json::object& r) {
    return r.contains("scenario") && r.at("scenario").is_string()
               ? std::string(r.at("scenario").as_string())
               : std::string("?");
  };
  std::string out =
      fmt::format("A: {} ({})\nB: {} ({})\n", path_a, scenario(*a), path_b, scenario(*b));
  out += fmt::format("  {:<{}}  {:>14}  {:>14}  {:>8}\n", "metric", width, "A", "B", "B/A");
  std::size_t matched = 0;
  for (const auto& [name, va] : ma) {
    const auto* vb = mb.if_contains(name);
    if (!vb || !va.is_number() || !vb->is_number()) {
      continue;
    }
    const double x = va.to_number<double>();
    const double y = vb->to_number<double>();
    const std::string ratio = x != 0 ? fmt::format("{:.3f}", y / x) : std::string("-");
    out += fmt::format("  {:<{}}  {:>14}  {:>14}  {:>8}\n", std::string_view(name), width,
                       format_number(x), format_number(y), ratio);
    ++matched;
  }
  if (matched == 0) {
    return fail(errc::invalid_argument,
                fmt::format("{} and {} share no metric to compare", path_a, path_b));
  }
  return out;
}

expected<void> write_chart(const std::string& json_path, const std::string& png_path) {
  // matplotlib imports only under Debian's python (stack.md), needs a writable config dir
  // and must not look for a display.
  ::setenv("MPLBACKEND", "Agg", 1);
  if (!std::getenv("MPLCONFIGDIR")) {
    ::setenv("MPLCONFIGDIR", "/tmp/troupe-bench-mpl", 1);
  }
  std::string python = "/usr/bin/python3";
  std::string script = TROUPE_BENCH_CHART_SCRIPT;
  std::string in = json_path;
  std::string out = png_path;
  char* argv[] = {python.data(), script.data(), in.data(), out.data(), nullptr};
  pid_t pid = 0;
  if (::posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv, environ) != 0) {
    return fail(errc::unavailable, "cannot start /usr/bin/python3 for the chart");
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return fail(errc::io_error, fmt::format("{} failed for {} (exit status {})", script, json_path,
                                            WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return {};
}

} // namespace troupe::bench
