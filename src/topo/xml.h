// A small XML reader and writer for topology files: elements, attributes,
// self-closing tags, comments and the <?xml ...?> declaration. Text content
// is ignored (topology files carry everything in attributes); entities are
// limited to the five predefined ones. Every element remembers its line so
// that errors can point at file:line.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nccl.h"

namespace chorus::topo {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // in file order
  std::vector<XmlElement> children;
  int line = 0;

  // nullptr if absent.
  const std::string* attr(const std::string& key) const;
  void set(const std::string& key, const std::string& value);
};

// Parses `text` (named `source` in messages) into its single root element.
ncclResult_t parseXml(const std::string& text, const std::string& source, XmlElement* root);
// Serializes with two-space indentation, one element per line.
std::string writeXml(const XmlElement& root);

}  // namespace chorus::topo
