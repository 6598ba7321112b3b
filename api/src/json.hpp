#pragma once

// Private to api/: reading JSON request bodies field by field with errors that name the
// field, pagination, paged and single JSON answers, and mapping troupe errors to HTTP
// answers.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "troupe/net/http_message.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::api {

/// A parsed JSON object body (a `json_object`, null being a value). The first problem
/// found is kept as "<field>: <what>", and a getter that finds one answers nullopt.
class json_body {
public:
  /// Parses `text`; a body that is not a JSON object is an error on field "body".
  explicit json_body(std::string_view text);

  bool has(std::string_view field) const {
    return object_ && object_->has(field);
  }
  /// A string field; `required` missing fields are an error.
  std::optional<std::string> text(std::string_view field, bool required = false,
                                  std::size_t max_size = 64 * 1024);
  /// An integer field (or null when `nullable`: then the outer optional holds nullopt).
  std::optional<std::optional<std::int64_t>> integer(std::string_view field, bool nullable = false);
  /// An array of strings, returned as its JSON text.
  std::optional<std::string> string_array(std::string_view field);
  /// An object, returned as its JSON text.
  std::optional<std::string> object(std::string_view field);

  /// Records every field not in `known` as a problem ("unknown field").
  void only(std::initializer_list<std::string_view> known);
  /// The element of `field`, when present (for shapes the helpers above do not cover).
  std::optional<simdjson::dom::element> element(std::string_view field) const {
    return object_ ? object_->element(field) : std::nullopt;
  }

  /// Records a validation problem (the first one wins).
  void invalid(std::string_view field, std::string_view what);
  bool ok() const noexcept {
    return error_.empty();
  }
  /// The 400 answer for the first problem.
  net::http_response error_response() const;
  /// The first problem ("<field>: <what>"), empty when none.
  std::string_view problem() const noexcept {
    return error_;
  }

private:
  /// Keeps `e`'s message when it is the first problem; answers nullopt for the getters.
  std::nullopt_t record(const error& e);
  std::optional<json_object> object_;
  std::string error_;
};

/// Reads `limit` (1..200, default 50) and `offset` (>= 0) from the query; on a bad value
/// returns the 400 answer instead.
std::optional<net::http_response> read_page(const net::http_request& request, storage::page& into);

/// The HTTP answer for a failed operation (not_found 404, conflict 409, …).
net::http_response error_response(const error& e);

/// The HTTP answer when the chat service did not take a message: 429 with Retry-After
/// when a bound refused it (`actors.max_pending`; nothing was stored), else as
/// `error_response`.
net::http_response submit_refusal(const error& e);

/// A row number from a path parameter: a positive integer, else nullopt.
std::optional<storage::row_id> parse_id(std::string_view text);

/// 404 "no such <what>".
net::http_response not_found(std::string_view what);

/// Why a row the path named cannot be changed over the API: it is missing (404 "no such
/// <what>"), its lookup failed, or the config file declares it (409 naming it): the
/// answer, or nullopt when `found` may be changed.
template <class Row>
std::optional<net::http_response> refusal_to_edit(const expected<Row>& found,
                                                  std::string_view what) {
  if (!found) {
    return found.error().code == errc::not_found ? not_found(what) : error_response(found.error());
  }
  if (found->declared) {
    return net::http_response::error(
        409, "conflict",
        fmt::format("{} '{}' is declared in the config file: change it there", what, found->name));
  }
  return std::nullopt;
}

/// `{"data":[…],"total":N,"limit":L,"offset":O}`, each row written by `write_one`.
template <class Record, class Write>
net::http_response page_answer(const std::vector<Record>& rows, std::int64_t total, storage::page p,
                               Write write_one) {
  json_writer w;
  w.begin_object();
  w.key("data").begin_array();
  for (const auto& r : rows) {
    write_one(w, r);
  }
  w.end_array();
  w.key("total").value(total);
  w.key("limit").value(p.limit);
  w.key("offset").value(p.offset);
  w.end_object();
  return net::http_response::json(200, std::move(w).str());
}

/// The page `p` of `all` (every row, in order) as page_answer writes it.
template <class Record, class Write>
net::http_response page_of_all(const std::vector<Record>& all, storage::page p, Write write_one) {
  const auto total = static_cast<std::int64_t>(all.size());
  std::vector<Record> window;
  for (auto i = p.offset; i < total && i < p.offset + p.limit; ++i) {
    window.push_back(all[static_cast<std::size_t>(i)]);
  }
  return page_answer(window, total, p, write_one);
}

/// One record as the JSON answer, with `status`.
template <class Record, class Write>
net::http_response one_answer(unsigned status, const Record& r, Write write_one) {
  json_writer w;
  write_one(w, r);
  return net::http_response::json(status, std::move(w).str());
}

} // namespace troupe::api
