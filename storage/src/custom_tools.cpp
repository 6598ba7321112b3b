// Custom tools and search engines in their tables (custom_tools.hpp).

#include "troupe/storage/custom_tools.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "query.hpp"
#include "troupe/runtime/approval.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

namespace {

constexpr std::string_view custom_kinds = "kind IN ('http', 'script')";

expected<custom_tool_settings> tool_from_row(const tool_record& r) {
  custom_tool_settings t;
  json_object_options options;
  options.subject = fmt::format("tool '{}' config_json", r.name);
  auto object = json_object::parse(r.config_json.empty() ? "{}" : r.config_json, options);
  if (!object) {
    return tl::unexpected(object.error());
  }
  if (auto ok = read_custom_tool(*object, t, true); !ok) {
    return fail(errc::parse_error,
                fmt::format("tool '{}' as stored: {}", r.name, ok.error().message));
  }
  auto kind = parse_custom_tool_kind(r.kind);
  if (!kind) {
    return fail(errc::parse_error,
                fmt::format("tool '{}' as stored: {}", r.name, kind.error().message));
  }
  t.name = r.name;
  t.kind = *kind;
  t.description = r.description;
  t.parameters = r.schema_json;
  t.enabled = r.enabled;
  t.approval.reset();
  if (!r.approval.empty()) {
    auto mode = parse_approval_mode(r.approval);
    if (!mode) {
      return fail(errc::parse_error,
                  fmt::format("tool '{}' as stored: {}", r.name, mode.error().message));
    }
    t.approval = *mode;
  }
  return t;
}

// The tool's settings but its approval, which has a column of its own.
std::string config_json(const custom_tool_settings& t) {
  auto without = t;
  without.approval.reset();
  json_writer w;
  write_custom_tool(w, without);
  return std::move(w).str();
}

// The approval column's value: NULL when the tool has none.
std::optional<std::string> approval_column(const custom_tool_settings& t) {
  if (!t.approval) {
    return std::nullopt;
  }
  return std::string(to_string(*t.approval));
}

search_engine_settings engine_from_row(const search_engine_record& r) {
  search_engine_settings e;
  e.name = r.name;
  // A type this build does not know (written by a newer one) reads as the default type;
  // the row stays as it is.
  e.type = parse_search_engine_type(r.kind).value_or(search_engine_type::tavily);
  e.key_env = r.api_key_ref;
  e.base_url = r.base_url;
  e.enabled = r.enabled;
  e.is_default = r.is_default;
  e.declared = r.config_json.find("\"declared\":true") != std::string::npos;
  return e;
}

expected<void> write_engine(connection& c, const search_engine_settings& e, bool replace) {
  if (e.is_default) {
    if (auto ok = c.run("UPDATE search_engines SET is_default = 0 WHERE is_default = 1 AND "
                        "name <> ?",
                        e.name);
        !ok) {
      return ok;
    }
  }
  const std::string kind(to_string(e.type));
  const std::string config = e.declared ? R"({"declared":true})" : "{}";
  if (replace) {
    return c.run("INSERT INTO search_engines (name, kind, base_url, api_key_ref, config_json, "
                 "enabled, is_default, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                 "ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, base_url = "
                 "excluded.base_url, api_key_ref = excluded.api_key_ref, config_json = "
                 "excluded.config_json, enabled = excluded.enabled, is_default = "
                 "excluded.is_default",
                 e.name, kind, e.base_url, e.key_env, config, e.enabled, e.is_default,
                 now_millis());
  }
  return c.run("INSERT INTO search_engines (name, kind, base_url, api_key_ref, config_json, "
               "enabled, is_default, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               e.name, kind, e.base_url, e.key_env, config, e.enabled, e.is_default, now_millis());
}

} // namespace

expected<std::vector<custom_tool_settings>> list_custom_tools(connection& c) {
  auto rows = list_tools(c);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  std::vector<custom_tool_settings> out;
  for (const auto& r : *rows) {
    if (r.kind != "http" && r.kind != "script") {
      continue;
    }
    auto t = tool_from_row(r);
    if (!t) {
      return tl::unexpected(t.error());
    }
    out.push_back(std::move(*t));
  }
  return out;
}

expected<custom_tool_settings> find_custom_tool(connection& c, std::string_view name) {
  auto row = find_tool(c, name);
  if (!row) {
    return tl::unexpected(row.error());
  }
  if (row->kind != "http" && row->kind != "script") {
    return fail(errc::not_found, fmt::format("no custom tool named '{}'", name));
  }
  return tool_from_row(*row);
}

expected<void> insert_custom_tool(connection& c, const custom_tool_settings& t) {
  auto exists = c.query_int("SELECT COUNT(*) FROM tools WHERE name = ?", t.name);
  if (!exists) {
    return tl::unexpected(exists.error());
  }
  if (*exists > 0) {
    return fail(errc::conflict, fmt::format("a tool named '{}' exists already", t.name));
  }
  return c.run("INSERT INTO tools (name, kind, description, schema_json, config_json, enabled, "
               "created_at, approval) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               t.name, std::string(to_string(t.kind)), t.description, t.parameters, config_json(t),
               t.enabled, now_millis(), approval_column(t));
}

expected<void> upsert_custom_tool(connection& c, const custom_tool_settings& t) {
  return c.run("INSERT INTO tools (name, kind, description, schema_json, config_json, enabled, "
               "created_at, approval) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO "
               "UPDATE SET kind = excluded.kind, description = excluded.description, "
               "schema_json = excluded.schema_json, config_json = excluded.config_json, "
               "enabled = excluded.enabled, approval = excluded.approval",
               t.name, std::string(to_string(t.kind)), t.description, t.parameters, config_json(t),
               t.enabled, now_millis(), approval_column(t));
}

expected<bool> delete_custom_tool(connection& c, std::string_view name) {
  if (auto ok = c.run(fmt::format("DELETE FROM tools WHERE name = ? AND {}", custom_kinds), name);
      !ok) {
    return tl::unexpected(ok.error());
  }
  return c.changes() > 0;
}

expected<std::size_t> sync_declared_custom_tools(connection& c,
                                                 const std::vector<custom_tool_settings>& tools) {
  return in_transaction(c, [&](connection& conn) -> expected<std::size_t> {
    // A tool the file declared before and no longer does goes with it.
    auto stored = list_custom_tools(conn);
    if (!stored) {
      return tl::unexpected(stored.error());
    }
    for (const auto& old : *stored) {
      const bool kept = std::any_of(tools.begin(), tools.end(), [&](const custom_tool_settings& t) {
        return t.name == old.name;
      });
      if (old.declared && !kept) {
        if (auto gone = delete_custom_tool(conn, old.name); !gone) {
          return tl::unexpected(gone.error());
        }
      }
    }
    for (auto t : tools) {
      t.declared = true;
      if (auto ok = upsert_custom_tool(conn, t); !ok) {
        return tl::unexpected(ok.error());
      }
    }
    return tools.size();
  });
}

expected<std::vector<search_engine_settings>> list_search_engine_settings(connection& c) {
  auto rows = list_search_engines(c);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  std::vector<search_engine_settings> out;
  for (const auto& r : *rows) {
    out.push_back(engine_from_row(r));
  }
  return out;
}

expected<search_engine_settings> find_search_engine(connection& c, std::string_view name) {
  auto rows = list_search_engines(c);
  if (!rows) {
    return tl::unexpected(rows.error());
  }
  for (const auto& r : *rows) {
    if (r.name == name) {
      return engine_from_row(r);
    }
  }
  return fail(errc::not_found, fmt::format("no search engine named '{}'", name));
}

expected<void> insert_search_engine_settings(connection& c, const search_engine_settings& e) {
  auto exists = c.query_int("SELECT COUNT(*) FROM search_engines WHERE name = ?", e.name);
  if (!exists) {
    return tl::unexpected(exists.error());
  }
  if (*exists > 0) {
    return fail(errc::conflict, fmt::format("a search engine named '{}' exists already", e.name));
  }
  return write_engine(c, e, false);
}

expected<void> upsert_search_engine(connection& c, const search_engine_settings& e) {
  return write_engine(c, e, true);
}

expected<bool> delete_search_engine(connection& c, std::string_view name) {
  if (auto ok = c.run("DELETE FROM search_engines WHERE name = ?", name); !ok) {
    return tl::unexpected(ok.error());
  }
  return c.changes() > 0;
}

expected<std::size_t>
sync_declared_search_engines(connection& c, const std::vector<search_engine_settings>& engines) {
  return in_transaction(c, [&](connection& conn) -> expected<std::size_t> {
    auto stored = list_search_engine_settings(conn);
    if (!stored) {
      return tl::unexpected(stored.error());
    }
    for (const auto& old : *stored) {
      const bool kept =
          std::any_of(engines.begin(), engines.end(),
                      [&](const search_engine_settings& e) { return e.name == old.name; });
      if (old.declared && !kept) {
        if (auto gone = delete_search_engine(conn, old.name); !gone) {
          return tl::unexpected(gone.error());
        }
      }
    }
    for (auto e : engines) {
      e.declared = true;
      if (auto ok = upsert_search_engine(conn, e); !ok) {
        return tl::unexpected(ok.error());
      }
    }
    return engines.size();
  });
}

} // namespace troupe::storage
