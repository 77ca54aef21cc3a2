#pragma once
// Micro-batching across concurrent callers, with no thread of its own and no added wait:
// a caller whose item arrives while `concurrency` batches are being computed queues it, and
// whichever waiting caller finds a batch free computes the queued items (up to max_batch,
// oldest first) in one call for all of them. A caller alone is computed at once, in a batch
// of one; under load the batches grow by themselves. Used by the dense retriever to encode the
// queries of concurrent requests in one forward pass (attune serve).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

namespace attune {

template <typename In, typename Out>
class MicroBatcher {
 public:
  // fn maps a batch of inputs to one output each, in order; at most `concurrency` calls of it
  // run at once (each on its own batch). An exception it throws reaches every caller of that
  // batch.
  using Fn = std::function<std::vector<Out>(std::span<const In>)>;
  MicroBatcher(Fn fn, std::size_t max_batch, std::size_t concurrency = 1)
      : fn_(std::move(fn)), max_batch_(max_batch ? max_batch : 1), concurrency_(concurrency ? concurrency : 1) {}

  Out run(In in) {
    Pending p(std::move(in));
    std::unique_lock lock(mu_);
    queue_.push_back(&p);
    while (!p.done) {
      if (busy_ >= concurrency_ || queue_.empty()) {
        cv_.wait(lock);
        continue;
      }
      ++busy_;  // this caller computes the next batch (its own item may be in a later one)
      std::vector<Pending*> batch;
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
      lock.unlock();
      std::vector<In> inputs;
      inputs.reserve(batch.size());
      for (auto* b : batch) inputs.push_back(std::move(b->in));
      std::vector<Out> outs;
      std::exception_ptr err;
      try {
        outs = fn_(std::span<const In>(inputs));
        if (outs.size() != batch.size()) throw std::logic_error("MicroBatcher: the batch function returned a wrong count");
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (err) batch[i]->err = err;
        else batch[i]->out = std::move(outs[i]);
        batch[i]->done = true;
      }
      ++batches_;
      items_ += batch.size();
      --busy_;
      cv_.notify_all();
    }
    if (p.err) std::rethrow_exception(p.err);
    return std::move(p.out);
  }

  struct Stats {
    std::uint64_t batches = 0, items = 0;
  };
  Stats stats() const {
    std::lock_guard lock(mu_);
    return {batches_, items_};
  }
  std::size_t max_batch() const { return max_batch_; }

 private:
  struct Pending {
    explicit Pending(In i) : in(std::move(i)) {}
    In in;
    Out out{};
    bool done = false;
    std::exception_ptr err;
  };
  Fn fn_;
  std::size_t max_batch_, concurrency_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending*> queue_;
  std::size_t busy_ = 0;
  std::uint64_t batches_ = 0, items_ = 0;
};

}  // namespace attune
