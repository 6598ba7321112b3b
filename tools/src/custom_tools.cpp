// Custom tools (custom_tools.hpp): the HTTP tool, the script tool and the node's set of
// them as the `custom` tool source.

#include "troupe/tools/custom_tools.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <simdjson.h>
#include <unistd.h>

#include "script_outcome.hpp"
#include "tool_arguments.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/argument_validator.hpp"
#include "troupe/tools/guarded_fetch.hpp"
#include "troupe/tools/http_template.hpp"
#include "troupe/tools/sandbox.hpp"
#include "troupe/tools/workspace.hpp"

namespace troupe::tools {

namespace asio = boost::asio;

namespace {

// Script code larger than this cannot be one argument of the interpreter (MAX_ARG_STRLEN
// is 128 KiB); tool_config.cpp refuses inline code past 100 KiB, the same bound.
constexpr std::size_t max_script_bytes = 100 * 1024;
// stdout and stderr of a script are kept up to this each.
constexpr std::size_t script_output_cap = 64 * 1024;
// V8 reserves about 1 GiB of address space at start-up whatever the program uses.
constexpr std::size_t node_address_space_extra_mb = 1024;
constexpr std::size_t script_memory_mb = 512;

// The property names of a schema (what placeholders may name).
std::vector<std::string> schema_properties(std::string_view schema) {
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  simdjson::dom::object properties;
  if (parser.parse(schema.data(), schema.size())["properties"].get_object().get(properties) ==
      simdjson::SUCCESS) {
    for (auto field : properties) {
      out.emplace_back(field.key);
    }
  }
  return out;
}

// `text` without its `${NAME}` references (placeholders are looked for in the rest).
std::string without_env_references(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      const auto close = text.find('}', i + 2);
      if (close != std::string_view::npos) {
        i = close;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

expected<void> check_placeholders(std::string_view text, std::string_view field,
                                  const std::vector<std::string>& properties) {
  auto names = template_placeholders(text);
  if (!names) {
    return tl::unexpected(names.error());
  }
  for (const auto& name : *names) {
    if (std::find(properties.begin(), properties.end(), name) == properties.end()) {
      return fail(
          errc::invalid_argument,
          fmt::format("{}: the placeholder {{{}}} is not a property of parameters", field, name));
    }
  }
  return {};
}

// A header value: its literal parts expanded as header text, each `${NAME}` replaced by
// the variable's value. The two never mix: a value is never expanded again.
expected<std::string> expand_header(std::string_view text, const template_values& values,
                                    const custom_tool_environment& env, std::string_view header) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto ref = text.find("${", i);
    const auto literal_end = ref == std::string_view::npos ? text.size() : ref;
    auto literal = expand_template(text.substr(i, literal_end - i), values, template_part::header);
    if (!literal) {
      return tl::unexpected(literal.error());
    }
    out += *literal;
    if (ref == std::string_view::npos) {
      break;
    }
    const auto close = text.find('}', ref + 2);
    if (close == std::string_view::npos) {
      out += text.substr(ref);
      break;
    }
    const auto name = std::string(text.substr(ref + 2, close - ref - 2));
    const auto found = env.environment.find(name);
    if (!env.key_env.allows(name) || found == env.environment.end() || found->second.empty()) {
      return fail(errc::unavailable,
                  fmt::format("the header {} needs the environment variable {}, which is not "
                              "set (or not allowed)",
                              header, name));
    }
    if (std::any_of(found->second.begin(), found->second.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      return fail(errc::invalid_argument,
                  fmt::format("the variable {} holds a control character, which a header value "
                              "may not carry",
                              name));
    }
    out += found->second;
    i = close + 1;
  }
  return out;
}

// What both kinds share: the descriptor, the compiled schema, the settings.
class custom_tool : public tool {
public:
  custom_tool(custom_tool_settings settings, argument_schema schema,
              std::shared_ptr<const custom_tool_environment> environment)
      : settings_(std::move(settings)), schema_(std::move(schema)),
        environment_(std::move(environment)), properties_(schema_properties(settings_.parameters)) {
    descriptor_.name = settings_.name;
    descriptor_.description = settings_.description;
    descriptor_.input_schema = settings_.parameters;
    // HTTP calls touch nothing of the run's; scripts share its workspace.
    descriptor_.concurrency_safe = settings_.kind == custom_tool_kind::http;
  }

  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  bool offered_to(const agent_settings& agent) const noexcept override {
    return settings_.enabled && settings_.offered_to(agent.name);
  }
  std::optional<approval_mode> approval() const noexcept override {
    return settings_.approval;
  }
  bool writes_over_http() const noexcept override {
    return settings_.kind == custom_tool_kind::http && settings_.method != "GET" &&
           settings_.method != "HEAD";
  }

protected:
  // The arguments checked against the schema and as placeholder values: a string as it
  // is, any other JSON value as its JSON text, a parameter not given as "".
  expected<template_values> values_of(std::string_view arguments) const {
    if (auto valid = schema_.validate(arguments); !valid) {
      return tl::unexpected(valid.error());
    }
    auto args = detail::parse_tool_arguments(arguments);
    if (!args) {
      return tl::unexpected(args.error());
    }
    template_values values;
    for (const auto& name : properties_) {
      std::string text;
      if (auto e = args->element(name)) {
        std::string_view s;
        text = e->get_string().get(s) == simdjson::SUCCESS ? std::string(s) : simdjson::minify(*e);
      }
      values.emplace(name, std::move(text));
    }
    return values;
  }

  custom_tool_settings settings_;
  argument_schema schema_;
  std::shared_ptr<const custom_tool_environment> environment_;
  std::vector<std::string> properties_;
  tool_descriptor descriptor_;
};

class http_tool final : public custom_tool {
public:
  using custom_tool::custom_tool;

  asio::awaitable<tool_result> invoke(std::string arguments, tool_context ctx) const override {
    return run(this, std::move(arguments), ctx.http);
  }

private:
  static asio::awaitable<tool_result> run(const http_tool* self, std::string arguments,
                                          net::http_client* http);

  expected<net::http_client_request> request_for(const template_values& values) const {
    net::http_client_request r;
    r.method = net::parse_http_method(settings_.method);
    auto url = expand_template(settings_.url, values, template_part::url);
    if (!url) {
      return tl::unexpected(url.error());
    }
    r.url = std::move(*url);
    bool content_type = false;
    for (const auto& h : settings_.headers) {
      auto value = expand_header(h.value, values, *environment_, h.name);
      if (!value) {
        return tl::unexpected(value.error());
      }
      content_type = content_type || net::iequals(h.name, "Content-Type");
      r.headers.push_back({h.name, std::move(*value)});
    }
    if (!settings_.body.empty()) {
      auto body = expand_template(settings_.body, values, template_part::body);
      if (!body) {
        return tl::unexpected(body.error());
      }
      r.body = std::move(*body);
      if (!content_type) {
        r.headers.push_back({"Content-Type", "application/json"});
      }
    }
    return r;
  }
};

asio::awaitable<tool_result> http_tool::run(const http_tool* self, std::string arguments,
                                            net::http_client* http) {
  auto values = self->values_of(arguments);
  if (!values) {
    co_return tool_failure("invalid_arguments", values.error().message);
  }
  if (http == nullptr) {
    co_return tool_failure("tool_error", "no HTTP client is available to this call");
  }
  auto request = self->request_for(*values);
  if (!request) {
    co_return tool_failure(request.error().code == errc::unavailable ? "tool_error"
                                                                     : "invalid_arguments",
                           request.error().message);
  }
  outbound_policy policy;
  policy.allow_private = self->settings_.allow_private;
  policy.max_body_bytes = self->settings_.max_response_bytes;
  policy.max_redirects = 5;
  policy.timeout = self->settings_.timeout;
  const auto method = std::string(net::to_string(request->method));
  auto response = co_await guarded_fetch(*http, std::move(*request), policy);
  if (!response) {
    const auto& e = response.error();
    co_return tool_failure(failure_kind_of(e),
                           e.code == errc::timeout
                               ? fmt::format("{} (the tool's timeout is {} s)", e.message,
                                             self->settings_.timeout.count())
                               : e.message);
  }
  const bool ok = response->status >= 200 && response->status < 300;
  json_writer w;
  w.begin_object().key("ok").value(ok).key("status").value(response->status);
  w.key("content_type").value(response->header("Content-Type"));
  w.key("body");
  detail::json_or_text(w, response->body);
  if (!ok) {
    w.key("error").value(
        fmt::format("{} {} answered HTTP {}", method, response->url, response->status));
  }
  w.end_object();
  tool_result result{ok, std::move(w).str(), {}, {}};
  if (!ok) {
    result.failure_kind = std::string(failure_kind_of_status(response->status));
  }
  co_return result;
}

class script_tool final : public custom_tool {
public:
  using custom_tool::custom_tool;

  asio::awaitable<tool_result> invoke(std::string arguments, tool_context ctx) const override {
    return run(this, std::move(arguments), std::move(ctx));
  }

private:
  static asio::awaitable<tool_result> run(const script_tool* self, std::string arguments,
                                          tool_context ctx);

  std::vector<std::string> argv(const std::string& code) const {
    const auto& i = environment_->interpreters;
    switch (settings_.language) {
      case script_language::javascript:
        return {i.node.string(), "-e", code};
      case script_language::bash:
        return {i.bash.string(), "-c", code, "tool"};
      case script_language::python:
        break;
    }
    return {i.python.string(), "-c", code};
  }
};

// The code of a script tool whose code is a file: read on the blocking pool.
expected<std::string> read_script_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(errc::not_found, fmt::format("the script file {} cannot be read", path));
  }
  std::string code;
  code.resize(max_script_bytes + 1);
  in.read(code.data(), static_cast<std::streamsize>(code.size()));
  code.resize(static_cast<std::size_t>(in.gcount()));
  if (code.size() > max_script_bytes) {
    return fail(errc::limit_exceeded,
                fmt::format("the script file {} is larger than 100 KiB", path));
  }
  return code;
}

asio::awaitable<tool_result> script_tool::run(const script_tool* self, std::string arguments,
                                              tool_context ctx) {
  if (auto values = self->values_of(arguments); !values) {
    co_return tool_failure("invalid_arguments", values.error().message);
  }
  if (ctx.sandbox == nullptr) {
    co_return tool_failure("policy_blocked",
                           "no sandbox is configured, so the script cannot run; it was not run");
  }
  // On the blocking pool: the run's workspace is made when this is its first call (a new
  // conversation has none yet), and a script kept in a file is read.
  auto pool = self->environment_->pool ? self->environment_->pool : blocking_pool::shared_default();
  auto prepare = [path = self->settings_.file, code = self->settings_.code,
                  workspace_dir = ctx.workspace](const job_control&) -> expected<std::string> {
    if (!workspace_dir.empty()) {
      if (auto ws = workspace::open(workspace_dir); !ws) {
        return tl::unexpected(ws.error());
      }
    }
    return code.empty() ? read_script_file(path) : code;
  };
  auto done = co_await pool->run(std::move(prepare), std::chrono::seconds(10));
  if (!done || !*done) {
    co_return tool_failure("tool_error", !done ? done.error().message : done->error().message);
  }
  std::string code = std::move(**done);
  auto command = self->argv(code);
  if (::access(command.front().c_str(), X_OK) != 0) {
    co_return tool_failure("tool_error",
                           fmt::format("the {} interpreter {} is missing",
                                       to_string(self->settings_.language), command.front()));
  }
  sandbox_request request;
  request.argv = std::move(command);
  request.workspace = ctx.workspace;
  // The arguments as the model wrote them ("" for none is "{}").
  request.stdin_data =
      arguments.find_first_not_of(" \t\r\n") == std::string::npos ? "{}" : arguments;
  request.limits.timeout = self->settings_.timeout;
  request.limits.memory_mb = script_memory_mb;
  if (self->settings_.language == script_language::javascript) {
    request.limits.address_space_mb = script_memory_mb + node_address_space_extra_mb;
  }
  request.limits.output_cap_bytes = script_output_cap;
  auto r = co_await ctx.sandbox->run(std::move(request));
  const bool ok = r.exit_code == 0 && !r.timed_out && !r.cancelled;
  json_writer w;
  w.begin_object().key("ok").value(ok);
  detail::write_script_outcome(
      w, r, ok,
      fmt::format("killed after the tool's timeout of {} s", self->settings_.timeout.count()));
  w.end_object();
  tool_result result{ok, std::move(w).str(), {}, {}};
  if (!ok) {
    result.failure_kind = r.timed_out ? "timeout" : "tool_error";
  }
  co_return result;
}

} // namespace

