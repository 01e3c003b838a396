#include "actors/request_intake.hpp"

#include <utility>

#include "actors/messages.hpp"

namespace pagoda::actors {

void RequestHandle::cancel() {
  if (!scheduler_) return;
  auto strong = caf::actor_cast<caf::actor>(*static_cast<caf::actor_addr*>(scheduler_.get()));
  // Normal priority: FIFO behind the request's own spawn message (a high
  // priority abort could overtake it and find no request to cancel).
  if (strong) caf::anon_send(strong, abort_atom::value, id_);
}

void RequestIntake::open(caf::actor target) {
  std::lock_guard<std::mutex> lock(mu_);
  target_ = std::move(target);
}

void RequestIntake::close() {
  std::lock_guard<std::mutex> lock(mu_);
  target_ = nullptr;
}

RequestHandle RequestIntake::submit(GenerateRequest request, std::shared_ptr<RequestSink> sink) {
  RequestHandle h;
  h.id_ = next_id_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!request.sampling.seed) request.sampling.seed = seeds_();
    if (target_) {
      // The handle keeps only the address: it never keeps the target alive.
      h.scheduler_ = std::make_shared<caf::actor_addr>(target_.address());
      caf::anon_send(target_, spawn_atom::value, SpawnRequest{h.id_, std::move(request), sink});
      return h;
    }
  }
  sink->on_error("the engine is shut down");
  return h;
}

}  // namespace pagoda::actors
