// KvStream: the `kv` subscription of one /v1/ws connection
// (docs/protocol.md, "kv_subscribe"). The WsChannel contract has no timer,
// so a subscription owns one small thread that, until stopped:
//   - sends a `kv` frame at once, then at most one per `interval`;
//   - skips a frame (never queues it) while channel->queued_bytes() is over
//     `max_queued` (a slow reader gets fewer frames, not more memory);
//   - stops by itself when send_text fails (the socket is gone).
// The engine's snapshot is read with Engine::kv_snapshot() (never blocks on
// actors); `mine` maps this socket's engine request ids to client ids.
//
// Ownership and threads: the owner (the protocol handler, on the session
// strand) creates and destroys it. stop() / the destructor wake the thread
// and join it; the wait is bounded by one frame's build (the thread never
// blocks on the strand: send_text only posts). Called on the stream's own
// thread (its send_text released the session's last reference), stop()
// detaches the thread instead, which then ends without sending.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "actors/engine.hpp"
#include "net/ws_channel.hpp"

namespace pagoda::net {

// (engine request id, client id) pairs of this socket's open requests.
using KvOwnerIds = std::vector<std::pair<uint64_t, std::string>>;

// The `kv` frame of one snapshot (pure; docs/protocol.md, "kv"). Only the
// requests in `mine` are identified: ref/owners/seqs cover this socket's
// sequences; other clients' blocks appear as anonymous 'u' (in use) and
// their sequences only as the count `others`.
std::string kv_frame(const actors::KvSnapshot& snapshot, const actors::EngineStats& stats, uint64_t seq,
                     const KvOwnerIds& mine);

class KvStream {
 public:
  struct Options {
    std::chrono::milliseconds interval{250};
    size_t max_queued = size_t(2) << 20;
  };
  // engine and channel must be non-null; `mine` is called on the stream's
  // thread and must be thread-safe.
  KvStream(std::shared_ptr<actors::EngineClient> engine, std::shared_ptr<WsChannel> channel, Options options,
           std::function<KvOwnerIds()> mine);
  ~KvStream();  // = stop()
  KvStream(const KvStream&) = delete;
  KvStream& operator=(const KvStream&) = delete;

  // Idempotent: no frame is sent after it returns.
  void stop();

 private:
  // What the thread uses; shared so that a stop() from the stream's own
  // thread (a session destroyed there) can detach it safely.
  struct State {
    std::shared_ptr<actors::EngineClient> engine;
    std::shared_ptr<WsChannel> channel;
    Options options;
    std::function<KvOwnerIds()> mine;
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
  };
  static void run(const std::shared_ptr<State>& state);
  static bool send_one(State& state, uint64_t& seq);  // false: the channel refused (socket gone)

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace pagoda::net