expected<void> check_custom_tool(const custom_tool_settings& t) {
  auto schema = argument_schema::compile(t.parameters);
  if (!schema) {
    return fail(errc::invalid_argument,
                fmt::format("tool '{}': parameters: {}", t.name, schema.error().message));
  }
  if (t.kind != custom_tool_kind::http) {
    return {};
  }
  const auto properties = schema_properties(t.parameters);
  const auto where = [&](std::string_view field) {
    return fmt::format("tool '{}': {}", t.name, field);
  };
  if (auto ok = check_placeholders(t.url, where("url"), properties); !ok) {
    return ok;
  }
  if (auto ok = check_placeholders(t.body, where("body"), properties); !ok) {
    return ok;
  }
  for (const auto& h : t.headers) {
    if (auto ok = check_placeholders(without_env_references(h.value),
                                     where(fmt::format("headers.{}", h.name)), properties);
        !ok) {
      return ok;
    }
  }
  return {};
}

expected<std::shared_ptr<const tool>>
make_custom_tool(custom_tool_settings settings,
                 std::shared_ptr<const custom_tool_environment> environment) {
  if (!environment) {
    environment = std::make_shared<const custom_tool_environment>();
  }
  if (auto ok = validate_custom_tool(settings, environment->key_env,
                                     fmt::format("tool '{}'", settings.name));
      !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto ok = check_custom_tool(settings); !ok) {
    return tl::unexpected(ok.error());
  }
  auto schema = argument_schema::compile(settings.parameters);
  if (!schema) {
    return tl::unexpected(schema.error());
  }
  if (settings.kind == custom_tool_kind::http) {
    return std::make_shared<const http_tool>(std::move(settings), std::move(*schema),
                                             std::move(environment));
  }
  return std::make_shared<const script_tool>(std::move(settings), std::move(*schema),
                                             std::move(environment));
}

