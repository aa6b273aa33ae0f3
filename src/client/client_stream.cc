// ClientStream (include/uxds/client_channel.h): a streaming call on the
// endpoint the channel picked; a thin layer over the HTTP/2 call that also
// ends the call's A32 count and load report entry when the call ends.
#include "client/client_stream_impl.h"

namespace uxds {

ClientStream::ClientStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

// The HTTP/2 call cancels itself when destroyed unfinished.
ClientStream::~ClientStream() = default;

Task<Status> ClientStream::Write(std::string_view message) { return impl_->call->Write(message); }

Task<Status> ClientStream::WritesDone() { return impl_->call->WritesDone(); }

Task<std::optional<std::string>> ClientStream::Read() { return impl_->call->Read(); }

Task<Status> ClientStream::Finish() {
  Status status = co_await impl_->call->Finish();
  impl_->ReleaseCall(status.ok());
  co_return status;
}

void ClientStream::Cancel() {
  impl_->call->Cancel();
  impl_->ReleaseCall(false);
}

const std::string& ClientStream::peer() const { return impl_->peer; }

}  // namespace uxds
