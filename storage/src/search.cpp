#include "troupe/storage/search.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "troupe/storage/schema.hpp"

namespace troupe::storage {

namespace {

constexpr std::size_t max_terms = 16;
constexpr std::size_t max_term_bytes = 64;
constexpr std::size_t snippet_bytes = 200;

bool is_word_byte(unsigned char c) {
  return std::isalnum(c) != 0 || c >= 0x80;
}

bool is_continuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// Moves `pos` back to the start of a UTF-8 character.
std::size_t char_start(std::string_view s, std::size_t pos) {
  while (pos > 0 && pos < s.size() && is_continuation(static_cast<unsigned char>(s[pos]))) {
    --pos;
  }
  return pos;
}

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Case-insensitive (ASCII) find, as SQLite's LIKE matches.
std::size_t ifind(std::string_view hay, std::string_view needle, std::size_t from) {
  if (needle.empty() || hay.size() < needle.size()) {
    return std::string_view::npos;
  }
  for (std::size_t i = from; i + needle.size() <= hay.size(); ++i) {
    bool match = true;
    for (std::size_t j = 0; j < needle.size(); ++j) {
      if (lower(hay[i + j]) != lower(needle[j])) {
        match = false;
        break;
      }
    }
    if (match) {
      return i;
    }
  }
  return std::string_view::npos;
}

std::string clamp_utf8(std::string text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return text;
  }
  text.resize(char_start(text, max_bytes));
  return text;
}

// A window of `content` around the first match of any term, matches marked [ ].
std::string like_snippet(std::string_view content, const std::vector<std::string>& terms) {
  std::size_t first = std::string_view::npos;
  for (const auto& t : terms) {
    first = std::min(first, ifind(content, t, 0));
  }
  if (first == std::string_view::npos) {
    first = 0;
  }
  std::size_t begin =
      char_start(content, first > snippet_bytes / 3 ? first - snippet_bytes / 3 : 0);
  std::size_t end = std::min(content.size(), begin + snippet_bytes);
  end = end < content.size() ? char_start(content, end) : end;
  const std::string_view window = content.substr(begin, end - begin);
  std::string out;
  if (begin > 0) {
    out += "…";
  }
  std::size_t i = 0;
  while (i < window.size()) {
    std::size_t best = std::string_view::npos;
    std::size_t best_len = 0;
    for (const auto& t : terms) {
      const auto at = ifind(window, t, i);
      if (at < best || (at == best && t.size() > best_len)) {
        best = at;
        best_len = t.size();
      }
    }
    if (best == std::string_view::npos) {
      out.append(window.substr(i));
      break;
    }
    out.append(window.substr(i, best - i));
    out += '[';
    out.append(window.substr(best, best_len));
    out += ']';
    i = best + best_len;
  }
  if (end < content.size()) {
    out += "…";
  }
  return out;
}

std::string like_pattern(std::string_view term) {
  std::string p = "%";
  for (const char c : term) {
    if (c == '%' || c == '_' || c == '\\') {
      p += '\\';
    }
    p += c;
  }
  p += '%';
  return p;
}

std::int64_t clamp_limit(std::int64_t limit) {
  return std::clamp<std::int64_t>(limit, 1, 100);
}

// Whether more than `threshold` messages (of all users) contain `term`. Costs at most
// `threshold` steps through the term's postings, newest first.
expected<bool> is_common_term(connection& c, const std::string& term, std::int64_t threshold) {
  auto found = c.query_int("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?1 "
                           "ORDER BY rowid DESC LIMIT 1 OFFSET ?2",
                           fmt::format(R"(content : "{}")", term), threshold);
  if (found) {
    return true;
  }
  if (found.error().code == errc::not_found) {
    return false;
  }
  return tl::unexpected(found.error());
}

std::string quoted_or(const std::vector<std::string>& terms) {
  std::string out;
  for (const auto& t : terms) {
    out += out.empty() ? "\"" : " OR \"";
    out += t;
    out += '"';
  }
  return out;
}

expected<std::vector<search_hit>> search_fts(connection& c, const search_query& q,
                                             const std::vector<std::string>& terms) {
  // bm25 computes each word's IDF by reading all of its postings, every query: a word in
  // most messages costs tens of milliseconds at a million rows. Such words are treated
  // as stop words; if every word is one, hits come newest first instead of by bm25.
  std::vector<std::string> distinctive;
  for (const auto& t : terms) {
    auto common =
        q.common_term_rows > 0 ? is_common_term(c, t, q.common_term_rows) : expected<bool>(false);
    if (!common) {
      return tl::unexpected(common.error());
    }
    if (!*common) {
      distinctive.push_back(t);
    }
  }
  const bool ranked = !distinctive.empty();
  constexpr std::string_view select_hits =
      "SELECT m.id, m.conversation_id, c.uuid, m.role, "
      "snippet(messages_fts, 0, '[', ']', '…', 24), m.created_at "
      "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
      "JOIN conversations c ON c.id = m.conversation_id "
      "WHERE messages_fts MATCH ?1 AND m.owner_user_id = ?2 ";
  static const auto by_rank =
      std::string(select_hits) + "ORDER BY bm25(messages_fts, 1.0, 0.0), m.id DESC LIMIT ?3";
  static const auto by_recency =
      std::string(select_hits) + "ORDER BY messages_fts.rowid DESC LIMIT ?3";
  auto st = c.prepare(ranked ? by_rank : by_recency);
  if (!st) {
    return tl::unexpected(st.error());
  }
  // The owner filter inside MATCH lets FTS5 intersect posting lists and rank only this
  // user's hits; the SQL filter restates it as a guard.
  const auto expression = fmt::format(R"(owner_user_id : "{}" AND content : ({}))", q.owner_user_id,
                                      quoted_or(ranked ? distinctive : terms));
  if (auto b = st->bind_all(expression, q.owner_user_id, clamp_limit(q.limit)); !b) {
    return tl::unexpected(b.error());
  }
  std::vector<search_hit> hits;
  for (;;) {
    auto row = st->step();
    if (!row) {
      return tl::unexpected(row.error());
    }
    if (!*row) {
      return hits;
    }
    hits.push_back({st->int64(0), st->int64(1), st->text(2), st->text(3),
                    clamp_utf8(st->text(4), snippet_bytes + 64), st->int64(5)});
  }
}

expected<std::vector<search_hit>> search_like(connection& c, const search_query& q,
                                              const std::vector<std::string>& terms) {
  // Rank: how many distinct words the message contains, then newest first.
  std::string score;
  std::string any;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const auto param = i + 3;
    score += fmt::format("{}(m.content LIKE ?{} ESCAPE '\\')", i == 0 ? "" : " + ", param);
    any += fmt::format("{}m.content LIKE ?{} ESCAPE '\\'", i == 0 ? "" : " OR ", param);
  }
  const auto sql = fmt::format("SELECT m.id, m.conversation_id, c.uuid, m.role, m.content, "
                               "m.created_at, ({}) AS score "
                               "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
                               "WHERE m.owner_user_id = ?1 AND ({}) "
                               "ORDER BY score DESC, m.id DESC LIMIT ?2",
                               score, any);
  auto st = c.prepare(sql);
  if (!st) {
    return tl::unexpected(st.error());
  }
  if (auto b = st->bind_all(q.owner_user_id, clamp_limit(q.limit)); !b) {
    return tl::unexpected(b.error());
  }
  for (std::size_t i = 0; i < terms.size(); ++i) {
    if (auto b = st->bind(static_cast<int>(i + 3), like_pattern(terms[i])); !b) {
      return tl::unexpected(b.error());
    }
  }
  std::vector<search_hit> hits;
  for (;;) {
    auto row = st->step();
    if (!row) {
      return tl::unexpected(row.error());
    }
    if (!*row) {
      return hits;
    }
    hits.push_back({st->int64(0), st->int64(1), st->text(2), st->text(3),
                    like_snippet(st->text(4), terms), st->int64(5)});
  }
}

} // namespace

