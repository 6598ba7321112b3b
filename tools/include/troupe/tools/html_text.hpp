#pragma once

/// \file
/// A web page as readable text, for web_fetch: libxml2's HTML parser (which recovers from
/// broken markup and decodes entities and the page's charset) builds the tree; scripts,
/// styles, templates, embedded objects and the head are dropped; headings become
/// `#`-prefixed lines, list items `- ` lines, paragraphs and other blocks are separated by
/// blank lines, a link keeps its text. White space is collapsed except inside <pre>.

#include <string>
#include <string_view>

namespace troupe::tools {

/// The text of a page and its title.
struct page_text {
  std::string title;
  std::string text;
};

/// Reads `html`. `charset` is the Content-Type's charset when the server named one
/// (empty: the page's own <meta charset>, else UTF-8 / Latin-1 detection). The text is
/// UTF-8. Never fails: what cannot be parsed yields less text.
page_text html_to_text(std::string_view html, std::string_view charset = {});

} // namespace troupe::tools
