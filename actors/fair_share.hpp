// FairShare: the Virtual Token Counter (VTC) of "Fairness in Serving Large
// Language Models" (Sheng et al., OSDI 2024) as a plain C++ class; the
// scheduler core keeps one and asks it in which order to admit waiting
// requests (SchedulingPolicy::fair).
//
// Every client (a string key: the request's `user`, else its address) has a
// counter of the weighted service it received:
//   - charge_prompt(c, n) adds prompt_weight * n / weight(c) (a request's
//     prompt, once, when it is first admitted);
//   - charge_output(c, n) adds output_weight * n / weight(c) (generated
//     tokens, as they are sampled).
// weight(c) is the client's share (client_weights, default 1): a client of
// weight 2 gets twice the tokens of one of weight 1 while both are waiting.
// A client is backlogged while it has requests in the waiting queue
// (arrive() / leave() count them). When a client becomes backlogged its
// counter is lifted to max(counter, F - credit), F the lowest level of the
// other backlogged clients or, with none backlogged, the level of the client
// that left the queue last: an idle client banks no credit beyond `credit`.
// The scheduler passes as credit the prompt cost of the arriving request
// (FairShareConfig::prompt_credit), so that a returning client stands at F
// once its head request's prompt is charged, not F plus that prompt: without
// it, a light client whose requests overlap (it is rarely idle, only not
// backlogged) is lifted to the flood's counter at every arrival, charged its
// prompt on admission, and then waits behind the flood until the flood's
// output catches up (measured: 8-48 steps for a third of its requests).
// A client's level is its counter plus the credit it has not yet used
// (charges use it up first); floors are levels, so lifts never chain below
// F: a client lifted from a credited one is lifted to that one's F.
// Admission takes the head request of the backlogged client with the lowest
// counter (order()); ties go to the client with fewer requests running,
// then to the client whose head came first.
//
// Bound (the property test checks it over random sequences): with every
// prompt at most L tokens and at most M tokens generated between two
// admissions, two backlogged clients' counters differ by at most
// (prompt_weight * L + output_weight * M) / min weight, plus the largest
// credit (prompt_weight * L / min weight) when lifts carry one.
//
// Memory: a client with no request left (finish() balanced every start())
// whose counter is at or below the lift floor is forgotten, as the lift would
// give it that floor anyway; with more than max_idle_clients entries a client
// that goes idle is forgotten whatever its counter (lossy, bounded memory).
// Not thread-safe: one owner (the scheduler core).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace pagoda::actors {

struct FairShareConfig {
  double prompt_weight = 1.0;  // per prompt token (the paper's w_p)
  double output_weight = 2.0;  // per generated token (the paper's w_q)
  std::unordered_map<std::string, double> client_weights;  // > 0; absent: 1
  size_t max_idle_clients = 4096;
  // The scheduler lifts a returning client with its head request's prompt
  // cost as credit (see above); false: the plain lift.
  bool prompt_credit = true;
};

class FairShare {
 public:
  explicit FairShare(FairShareConfig config = {});

  // Requests of `client` known to the scheduler (waiting or running): start()
  // when one is added, finish() when it ends. Only used to forget idle ones.
  void start(const std::string& client);
  void finish(const std::string& client);
  // One request of `client` joins (arrive) or leaves (leave) the waiting
  // queue. arrive() on a client with none queued applies the lift (to the
  // floor less `credit`, credit >= 0), unless !lift (a preempted request
  // going back: its client was being served, not idle).
  void arrive(const std::string& client, bool lift = true, double credit = 0.0);
  void leave(const std::string& client);

  void charge_prompt(const std::string& client, int64_t tokens);
  void charge_output(const std::string& client, int64_t tokens);
  // What charge_prompt(client, tokens) would add.
  double prompt_cost(const std::string& client, int64_t tokens) const;

  double counter(const std::string& client) const;  // 0 when unknown
  // counter + the lift's credit not yet used up by charges (0 when unknown).
  double level(const std::string& client) const;
  int32_t queued(const std::string& client) const;
  // Requests of `client` started and not queued (running, or between queue
  // and batch): start() count less queued(), never below 0.
  int32_t running(const std::string& client) const;
  bool backlogged(const std::string& client) const { return queued(client) > 0; }
  double weight(const std::string& client) const;
  // The lowest counter of the backlogged clients (0 with none).
  double min_backlogged() const;
  size_t num_clients() const { return clients_.size(); }
  const FairShareConfig& config() const { return config_; }

  // One waiting request, in queue (FCFS) order.
  struct Candidate {
    const std::string* client = nullptr;
    int64_t prompt_tokens = 0;  // its tentative charge when picked
    bool charged = false;       // already charged (a preempted request): no tentative charge
  };
  // The admission order of `queue` (indices), at most `limit` of them: again
  // and again the first queued request of the client with the lowest counter,
  // that client's counter tentatively charged with the request's prompt.
  // Counters are not changed. O(n log n).
  std::vector<size_t> order(const std::vector<Candidate>& queue, size_t limit) const;

 private:
  struct Client {
    double counter = 0.0;
    double credit = 0.0;  // of the last lift, not yet used up by charges
    int32_t queued = 0;
    int32_t requests = 0;
  };
  Client& at(const std::string& client);
  double lift_floor(const std::string& except) const;
  void maybe_forget(const std::string& client);
  void charge(const std::string& client, double amount);

  FairShareConfig config_;
  std::unordered_map<std::string, Client> clients_;
  std::string last_left_;
  double last_left_counter_ = 0.0;  // its level when it left (kept when it is forgotten)
};

}  // namespace pagoda::actors
