// A web page as readable text (html_text.hpp), over libxml2's HTML parser.

#include "troupe/tools/html_text.hpp"

#include <algorithm>
#include <climits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

namespace troupe::tools {

namespace {

const std::set<std::string, std::less<>>& skipped_elements() {
  static const std::set<std::string, std::less<>> names = {
      "script", "style",  "noscript", "template", "svg",   "math",  "head",  "title",
      "iframe", "object", "embed",    "canvas",   "video", "audio", "select"};
  return names;
}

const std::set<std::string, std::less<>>& block_elements() {
  static const std::set<std::string, std::less<>> names = {
      "p",        "div",     "section",    "article", "header", "footer",     "main",    "nav",
      "aside",    "ul",      "ol",         "table",   "tr",     "blockquote", "pre",     "form",
      "fieldset", "figure",  "figcaption", "dl",      "dt",     "dd",         "address", "hr",
      "h1",       "h2",      "h3",         "h4",      "h5",     "h6",         "li",      "body",
      "html",     "details", "summary",    "caption", "center"};
  return names;
}

std::string_view name_of(const xmlNode* node) {
  return node->name == nullptr ? std::string_view{}
                               : std::string_view(reinterpret_cast<const char*>(node->name));
}

// Builds the text: words joined by single spaces, blocks by blank lines.
class text_builder {
public:
  void words(std::string_view text, bool preformatted) {
    if (preformatted) {
      flush_breaks();
      out_ += text;
      space_ = false;
      return;
    }
    for (const char c : text) {
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        space_ = !out_.empty();
        continue;
      }
      flush_breaks();
      if (space_ && !out_.empty() && out_.back() != '\n') {
        out_.push_back(' ');
      }
      space_ = false;
      out_.push_back(c);
    }
  }
  // A line break (<br>) or a paragraph break (a block's edge); the larger one wins.
  void line_break() {
    breaks_ = std::max(breaks_, 1);
  }
  void paragraph_break() {
    breaks_ = 2;
  }
  // Text that starts the next line (a heading's '#', a list item's '-').
  void prefix(std::string_view text) {
    flush_breaks();
    if (!out_.empty() && out_.back() != '\n') {
      out_.push_back('\n');
    }
    out_ += text;
    space_ = false;
  }
  std::string take() {
    while (!out_.empty() && (out_.back() == ' ' || out_.back() == '\n')) {
      out_.pop_back();
    }
    return std::move(out_);
  }

private:
  // Writes the pending line or paragraph break, if any (a break swallows a pending space).
  void flush_breaks() {
    if (breaks_ == 0) {
      return;
    }
    if (!out_.empty()) {
      while (!out_.empty() && out_.back() == ' ') {
        out_.pop_back();
      }
      int have = 0;
      for (auto it = out_.rbegin(); it != out_.rend() && *it == '\n' && have < 2; ++it) {
        ++have;
      }
      for (int k = have; k < breaks_; ++k) {
        out_.push_back('\n');
      }
    }
    breaks_ = 0;
    space_ = false;
  }

  std::string out_;
  int breaks_ = 0;
  bool space_ = false;
};

std::string collapse(std::string_view text) {
  std::string out;
  bool space = false;
  for (const char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) {
      out.push_back(' ');
      space = false;
    }
    out.push_back(c);
  }
  return out;
}

std::string title_of(const xmlNode* root) {
  // Iterative: a hostile page may nest deeply.
  std::vector<const xmlNode*> stack{root};
  while (!stack.empty()) {
    const auto* node = stack.back();
    stack.pop_back();
    for (; node != nullptr; node = node->next) {
      if (node->type == XML_ELEMENT_NODE && name_of(node) == "title") {
        xmlChar* content = xmlNodeGetContent(node);
        std::string title = content != nullptr ? reinterpret_cast<const char*>(content) : "";
        xmlFree(content);
        return collapse(title);
      }
      if (node->children != nullptr && name_of(node) != "body") {
        stack.push_back(node->children);
      }
    }
  }
  return {};
}

void walk(const xmlNode* root, text_builder& out) {
  struct frame {
    const xmlNode* node;
    bool leaving;
  };
  std::vector<frame> stack{{root, false}};
  int preformatted = 0;
  while (!stack.empty()) {
    const auto [node, leaving] = stack.back();
    stack.pop_back();
    const auto name = name_of(node);
    if (leaving) {
      if (name == "pre") {
        --preformatted;
      }
      if (block_elements().contains(name)) {
        out.paragraph_break();
      } else if (name == "td" || name == "th") {
        out.words(" ", false);
      }
      continue;
    }
    if (node->type == XML_TEXT_NODE || node->type == XML_CDATA_SECTION_NODE) {
      if (node->content != nullptr) {
        out.words(reinterpret_cast<const char*>(node->content), preformatted > 0);
      }
      continue;
    }
    if (node->type != XML_ELEMENT_NODE && node->type != XML_HTML_DOCUMENT_NODE &&
        node->type != XML_DOCUMENT_NODE) {
      continue;
    }
    if (skipped_elements().contains(name)) {
      continue;
    }
    if (name == "br") {
      out.line_break();
      continue;
    }
    if (block_elements().contains(name)) {
      out.paragraph_break();
    }
    if (name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6') {
      out.prefix(std::string(static_cast<std::size_t>(name[1] - '0'), '#') + " ");
    } else if (name == "li") {
      out.prefix("- ");
    } else if (name == "pre") {
      ++preformatted;
    }
    stack.push_back({node, true});
    // Children in document order: pushed last to first.
    std::vector<const xmlNode*> children;
    for (const xmlNode* c = node->children; c != nullptr; c = c->next) {
      children.push_back(c);
    }
    for (auto it = children.rbegin(); it != children.rend(); ++it) {
      stack.push_back({*it, false});
    }
  }
}

} // namespace

page_text html_to_text(std::string_view html, std::string_view charset) {
  static std::once_flag init;
  std::call_once(init, [] { xmlInitParser(); });
  page_text page;
  if (html.empty() || html.size() > static_cast<std::size_t>(INT_MAX)) {
    return page;
  }
  const std::string encoding(charset);
  htmlDocPtr doc = htmlReadMemory(html.data(), static_cast<int>(html.size()), nullptr,
                                  encoding.empty() ? nullptr : encoding.c_str(),
                                  HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                                      HTML_PARSE_NONET | HTML_PARSE_NOIMPLIED);
  if (doc == nullptr && !encoding.empty()) {
    // A charset libxml2 does not know: let it detect one.
    doc = htmlReadMemory(html.data(), static_cast<int>(html.size()), nullptr, nullptr,
                         HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                             HTML_PARSE_NONET | HTML_PARSE_NOIMPLIED);
  }
  if (doc == nullptr) {
    return page;
  }
  const xmlNode* first = doc->children;
  page.title = title_of(first);
  text_builder out;
  for (const xmlNode* n = first; n != nullptr; n = n->next) {
    walk(n, out);
  }
  page.text = out.take();
  xmlFreeDoc(doc);
  return page;
}

} // namespace troupe::tools
