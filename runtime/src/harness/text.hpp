#pragma once

/// \file
/// Text matching shared by the harness classifiers: ASCII case folding, phrase search
/// with word boundaries, trimming, rune counting and file-name spotting. Private to
/// runtime/src/harness.

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::harness::detail {

/// Lower-cases ASCII letters and folds typographic apostrophes (U+2018, U+2019) into
/// `'`, so "Can’t" matches "can't". Other bytes are kept as they are.
std::string fold(std::string_view text);

/// Position of `phrase` in `folded` text, or npos. An ASCII phrase that begins (ends)
/// with a letter or digit must not be preceded (followed) by one, so "done" does not
/// match inside "abandoned"; phrases in other scripts match as substrings.
std::size_t find_phrase(std::string_view folded, std::string_view phrase,
                        std::size_t from = 0) noexcept;

/// True when any phrase occurs in `folded` (see find_phrase).
bool contains_any(std::string_view folded,
                  std::initializer_list<std::string_view> phrases) noexcept;

/// End position of the last occurrence of any phrase in `folded`, or npos.
std::size_t last_phrase_end(std::string_view folded,
                            std::initializer_list<std::string_view> phrases) noexcept;

/// `text` without leading and trailing white space, including U+00A0, U+3000 and the
/// zero-width U+200B and U+FEFF that models sometimes emit alone.
std::string_view trim(std::string_view text) noexcept;

/// The byte offset after the code point at `i`; an invalid byte is one code point.
std::size_t next_rune(std::string_view text, std::size_t i) noexcept;

/// Number of code points; each invalid byte counts as one.
std::size_t count_runes(std::string_view text) noexcept;

/// A file name (or bare extension) mentioned in text.
struct file_mention {
  /// The name with its extension, lower-cased; empty for a bare ".csv".
  std::string name;
  /// The extension with its dot, lower-cased.
  std::string extension;
  /// Byte offset of the mention in the folded text.
  std::size_t position = 0;
};

/// File names with a deliverable extension (.md .html .xlsx .csv .pdf .png …) in
/// `folded` text. URLs are not file mentions. ".json" and ".txt" count only with a name,
/// because "reply in json" is not a file.
std::vector<file_mention> find_file_mentions(std::string_view folded);

/// True when the closest marker before a file mention, within its sentence, reads it as
/// an input ("read data.csv", "summary of report.pdf") rather than an output ("save as
/// out.md", "convert a.csv to b.xlsx" for b.xlsx). No marker at all reads as an output.
bool mention_is_input(std::string_view folded, const file_mention& mention);

} // namespace troupe::harness::detail
