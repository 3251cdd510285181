// SPDX-License-Identifier: Apache-2.0
// Reader of TimeKiller JSON histories (see timekiller.h).
//
// The history document is read in chunks by internal::ChunkedJsonArray, and each transaction
// object is parsed on its own, straight from the chunk buffer. A transaction of the usual shape
// (see internal::ParseUsualTxn) is read by a dedicated parser that also finds where it
// ends; any other, and any error, is left to the general parser: the array splitter delimits the
// element and simdjson's On-Demand API reads it. Both give the same result for what the dedicated
// parser accepts. A transaction's operations are collected in reusable vectors (its members may
// come in any order, so "ops" may precede "tid") and then handed to the HistoryBuilder.
//
// A large file is read by two threads: one splits and parses the transactions into batches, the
// other gives them to the builder (TimeKillerParser::ReadHistoryPipelined). A pipelined read
// that fails, for whatever reason, is not reported: the file is read again by one thread, which
// finds the error again and says where it is. So errors, their positions and the history are
// those of the one-thread read.
//
// Semantics, beyond the format described in timekiller.h:
//  - "tid" and "sid" may be numbers (integers) or strings; 67 and "67" name the same id. The
//    numeric flag is kept so the writer emits numbers as numbers.
//  - "sts"/"cts" are {"p": P, "l": L}; each part is an int64 number or a decimal string; a missing
//    "l" is 0; extra members are ignored.
//  - Op types are compared case-insensitively: w/write, r/read, a/append.
//  - A read with "v": null (or without "v") is recorded as a read of the absent value. It stays
//    absent even when ReadOptions::initial_value is set (0 included): that value becomes the
//    history's default initial value, and checkers compare absent reads against it. For a list
//    key, the builder turns such a read into a read of the empty list; a key only ever read that
//    way counts as a list when every other key of the history is a list (it then gets an empty
//    initial list).
//  - A write with "v": null is accepted (the reference checker accepts it) and recorded as a
//    write of the absent value.
//  - A key is either a register (written, or read with a scalar) or a list (appended to, or read
//    with an array) for the whole history, the initial transaction included.
//  - All transactions are committed; the file order of a session's transactions is its session
//    order.
//
// The parts: internal/timekiller_parser.{h,cc} (the array, the builder and the initial
// transaction), internal/timekiller_usual_txn.{h,cc} (the parser of usual transactions),
// internal/timekiller_txn_ondemand.cc (the general parser) and internal/timekiller_text.{h,cc}
// (checks of text and messages). This file holds the entry points.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/functional/function_ref.h"
#include <fmt/format.h>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/internal/chunked_json_array.h"
#include "isowatch/formats/internal/timekiller_internal.h"
#include "isowatch/formats/internal/timekiller_parser.h"
#include "isowatch/formats/timekiller.h"
#include "isowatch/history/history_builder.h"

