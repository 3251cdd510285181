// SPDX-License-Identifier: Apache-2.0
#include "collectors/tidb/client_source.h"

#include <limits>
#include <utility>

#include "isowatch/common/status_macros.h"
#include "isowatch/formats/native.h"

namespace isowatch::tidb {
namespace {

void SetMetadata(history::DataModel data, v1::Header* header) {
  auto& m = *header->mutable_metadata();
  m["data_model"] = data == history::DataModel::kList ? "list" : "kv";
  m["source"] = "isowatch-tidb";
}

class ClientLogSource : public ClientSource {
 public:
  ClientLogSource(v1::Header header, std::vector<v1::Transaction> txns)
      : header_(std::move(header)), txns_(std::move(txns)) {}

  const v1::Header& header() const override { return header_; }
  bool live() const override { return false; }
  absl::Status Start(uint32_t /*run*/) override { return absl::OkStatus(); }
  absl::StatusOr<Polled> Poll() override {
    Polled p;
    p.txns = std::exchange(txns_, {});
    p.floor = std::numeric_limits<Tso>::max();
    p.done = true;
    return p;
  }
  void Stop() override {}

 private:
  v1::Header header_;
  std::vector<v1::Transaction> txns_;
};

}  // namespace

v1::Header CollectorHeader(history::DataModel data) {
  v1::Header h;
  h.set_version(formats::kNativeFormatVersion);
  (*h.mutable_metadata())["producer"] = "isowatch-tidb";
  SetMetadata(data, &h);
  return h;
}

absl::StatusOr<std::unique_ptr<ClientSource>> OpenClientLog(const std::string& path,
                                                            history::DataModel data) {
  ASSIGN_OR_RETURN(const history::History h, formats::ReadNativeFile(path, {}));
  v1::Header header;
  RETURN_IF_ERROR(formats::EncodeHeader(h, &header));
  SetMetadata(data, &header);
  std::vector<v1::Transaction> txns(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    RETURN_IF_ERROR(formats::EncodeTxn(h, TxnId(i), &txns[i]));
  }
  return std::make_unique<ClientLogSource>(std::move(header), std::move(txns));
}

}  // namespace isowatch::tidb
