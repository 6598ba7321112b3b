#include "troupe/tools/blocking_pool.hpp"

#include <pthread.h>

namespace troupe::tools {

blocking_pool::blocking_pool(std::size_t threads, std::size_t max_queued)
    : max_queued_(max_queued > 0 ? max_queued : 16 * std::max<std::size_t>(threads, 1)) {
  const auto count = std::max<std::size_t>(threads, 1);
  workers_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    workers_.emplace_back([this] { work(); });
    ::pthread_setname_np(workers_.back().native_handle(), "troupe.blocking");
  }
}

blocking_pool::~blocking_pool() {
  std::deque<std::shared_ptr<detail::pool_job>> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  wake_.notify_all();
  for (auto& job : dropped) {
    job->drop(boost::asio::error::operation_aborted);
  }
  for (auto& worker : workers_) {
    worker.join();
  }
}

std::shared_ptr<blocking_pool> blocking_pool::shared_default() {
  static const auto pool = std::make_shared<blocking_pool>(default_threads);
  return pool;
}

std::size_t blocking_pool::queued() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

bool blocking_pool::submit(std::shared_ptr<detail::pool_job> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || queue_.size() >= max_queued_) {
      return false;
    }
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

void blocking_pool::work() {
  for (;;) {
    std::shared_ptr<detail::pool_job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        return; // stopping, nothing left
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    job->execute();
    --running_;
  }
}

} // namespace troupe::tools