std::vector<std::string> query_terms(std::string_view text) {
  std::vector<std::string> terms;
  std::size_t i = 0;
  while (i < text.size() && terms.size() < max_terms) {
    while (i < text.size() && !is_word_byte(static_cast<unsigned char>(text[i]))) {
      ++i;
    }
    const std::size_t start = i;
    while (i < text.size() && is_word_byte(static_cast<unsigned char>(text[i]))) {
      ++i;
    }
    if (i > start) {
      auto term = clamp_utf8(std::string(text.substr(start, i - start)), max_term_bytes);
      if (!term.empty() && std::find(terms.begin(), terms.end(), term) == terms.end()) {
        terms.push_back(std::move(term));
      }
    }
  }
  return terms;
}

std::string fts_match_expression(std::string_view text) {
  // A term holds only letters, digits and non-ASCII bytes, so it has no quote to escape;
  // inside quotes NEAR, AND, *, ^, : and parentheses are plain text.
  return quoted_or(query_terms(text));
}

expected<std::vector<search_hit>> search_messages(connection& c, const search_query& q) {
  const auto terms = query_terms(q.text);
  if (terms.empty()) {
    return std::vector<search_hit>{};
  }
  auto engine = q.engine;
  if (engine != search_engine_kind::like) {
    auto indexed = has_message_index(c);
    if (!indexed) {
      return tl::unexpected(indexed.error());
    }
    if (!*indexed) {
      if (engine == search_engine_kind::fts) {
        return fail(errc::unavailable, "the full-text index of messages does not exist "
                                       "(SQLite without FTS5?); use the LIKE engine");
      }
      engine = search_engine_kind::like;
    } else {
      engine = search_engine_kind::fts;
    }
  }
  if (engine == search_engine_kind::fts) {
    return search_fts(c, q, terms);
  }
  return search_like(c, q, terms);
}

} // namespace troupe::storage
