// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/storage_csv.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"

namespace isowatch::tidb {
namespace {

struct Field {
  size_t column = 0;  // 1-based byte column in its line
  std::optional<std::string> value;
};

struct Record {
  size_t line = 0;  // 1-based
  std::vector<Field> fields;
};

absl::Status CsvError(size_t line, size_t column, std::string_view what) {
  return absl::InvalidArgumentError(
      fmt::format("storage csv: line {}, column {}: {}", line, column, what));
}

// Splits `content` into records. Tracks lines across quoted terminators.
class CsvScanner {
 public:
  CsvScanner(std::string_view content, const StorageCsvOptions& options)
      : content_(content), options_(options) {}

  // The next record, std::nullopt at the end.
  absl::StatusOr<std::optional<Record>> Next() {
    if (pos_ >= content_.size()) return std::nullopt;
    Record record;
    record.line = line_;
    if (AtTerminator()) return CsvError(line_, Column(), "an empty record");
    while (true) {
      ASSIGN_OR_RETURN(Field field, ReadField());
      record.fields.push_back(std::move(field));
      if (pos_ >= content_.size()) return record;
      if (AtTerminator()) {
        Advance(options_.terminator.size());
        return record;
      }
      Advance(1);  // the delimiter
    }
  }

 private:
  bool AtTerminator() const {
    return content_.substr(pos_, options_.terminator.size()) == options_.terminator;
  }
  size_t Column() const { return pos_ - line_start_ + 1; }
  void Advance(size_t n) {
    for (size_t end = pos_ + n; pos_ < end; ++pos_) {
      if (content_[pos_] == '\n') {
        ++line_;
        line_start_ = pos_ + 1;
      }
    }
  }

  absl::StatusOr<Field> ReadField() {
    Field field{Column(), std::nullopt};
    if (options_.quote != '\0' && pos_ < content_.size() && content_[pos_] == options_.quote) {
      const size_t open_line = line_;
      const size_t open_column = Column();
      Advance(1);
      std::string value;
      while (true) {
        if (pos_ >= content_.size()) {
          return CsvError(open_line, open_column, "a quoted value that is never closed");
        }
        if (content_[pos_] == options_.quote) {
          if (pos_ + 1 < content_.size() && content_[pos_ + 1] == options_.quote) {
            value.push_back(options_.quote);
            Advance(2);
            continue;
          }
          Advance(1);
          break;
        }
        value.push_back(content_[pos_]);
        Advance(1);
      }
      if (pos_ < content_.size() && content_[pos_] != options_.delimiter && !AtTerminator()) {
        return CsvError(line_, Column(), "text after a closing quote");
      }
      field.value = std::move(value);
      return field;
    }
    const size_t start = pos_;
    while (pos_ < content_.size() && content_[pos_] != options_.delimiter && !AtTerminator()) {
      if (options_.quote != '\0' && content_[pos_] == options_.quote) {
        return CsvError(line_, Column(), "a quote inside an unquoted value");
      }
      Advance(1);
    }
    const std::string_view text = content_.substr(start, pos_ - start);
    if (text != options_.null_text) field.value = std::string(text);
    return field;
  }

  std::string_view content_;
  const StorageCsvOptions& options_;
  size_t pos_ = 0;
  size_t line_ = 1;
  size_t line_start_ = 0;
};

absl::StatusOr<RowChange> DecodeRecord(Record& record, const StorageTableSchema& table,
                                       const StorageCsvOptions& options) {
  const size_t meta = 4 + (options.output_old_value ? 1 : 0);
  std::vector<Field>& fields = record.fields;
  auto error = [&](size_t index, std::string_view what) {
    return CsvError(record.line, index < fields.size() ? fields[index].column : 1, what);
  };
  if (fields.size() != meta + table.columns.size()) {
    return error(0, fmt::format("{} fields, expected {} ({} before the values and the {} "
                                "columns of {}.{})",
                                fields.size(), meta + table.columns.size(), meta,
                                table.columns.size(), table.schema, table.table));
  }
  for (size_t i = 0; i < meta; ++i) {
    if (!fields[i].value.has_value()) return error(i, "NULL where the record's header is");
  }
  const std::string& name = *fields[0].value;
  const std::optional<RowOp> op = name.size() == 1 ? RowOpFromName(name) : std::nullopt;
  if (!op.has_value()) return error(0, fmt::format("operation \"{}\" is not I, U or D", name));
  RowChange row;
  row.op = *op;
  row.table = *fields[1].value;
  row.schema = *fields[2].value;
  if (row.table != table.table || row.schema != table.schema) {
    return error(1, fmt::format("a row of {}.{} in a file of {}.{}", row.schema, row.table,
                                table.schema, table.table));
  }
  const std::string& ts = *fields[3].value;
  const auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), row.commit_ts);
  if (ts.empty() || ec != std::errc() || end != ts.data() + ts.size() || row.commit_ts == 0) {
    return error(3, fmt::format("commit ts \"{}\" is not a TSO", ts));
  }
  if (options.output_old_value) {
    const std::string& is_update = *fields[4].value;
    if (is_update != "true" && is_update != "false") {
      return error(4, fmt::format("is-update \"{}\" is not true or false", is_update));
    }
  }
  row.key_columns = table.KeyColumns();
  for (size_t i = 0; i < table.columns.size(); ++i) {
    row.columns.push_back(Column{table.columns[i].name, std::move(fields[meta + i].value)});
  }
  return row;
}

}  // namespace

absl::StatusOr<std::vector<RowChange>> DecodeStorageCsv(std::string_view content,
                                                        const StorageTableSchema& table,
                                                        const StorageCsvOptions& options) {
  if (!options.include_commit_ts) {
    return absl::FailedPreconditionError(
        "storage csv: files without the commit ts cannot be checked: set include-commit-ts = "
        "true in the changefeed's [sink.csv]");
  }
  if (options.terminator.empty() || options.delimiter == options.quote ||
      options.terminator.find(options.delimiter) != std::string::npos) {
    return absl::InvalidArgumentError("storage csv: the delimiter, quote and terminator overlap");
  }
  std::vector<RowChange> rows;
  CsvScanner scanner(content, options);
  while (true) {
    ASSIGN_OR_RETURN(std::optional<Record> record, scanner.Next());
    if (!record.has_value()) return rows;
    ASSIGN_OR_RETURN(RowChange row, DecodeRecord(*record, table, options));
    rows.push_back(std::move(row));
  }
}

}  // namespace isowatch::tidb