namespace isowatch::formats {
namespace {

using history::HistoryBuilder;
using history::Value;
using internal::ByteSource;
using internal::FileSource;
using internal::MemorySource;

// The initial-transaction document, padded for simdjson, with the name used in messages.
struct InitialDoc {
  std::string padded;  // the document followed by SIMDJSON_PADDING spaces
  size_t size = 0;
  std::string name;
};

InitialDoc MakeInitialDoc(std::string_view json, std::string name) {
  InitialDoc doc;
  doc.padded.reserve(json.size() + internal::kSimdjsonPadding);
  doc.padded.append(json);
  doc.padded.append(internal::kSimdjsonPadding, ' ');
  doc.size = json.size();
  doc.name = std::move(name);
  return doc;
}

absl::StatusOr<InitialDoc> LoadInitialDoc(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<internal::FileSource> file, internal::FileSource::Open(path));
  InitialDoc doc;
  doc.name = path;
  doc.padded.resize(static_cast<size_t>(file->SizeHint().value_or(0)) + internal::kSimdjsonPadding);
  while (true) {
    if (doc.padded.size() - doc.size < internal::kSimdjsonPadding + 4096) {
      doc.padded.resize(doc.padded.size() * 2 + 4096);
    }
    ASSIGN_OR_RETURN(size_t got,
                     file->Read(doc.padded.data() + doc.size,
                                doc.padded.size() - internal::kSimdjsonPadding - doc.size));
    if (got == 0) break;
    doc.size += got;
  }
  doc.padded.resize(doc.size);
  doc.padded.append(internal::kSimdjsonPadding, ' ');
  return doc;
}

// One read of the history from `source`, pipelined or not; a pipelined read that fails returns
// Aborted, to be read again without the pipeline.
absl::StatusOr<history::History> ReadOnce(internal::ByteSource* source,
                                          const std::string& source_name,
                                          const ReadOptions& options, const InitialDoc* initial,
                                          size_t chunk_size, internal::TxnParsers parsers,
                                          bool pipelined) {
  HistoryBuilder builder;
  builder.set_source(source_name);
  builder.set_format("timekiller");
  if (options.initial_value) builder.SetDefaultInitialValue(Value::Int(*options.initial_value));
  internal::TimeKillerParser parser(&builder, parsers);
  if (initial != nullptr) {
    RETURN_IF_ERROR(
        parser.ReadInitial(std::string_view(initial->padded.data(), initial->size), initial->name));
  }
  if (!pipelined) {
    RETURN_IF_ERROR(parser.ReadHistory(source, source_name, chunk_size));
  } else if (!parser.ReadHistoryPipelined(source, source_name, chunk_size)) {
    return absl::AbortedError("the pipelined read failed");
  }
  parser.MarkUndecidedKeysAsLists();
  absl::StatusOr<history::History> h = std::move(builder).Finish();
  if (!h.ok()) {
    if (pipelined) return absl::AbortedError("the pipelined read failed");
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", source_name, std::string(h.status().message())));
  }
  return h;
}

// Reads the history from the source `open` gives; the source is opened a second time when a
// pipelined read fails.
absl::StatusOr<history::History> ReadTimeKiller(
    absl::FunctionRef<absl::StatusOr<std::unique_ptr<internal::ByteSource>>()> open,
    const std::string& source_name, const ReadOptions& options, const InitialDoc* initial,
    size_t chunk_size, internal::TxnParsers parsers, internal::Pipelining pipelining) {
  ASSIGN_OR_RETURN(std::unique_ptr<internal::ByteSource> source, open());
  const bool pipelined = pipelining == internal::Pipelining::kAlways ||
                         pipelining == internal::Pipelining::kNoRetry ||
                         (pipelining == internal::Pipelining::kAuto &&
                          source->SizeHint().value_or(0) >= internal::kPipelineMinBytes &&
                          std::thread::hardware_concurrency() >= 2);
  if (pipelined) {
    absl::StatusOr<history::History> h =
        ReadOnce(source.get(), source_name, options, initial, chunk_size, parsers, true);
    if (h.ok() || pipelining == internal::Pipelining::kNoRetry) return h;
    ASSIGN_OR_RETURN(source, open());
  }
  return ReadOnce(source.get(), source_name, options, initial, chunk_size, parsers, false);
}

}  // namespace

namespace internal {

absl::StatusOr<history::History> ReadTimeKillerStringChunked(std::string_view json,
                                                             const ReadOptions& options,
                                                             std::string_view source,
                                                             std::string_view initial_txn_json,
                                                             size_t chunk_size, TxnParsers parsers,
                                                             Pipelining pipelining) {
  std::optional<InitialDoc> initial;
  if (!initial_txn_json.empty()) {
    initial = MakeInitialDoc(initial_txn_json, fmt::format("{} (initial transaction)", source));
  } else if (!options.initial_txn_path.empty()) {
    ASSIGN_OR_RETURN(initial, LoadInitialDoc(options.initial_txn_path));
  }
  auto open = [json]() -> absl::StatusOr<std::unique_ptr<ByteSource>> {
    return std::make_unique<MemorySource>(json);
  };
  return ReadTimeKiller(open, std::string(source), options, initial ? &*initial : nullptr,
                        chunk_size, parsers, pipelining);
}

absl::StatusOr<history::History> ReadTimeKillerFileChunked(const std::string& path,
                                                           const ReadOptions& options,
                                                           size_t chunk_size, TxnParsers parsers,
                                                           Pipelining pipelining,
                                                           internal::FileMapping mapping) {
  std::optional<InitialDoc> initial;
  if (!options.initial_txn_path.empty()) {
    ASSIGN_OR_RETURN(initial, LoadInitialDoc(options.initial_txn_path));
  }
  auto open = [&path, mapping]() -> absl::StatusOr<std::unique_ptr<ByteSource>> {
    return FileSource::Open(path, mapping);
  };
  return ReadTimeKiller(open, path, options, initial ? &*initial : nullptr, chunk_size, parsers,
                        pipelining);
}

}  // namespace internal

absl::StatusOr<history::History> ReadTimeKillerFile(const std::string& path,
                                                    const ReadOptions& options) {
  return internal::ReadTimeKillerFileChunked(path, options,
                                             internal::ChunkedJsonArray::kDefaultChunkSize);
}

absl::StatusOr<history::History> ReadTimeKillerString(std::string_view json,
                                                      const ReadOptions& options,
                                                      std::string_view source,
                                                      std::string_view initial_txn_json) {
  return internal::ReadTimeKillerStringChunked(json, options, source, initial_txn_json,
                                               internal::ChunkedJsonArray::kDefaultChunkSize);
}

}  // namespace isowatch::formats
