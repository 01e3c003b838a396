// FairShare (actors/fair_share.hpp).
#include "actors/fair_share.hpp"

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>

namespace pagoda::actors {

FairShare::FairShare(FairShareConfig config) : config_(std::move(config)) {}

FairShare::Client& FairShare::at(const std::string& client) { return clients_[client]; }

double FairShare::weight(const std::string& client) const {
  auto it = config_.client_weights.find(client);
  return it == config_.client_weights.end() || !(it->second > 0.0) ? 1.0 : it->second;
}

void FairShare::start(const std::string& client) { at(client).requests++; }

void FairShare::finish(const std::string& client) {
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  if (it->second.requests > 0) it->second.requests--;
  maybe_forget(client);
}

// An idle client whose counter the lift would raise anyway carries nothing
// worth keeping.
void FairShare::maybe_forget(const std::string& client) {
  auto it = clients_.find(client);
  if (it == clients_.end() || it->second.requests > 0 || it->second.queued > 0) return;
  const bool crowded = clients_.size() > config_.max_idle_clients;
  const double level = it->second.counter + it->second.credit;
  if (!crowded && level > lift_floor(client)) return;
  if (client == last_left_) last_left_counter_ = level;
  clients_.erase(it);
}

double FairShare::min_backlogged() const {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [name, c] : clients_) {
    if (c.queued > 0) best = std::min(best, c.counter);
  }
  return best == std::numeric_limits<double>::infinity() ? 0.0 : best;
}

// What a client that becomes backlogged now is lifted to (less its
// credit): the lowest level of the other backlogged clients, else the level
// of the client that left the queue last.
double FairShare::lift_floor(const std::string& except) const {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [name, c] : clients_) {
    if (c.queued > 0 && name != except) best = std::min(best, c.counter + c.credit);
  }
  if (best != std::numeric_limits<double>::infinity()) return best;
  if (last_left_.empty() || last_left_ == except) return last_left_.empty() ? 0.0 : last_left_counter_;
  auto it = clients_.find(last_left_);
  return it == clients_.end() ? last_left_counter_ : it->second.counter + it->second.credit;
}

// The lift: counter := max(counter, F - credit); the level (counter plus
// the credit left) is then max(counter, F), as under the plain lift.
void FairShare::arrive(const std::string& client, bool lift, double credit) {
  Client& c = at(client);
  if (c.queued == 0 && lift) {
    const double floor = lift_floor(client);
    c.counter = std::max(c.counter, floor - std::max(0.0, credit));
    c.credit = std::max(0.0, floor - c.counter);
  }
  c.queued++;
}

void FairShare::leave(const std::string& client) {
  auto it = clients_.find(client);
  if (it == clients_.end() || it->second.queued == 0) return;
  if (--it->second.queued == 0) {
    last_left_ = client;
    last_left_counter_ = it->second.counter + it->second.credit;
  }
}

// Adds to the counter; the credit is used up first (the level grows only
// by what exceeds it).
void FairShare::charge(const std::string& client, double amount) {
  Client& c = at(client);
  c.counter += amount;
  c.credit = std::max(0.0, c.credit - amount);
}

double FairShare::prompt_cost(const std::string& client, int64_t tokens) const {
  return config_.prompt_weight * double(tokens) / weight(client);
}

void FairShare::charge_prompt(const std::string& client, int64_t tokens) {
  charge(client, prompt_cost(client, tokens));
}

void FairShare::charge_output(const std::string& client, int64_t tokens) {
  charge(client, config_.output_weight * double(tokens) / weight(client));
}

double FairShare::counter(const std::string& client) const {
  auto it = clients_.find(client);
  return it == clients_.end() ? 0.0 : it->second.counter;
}

double FairShare::level(const std::string& client) const {
  auto it = clients_.find(client);
  return it == clients_.end() ? 0.0 : it->second.counter + it->second.credit;
}

int32_t FairShare::queued(const std::string& client) const {
  auto it = clients_.find(client);
  return it == clients_.end() ? 0 : it->second.queued;
}

int32_t FairShare::running(const std::string& client) const {
  auto it = clients_.find(client);
  return it == clients_.end() ? 0 : std::max(0, it->second.requests - it->second.queued);
}

std::vector<size_t> FairShare::order(const std::vector<Candidate>& queue, size_t limit) const {
  // Per client, its requests in queue order; a min-heap of (tentative
  // counter, requests running, head position, client slot). On equal counters
  // the client with fewer requests running goes first: a client lifted from
  // idle to the flooding client's counter ties with it, and the flood, which
  // is being served already, should not win that tie by its older head.
  std::unordered_map<std::string_view, size_t> slot;
  std::vector<std::vector<size_t>> lists;
  for (size_t i = 0; i < queue.size(); ++i) {
    auto [it, fresh] = slot.try_emplace(*queue[i].client, lists.size());
    if (fresh) lists.emplace_back();
    lists[it->second].push_back(i);
  }
  using Head = std::tuple<double, int32_t, size_t, size_t>;
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heap;
  std::vector<double> tentative(lists.size());
  std::vector<int32_t> in_flight(lists.size());
  std::vector<size_t> next(lists.size(), 0);
  for (size_t k = 0; k < lists.size(); ++k) {
    tentative[k] = counter(*queue[lists[k][0]].client);
    in_flight[k] = running(*queue[lists[k][0]].client);
    heap.push({tentative[k], in_flight[k], lists[k][0], k});
  }
  std::vector<size_t> out;
  while (!heap.empty() && out.size() < limit) {
    const size_t k = std::get<3>(heap.top());
    heap.pop();
    const Candidate& c = queue[lists[k][next[k]]];
    out.push_back(lists[k][next[k]]);
    if (!c.charged) tentative[k] += prompt_cost(*c.client, c.prompt_tokens);
    ++in_flight[k];  // the request just ordered would run before the next one
    if (++next[k] < lists[k].size()) heap.push({tentative[k], in_flight[k], lists[k][next[k]], k});
  }
  return out;
}

}  // namespace pagoda::actors
