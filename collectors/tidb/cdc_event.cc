// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/cdc_event.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace isowatch::tidb {
namespace {

// Appends `text` with its length in front, so that no two sequences of fields share an
// encoding.
void AppendField(std::string_view text, std::string& out) {
  const uint64_t size = text.size();
  for (int shift = 0; shift < 64; shift += 8) out.push_back(static_cast<char>(size >> shift));
  out.append(text);
}

void AppendColumns(const std::vector<Column>& columns, std::string& out) {
  std::vector<const Column*> sorted;
  sorted.reserve(columns.size());
  for (const Column& column : columns) sorted.push_back(&column);
  std::sort(sorted.begin(), sorted.end(),
            [](const Column* a, const Column* b) { return a->name < b->name; });
  AppendField(std::to_string(sorted.size()), out);
  for (const Column* column : sorted) {
    AppendField(column->name, out);
    out.push_back(column->value.has_value() ? 'v' : 'n');
    if (column->value.has_value()) AppendField(*column->value, out);
  }
}

}  // namespace

const char* RowOpName(RowOp op) {
  switch (op) {
    case RowOp::kInsert:
      return "INSERT";
    case RowOp::kUpdate:
      return "UPDATE";
    case RowOp::kDelete:
      return "DELETE";
  }
  return "?";
}

std::optional<RowOp> RowOpFromName(std::string_view name) {
  for (const RowOp op : {RowOp::kInsert, RowOp::kUpdate, RowOp::kDelete}) {
    const std::string_view full = RowOpName(op);
    if (name == full || name == full.substr(0, 1)) return op;
  }
  return std::nullopt;
}

const Column* RowChange::Find(const std::string& name) const {
  for (const Column& column : columns) {
    if (column.name == name) return &column;
  }
  return nullptr;
}

std::string RowFingerprint(const RowChange& row) {
  std::string out;
  AppendField(std::to_string(row.commit_ts), out);
  AppendField(row.schema, out);
  AppendField(row.table, out);
  out.push_back(static_cast<char>(row.op));
  AppendColumns(row.columns, out);
  AppendColumns(row.old_columns, out);
  return out;
}

}  // namespace isowatch::tidb
