// Plain-text tables for terminal output: columns sized to their widest cell,
// numbers right-aligned.
#pragma once

#include <string>
#include <vector>

namespace hydrozoa {

class TextTable {
 public:
  // `rightAligned[i]`: column i is right-aligned (numbers).
  TextTable(std::vector<std::string> header, std::vector<bool> rightAligned);

  void addRow(std::vector<std::string> cells);
  // Rows joined by '\n', each prefixed with `indent`; the header is underlined.
  std::string render(const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace hydrozoa
