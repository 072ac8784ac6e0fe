// Recursive-descent XML tokenizer sized for topology files. Depth is capped so
// a hostile file cannot exhaust the stack.
#include "topo/xml.h"

#include <cctype>

#include "core/result.h"

namespace chorus::topo {

const std::string* XmlElement::attr(const std::string& key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void XmlElement::set(const std::string& key, const std::string& value) {
  for (auto& kv : attrs) {
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  }
  attrs.emplace_back(key, value);
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  ncclResult_t document(XmlElement* root) {
    CHORUS_CHECK(skipMisc());
    if (atEnd() || peek() != '<') return error("expected the root element");
    CHORUS_CHECK(element(root, 0));
    CHORUS_CHECK(skipMisc());
    if (!atEnd()) return error("unexpected content after the root element");
    return ncclSuccess;
  }

 private:
  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  bool startsWith(const char* s) const { return text_.compare(pos_, std::char_traits<char>::length(s), s) == 0; }
  void advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < text_.size(); ++i, ++pos_)
      if (text_[pos_] == '\n') ++line_;
  }
  void skipSpace() {
    while (!atEnd() && std::isspace(static_cast<unsigned char>(peek()))) advance();
  }

  ncclResult_t error(const char* what) {
    return fail(ncclInvalidUsage, "%s:%d: malformed topology XML: %s", source_.c_str(), line_, what);
  }

  ncclResult_t skipUntil(const char* end) {
    size_t at = text_.find(end, pos_);
    if (at == std::string::npos) return error("unterminated comment or declaration");
    advance(at - pos_ + std::char_traits<char>::length(end));
    return ncclSuccess;
  }

  // Whitespace, comments, declarations and DOCTYPE between elements.
  ncclResult_t skipMisc() {
    for (;;) {
      skipSpace();
      if (startsWith("<!--")) {
        CHORUS_CHECK(skipUntil("-->"));
      } else if (startsWith("<?")) {
        CHORUS_CHECK(skipUntil("?>"));
      } else if (startsWith("<!")) {
        CHORUS_CHECK(skipUntil(">"));
      } else {
        return ncclSuccess;
      }
    }
  }

  static bool nameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  }

  ncclResult_t name(std::string* out) {
    size_t start = pos_;
    while (!atEnd() && nameChar(peek())) advance();
    if (pos_ == start) return error("expected a name");
    *out = text_.substr(start, pos_ - start);
    return ncclSuccess;
  }

  ncclResult_t unescape(const std::string& raw, std::string* out) {
    static const struct {
      const char* entity;
      char c;
    } kEntities[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
    out->clear();
    for (size_t i = 0; i < raw.size();) {
      if (raw[i] != '&') {
        out->push_back(raw[i++]);
        continue;
      }
      bool known = false;
      for (const auto& e : kEntities) {
        size_t len = std::char_traits<char>::length(e.entity);
        if (raw.compare(i, len, e.entity) == 0) {
          out->push_back(e.c);
          i += len;
          known = true;
          break;
        }
      }
      if (!known) return error("unknown entity in attribute value");
    }
    return ncclSuccess;
  }

  ncclResult_t attribute(XmlElement* el) {
    std::string key, raw, value;
    CHORUS_CHECK(name(&key));
    skipSpace();
    if (atEnd() || peek() != '=') return error("expected '=' after attribute name");
    advance();
    skipSpace();
    if (atEnd() || (peek() != '"' && peek() != '\'')) return error("expected a quoted attribute value");
    char quote = peek();
    advance();
    size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) return error("unterminated attribute value");
    raw = text_.substr(pos_, end - pos_);
    if (raw.find('<') != std::string::npos) return error("'<' inside an attribute value");
    advance(end - pos_ + 1);
    CHORUS_CHECK(unescape(raw, &value));
    if (el->attr(key) != nullptr) return error("duplicate attribute");
    el->attrs.emplace_back(std::move(key), std::move(value));
    return ncclSuccess;
  }

  ncclResult_t element(XmlElement* el, int depth) {
    if (depth > kMaxDepth) return error("elements nested too deeply");
    el->line = line_;
    advance();  // '<'
    CHORUS_CHECK(name(&el->name));
    for (;;) {
      skipSpace();
      if (atEnd()) return error("unexpected end of file inside a tag");
      if (startsWith("/>")) {
        advance(2);
        return ncclSuccess;
      }
      if (peek() == '>') {
        advance();
        break;
      }
      CHORUS_CHECK(attribute(el));
    }
    return content(el, depth);
  }

  ncclResult_t content(XmlElement* el, int depth) {
    for (;;) {
      while (!atEnd() && peek() != '<') advance();  // text is ignored
      if (atEnd())
        return fail(ncclInvalidUsage, "%s:%d: malformed topology XML: <%s> opened on line %d is never closed",
                    source_.c_str(), line_, el->name.c_str(), el->line);
      if (startsWith("<!--") || startsWith("<?") || startsWith("<!")) {
        CHORUS_CHECK(skipMisc());
        continue;
      }
      if (startsWith("</")) {
        advance(2);
        std::string closing;
        CHORUS_CHECK(name(&closing));
        skipSpace();
        if (atEnd() || peek() != '>') return error("expected '>' in closing tag");
        advance();
        if (closing != el->name) return error("closing tag does not match the open element");
        return ncclSuccess;
      }
      el->children.emplace_back();
      CHORUS_CHECK(element(&el->children.back(), depth + 1));
    }
  }

  const std::string& text_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

void writeElement(const XmlElement& el, int depth, std::string* out) {
  out->append(2 * depth, ' ');
  *out += "<" + el.name;
  for (const auto& kv : el.attrs) *out += " " + kv.first + "=\"" + escape(kv.second) + "\"";
  if (el.children.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const XmlElement& c : el.children) writeElement(c, depth + 1, out);
  out->append(2 * depth, ' ');
  *out += "</" + el.name + ">\n";
}

}  // namespace

ncclResult_t parseXml(const std::string& text, const std::string& source, XmlElement* root) {
  *root = XmlElement{};
  Parser parser(text, source);
  return parser.document(root);
}

std::string writeXml(const XmlElement& root) {
  std::string out;
  writeElement(root, 0, &out);
  return out;
}

}  // namespace chorus::topo