// --- the set -------------------------------------------------------------------------------

custom_tool_set::custom_tool_set(std::shared_ptr<const custom_tool_environment> environment,
                                 std::vector<std::string> reserved)
    : environment_(environment ? std::move(environment)
                               : std::make_shared<const custom_tool_environment>()),
      reserved_(std::move(reserved)),
      source_(std::make_shared<dynamic_tool_source>(std::string(custom_source_name))) {}

expected<void> custom_tool_set::check(const custom_tool_settings& t) const {
  if (std::find(reserved_.begin(), reserved_.end(), t.name) != reserved_.end()) {
    return fail(errc::conflict,
                fmt::format("tool '{}': name: '{}' is a built-in tool's name", t.name, t.name));
  }
  return make_custom_tool(t, environment_).map([](auto&&) {});
}

expected<std::uint64_t> custom_tool_set::install(custom_tool_settings t) {
  if (auto ok = check(t); !ok) {
    return tl::unexpected(ok.error());
  }
  auto built = make_custom_tool(t, environment_);
  if (!built) {
    return tl::unexpected(built.error());
  }
  std::lock_guard lock(mutex_);
  auto name = t.name;
  tools_.insert_or_assign(std::move(name), std::make_pair(std::move(t), std::move(*built)));
  return publish();
}

