// SPDX-License-Identifier: Apache-2.0
#include "collectors/postgres/pgoutput_assembler.h"

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "isowatch/common/status_macros.h"

namespace isowatch::pg {
namespace {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
// Clang before 17 does not deduce aggregate template arguments by itself.
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace

absl::StatusOr<std::optional<DecodedTxn>> PgoutputAssembler::Feed(std::string_view message) {
  absl::StatusOr<PgoutputMessage> decoded = ParsePgoutputMessage(message);
  if (!decoded.ok()) {
    open_.reset();
    return decoded.status();
  }
  return Apply(*std::move(decoded));
}

absl::StatusOr<std::optional<DecodedTxn>> PgoutputAssembler::Apply(PgoutputMessage message) {
  absl::StatusOr<std::optional<DecodedTxn>> result = ApplyOrError(message);
  if (!result.ok()) open_.reset();
  return result;
}

const PgRelation* PgoutputAssembler::relation(uint32_t oid) const {
  auto it = relations_.find(oid);
  return it == relations_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::optional<DecodedTxn>> PgoutputAssembler::ApplyOrError(
    PgoutputMessage& message) {
  using Result = absl::StatusOr<std::optional<DecodedTxn>>;
  const auto outside = [](std::string_view what) {
    return absl::InvalidArgumentError(
        fmt::format("pgoutput: {} outside a transaction (no Begin before it)", what));
  };
  return std::visit(
      Overloaded{
          [&](PgBegin& m) -> Result {
            if (open_.has_value()) {
              return absl::InvalidArgumentError(fmt::format(
                  "pgoutput: Begin of xid {} inside the transaction of xid {}", m.xid, open_->xid));
            }
            open_.emplace();
            open_->xid = m.xid;
            open_->commit_lsn = m.final_lsn;
            open_->commit_time_us = m.commit_time_us;
            return std::nullopt;
          },
          [&](PgCommit& m) -> Result {
            if (!open_.has_value()) return outside("Commit");
            if (m.commit_lsn != open_->commit_lsn) {
              return absl::InvalidArgumentError(fmt::format(
                  "pgoutput: Commit LSN {} of xid {} is not the final LSN {} of its Begin",
                  LsnToString(m.commit_lsn), open_->xid, LsnToString(open_->commit_lsn)));
            }
            if (m.end_lsn < m.commit_lsn) {
              return absl::InvalidArgumentError(
                  fmt::format("pgoutput: Commit of xid {} ends at {}, before it starts at {}",
                              open_->xid, LsnToString(m.end_lsn), LsnToString(m.commit_lsn)));
            }
            open_->end_lsn = m.end_lsn;
            open_->commit_time_us = m.commit_time_us;
            std::optional<DecodedTxn> done = std::move(open_);
            open_.reset();
            return done;
          },
          [&](PgRelation& m) -> Result {
            const uint32_t oid = m.oid;
            relations_.insert_or_assign(oid, std::move(m));
            return std::nullopt;
          },
          [&](PgInsert& m) -> Result {
            RETURN_IF_ERROR(AddChange(DecodedChange::Kind::kInsert, m.relation_oid, m.new_tuple));
            return std::nullopt;
          },
          [&](PgUpdate& m) -> Result {
            RETURN_IF_ERROR(AddChange(DecodedChange::Kind::kUpdate, m.relation_oid, m.new_tuple));
            return std::nullopt;
          },
          [&](PgDelete& m) -> Result {
            RETURN_IF_ERROR(AddChange(DecodedChange::Kind::kDelete, m.relation_oid, m.old_tuple));
            return std::nullopt;
          },
          [&](PgLogicalMessage& m) -> Result {
            if (!m.transactional) return std::nullopt;
            if (!open_.has_value()) return outside("transactional Message");
            open_->messages.push_back({std::move(m.prefix), std::move(m.content)});
            return std::nullopt;
          },
          [&](PgTruncate&) -> Result {
            ++truncates_ignored_;
            return std::nullopt;
          },
          [&](PgOrigin&) -> Result { return std::nullopt; },
          [&](PgType&) -> Result { return std::nullopt; },
      },
      message);
}

absl::Status PgoutputAssembler::AddChange(DecodedChange::Kind kind, uint32_t relation_oid,
                                          const PgTuple& tuple) {
  if (!open_.has_value()) {
    return absl::InvalidArgumentError(
        fmt::format("pgoutput: change of relation {} outside a transaction (no Begin before it)",
                    relation_oid));
  }
  const PgRelation* rel = relation(relation_oid);
  if (rel == nullptr) {
    return absl::InvalidArgumentError(fmt::format(
        "pgoutput: change of relation {}, which no Relation message described", relation_oid));
  }
  if (tuple.size() != rel->columns.size()) {
    return absl::InvalidArgumentError(
        fmt::format("pgoutput: change of {}.{} with {} columns; its Relation has {}", rel->schema,
                    rel->name, tuple.size(), rel->columns.size()));
  }
  DecodedChange change;
  change.kind = kind;
  change.schema = rel->schema;
  change.table = rel->name;
  change.column_names.reserve(rel->columns.size());
  change.values.reserve(tuple.size());
  for (size_t i = 0; i < tuple.size(); ++i) {
    change.column_names.push_back(rel->columns[i].name);
    switch (tuple[i].kind) {
      case PgColumnValue::Kind::kText:
        change.values.emplace_back(tuple[i].data);
        break;
      case PgColumnValue::Kind::kNull:
      case PgColumnValue::Kind::kUnchangedToast:
        change.values.emplace_back(std::nullopt);
        break;
      case PgColumnValue::Kind::kBinary:
        return absl::InvalidArgumentError(
            fmt::format("pgoutput: binary value in column {} of {}.{}; only text is supported",
                        rel->columns[i].name, rel->schema, rel->name));
    }
  }
  open_->changes.push_back(std::move(change));
  return absl::OkStatus();
}

}  // namespace isowatch::pg
