#include "core/table.h"

#include <algorithm>

#include "core/status.h"

namespace hydrozoa {

namespace {
// Display width: counts UTF-8 code points, not bytes ("×" is one column).
size_t width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
}  // namespace

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> rightAligned)
    : header_(std::move(header)), right_(std::move(rightAligned)) {
  HZ_CHECK(header_.size() == right_.size());
}

void TextTable::addRow(std::vector<std::string> cells) {
  HZ_CHECK(cells.size() == header_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::render(const std::string& indent) const {
  std::vector<size_t> w(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) {
    w[c] = width(header_[c]);
    for (const auto& r : rows_) w[c] = std::max(w[c], width(r[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(w[c] - width(cells[c]), ' ');
      s += right_[c] ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
      if (c + 1 < cells.size()) s += "  ";
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(header_);
  std::vector<std::string> rule;
  for (size_t c = 0; c < w.size(); ++c) rule.push_back(std::string(w[c], '-'));
  out += line(rule);
  for (const auto& r : rows_) out += line(r);
  return out;
}

}  // namespace hydrozoa