bool custom_tool_set::remove(std::string_view name) {
  std::lock_guard lock(mutex_);
  const auto it = tools_.find(name);
  if (it == tools_.end()) {
    return false;
  }
  tools_.erase(it);
  (void)publish();
  return true;
}

expected<std::uint64_t> custom_tool_set::replace_all(std::vector<custom_tool_settings> tools) {
  std::map<std::string, std::pair<custom_tool_settings, std::shared_ptr<const tool>>, std::less<>>
      next;
  for (auto& t : tools) {
    if (auto ok = check(t); !ok) {
      return tl::unexpected(ok.error());
    }
    auto built = make_custom_tool(t, environment_);
    if (!built) {
      return tl::unexpected(built.error());
    }
    auto name = t.name;
    next.insert_or_assign(std::move(name), std::make_pair(std::move(t), std::move(*built)));
  }
  std::lock_guard lock(mutex_);
  tools_ = std::move(next);
  return publish();
}

std::vector<custom_tool_settings> custom_tool_set::all() const {
  std::lock_guard lock(mutex_);
  std::vector<custom_tool_settings> out;
  for (const auto& [name, entry] : tools_) {
    out.push_back(entry.first);
  }
  return out;
}

expected<std::uint64_t> custom_tool_set::publish() {
  std::vector<std::shared_ptr<const tool>> tools;
  for (const auto& [name, entry] : tools_) {
    tools.push_back(entry.second);
  }
  return source_->replace(std::move(tools));
}

} // namespace troupe::tools
