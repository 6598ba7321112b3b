#include "troupe/storage/catalog_sync.hpp"

#include <chrono>

#include <fmt/format.h>

#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::storage {

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string tools_json(const std::vector<std::string>& tools) {
  json_writer w;
  w.begin_array();
  for (const auto& t : tools) {
    w.value(t);
  }
  w.end_array();
  return std::move(w).str();
}

std::string limits_json(const agent_settings& a) {
  json_writer w;
  w.begin_object().key("max_rounds").value(a.max_rounds);
  w.key("timeout_s").value(a.timeout.count());
  if (a.context_window != 0) {
    w.key("context_window").value(a.context_window);
  }
  // The memory keys only when they differ from their defaults (existing rows stay as
  // they were written).
  const agent_settings defaults;
  if (a.memory != defaults.memory) {
    w.key("memory").value(a.memory);
  }
  if (a.memory_autoapprove != defaults.memory_autoapprove) {
    w.key("memory_autoapprove").value(a.memory_autoapprove);
  }
  if (a.memory_max_items != defaults.memory_max_items) {
    w.key("memory_max_items").value(a.memory_max_items);
  }
  if (a.memory_max_chars != defaults.memory_max_chars) {
    w.key("memory_max_chars").value(a.memory_max_chars);
  }
  if (a.web_search != defaults.web_search) {
    w.key("web_search").value(to_string(a.web_search));
  }
  // Skills and approvals (issue 19), only when set.
  if (!a.skills.empty()) {
    w.key("skills").begin_array();
    for (const auto& skill : a.skills) {
      w.value(skill);
    }
    w.end_array();
  }
  if (!a.approval.empty()) {
    w.key("approval").begin_object();
    for (const auto& [tool, mode] : a.approval) {
      w.key(tool).value(to_string(mode));
    }
    w.end_object();
  }
  if (!a.approval_profile.empty()) {
    w.key("approval_profile").value(a.approval_profile);
  }
  if (a.approval_timeout_s != 0) {
    w.key("approval_timeout_s").value(a.approval_timeout_s);
  }
  w.end_object();
  return std::move(w).str();
}

std::string provider_config_json(const provider_settings& p) {
  json_writer w;
  w.begin_object().key("models").begin_array();
  for (const auto& m : p.models) {
    w.value(m);
  }
  w.end_array().key("declared").value(true);
  w.key("context_window").value(p.context_window).end_object();
  return std::move(w).str();
}

// The id of the row in `table` whose name is `name`, if any.
expected<std::optional<std::int64_t>> id_by_name(connection& c, std::string_view table,
                                                 std::string_view name) {
  auto stmt = c.prepare(fmt::format("SELECT id FROM {} WHERE name = ? ORDER BY id LIMIT 1", table));
  if (!stmt) {
    return tl::unexpected(stmt.error());
  }
  if (auto bound = stmt->bind_all(name); !bound) {
    return tl::unexpected(bound.error());
  }
  auto row = stmt->step();
  if (!row) {
    return tl::unexpected(row.error());
  }
  return *row ? std::optional<std::int64_t>(stmt->int64(0)) : std::nullopt;
}

expected<void> run(connection& c, std::string_view sql, const auto&... values) {
  auto stmt = c.prepare(sql);
  if (!stmt) {
    return tl::unexpected(stmt.error());
  }
  if (auto bound = stmt->bind_all(values...); !bound) {
    return bound;
  }
  return stmt->run();
}

} // namespace

expected<catalog_sync_result> sync_declared_catalog(connection& c,
                                                    const std::vector<provider_settings>& providers,
                                                    const std::vector<agent_settings>& agents) {
  return in_transaction(c, [&](connection& conn) -> expected<catalog_sync_result> {
    catalog_sync_result result;
    const auto t = now_ms();
    for (const auto& p : providers) {
      auto existing = id_by_name(conn, "providers", p.name);
      if (!existing) {
        return tl::unexpected(existing.error());
      }
      if (*existing) {
        auto ok = run(conn,
                      "UPDATE providers SET kind = ?, base_url = ?, api_key_ref = ?, "
                      "config_json = ? WHERE id = ?",
                      p.type, p.base_url, p.api_key_env, provider_config_json(p), **existing);
        if (!ok) {
          return tl::unexpected(ok.error());
        }
        ++result.providers_updated;
      } else {
        auto ok = run(conn,
                      "INSERT INTO providers (name, kind, base_url, api_key_ref, config_json, "
                      "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                      p.name, p.type, p.base_url, p.api_key_env, provider_config_json(p), t);
        if (!ok) {
          return tl::unexpected(ok.error());
        }
        ++result.providers_created;
      }
    }
    for (const auto& a : agents) {
      auto provider_id = id_by_name(conn, "providers", a.provider);
      if (!provider_id) {
        return tl::unexpected(provider_id.error());
      }
      if (!*provider_id) {
        return fail(errc::invalid_argument,
                    fmt::format("agent '{}': unknown provider '{}'", a.name, a.provider));
      }
      auto existing = id_by_name(conn, "agents", a.name);
      if (!existing) {
        return tl::unexpected(existing.error());
      }
      const std::string policy(to_string(a.queue));
      if (*existing) {
        auto ok = run(conn,
                      "UPDATE agents SET system_prompt = ?, provider_id = ?, main_model = ?, "
                      "fast_model = ?, fallback_model = ?, tools_json = ?, limits_json = ?, "
                      "queue_policy = ?, updated_at = ? WHERE id = ?",
                      a.system_prompt, **provider_id, a.model, a.fast_model, a.fallback_model,
                      tools_json(a.tools), limits_json(a), policy, t, **existing);
        if (!ok) {
          return tl::unexpected(ok.error());
        }
        ++result.agents_updated;
      } else {
        auto ok =
            run(conn,
                "INSERT INTO agents (uuid, name, system_prompt, provider_id, main_model, "
                "fast_model, fallback_model, tools_json, limits_json, queue_policy, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                troupe::new_uuid(), a.name, a.system_prompt, **provider_id, a.model, a.fast_model,
                a.fallback_model, tools_json(a.tools), limits_json(a), policy, t, t);
        if (!ok) {
          return tl::unexpected(ok.error());
        }
        ++result.agents_created;
      }
    }
    return result;
  });
}

} // namespace troupe::storage
