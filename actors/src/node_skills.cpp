// The node's skills (issue 19): the skill library loaded at start from the `[skills]`
// folders and added to the tool resolver as source `skills`, the folders watched with
// inotify (an asio stream descriptor on the node's own io, never a blocking read) and
// reloaded on the blocking pool after a change, and the skills facade the API reads.

#include <sys/inotify.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "node_impl.hpp"
#include "troupe/actors/skills_facade.hpp"
#include "troupe/tools/control_tools.hpp"
#include "troupe/tools/memory_tool_descriptors.hpp"
#include "troupe/tools/skill_library.hpp"

namespace troupe::actors {

namespace {

// A burst of changes (an editor's write, a folder copied in) is read once, after this.
constexpr auto reload_delay = std::chrono::milliseconds(150);
constexpr std::uint32_t watch_mask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE |
                                     IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF;

void log_problems(const tools::skill_snapshot& snapshot) {
  std::size_t tools_count = 0;
  for (const auto& s : snapshot.set.skills) {
    tools_count += s.is_tool() && s.runnable ? 1 : 0;
    if (!s.unavailable_reason.empty()) {
      log::warn("skill '{}' ({}) is unavailable: {}", s.name, s.file.string(),
                s.unavailable_reason);
    }
  }
  for (const auto& p : snapshot.set.problems) {
    log::warn("skill not loaded: {}", p.to_string());
  }
  log::info("skills: {} loaded ({} as tools), {} with problems (load {})",
            snapshot.set.skills.size(), tools_count, snapshot.set.problems.size(),
            snapshot.generation);
}

// Watches the skill folders and their skill folders (blocking: on the pool).
void add_watches(int fd, const std::vector<std::filesystem::path>& dirs) {
  for (const auto& dir : dirs) {
    if (::inotify_add_watch(fd, dir.c_str(), watch_mask) < 0) {
      continue; // missing: not watched
    }
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_directory(ec)) {
        (void)::inotify_add_watch(fd, it->path().c_str(), watch_mask);
      }
    }
  }
}

} // namespace

/// Reloads the skills when their folders change.
class skill_watcher : public std::enable_shared_from_this<skill_watcher> {
public:
  skill_watcher(asio::any_io_executor executor, int fd,
                std::shared_ptr<tools::skill_library> library,
                std::shared_ptr<tools::blocking_pool> pool)
      : stream_(executor, fd), timer_(executor), fd_(fd), library_(std::move(library)),
        pool_(std::move(pool)) {}

  void start() {
    // Without this, asio's synchronous read_some waits for data (it emulates a blocking
    // descriptor): the drain below would hold the thread once the events are read.
    boost::system::error_code ec;
    stream_.non_blocking(true, ec);
    arm();
  }

private:
  void arm() {
    stream_.async_wait(asio::posix::stream_descriptor::wait_read,
                       [weak = weak_from_this()](const boost::system::error_code& ec) {
                         if (auto self = weak.lock(); self && !ec) {
                           self->on_readable();
                         }
                       });
  }

  void on_readable() {
    // Drain the events (non-blocking: would_block ends it): what changed matters less
    // than that something did.
    alignas(inotify_event) char buffer[4096];
    boost::system::error_code ec;
    while (!ec && stream_.non_blocking() && stream_.read_some(asio::buffer(buffer), ec) > 0) {
    }
    if (!scheduled_) {
      scheduled_ = true;
      timer_.expires_after(reload_delay);
      timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& e) {
        if (auto self = weak.lock(); self && !e) {
          self->scheduled_ = false;
          asio::co_spawn(self->timer_.get_executor(),
                         reload(self->library_, self->pool_, self->fd_, weak), asio::detached);
        }
      });
    }
    arm();
  }

  // Coroutine parameters by value (stack.md: captures of a coroutine lambda dangle).
  static asio::awaitable<void> reload(std::shared_ptr<tools::skill_library> library,
                                      std::shared_ptr<tools::blocking_pool> pool, int fd,
                                      std::weak_ptr<skill_watcher> watcher) {
    // The job named and the awaitable awaited as a named value: GCC 12 destroys some
    // temporaries of a co_await full-expression twice.
    auto job = [library, fd, watcher](const tools::job_control&) {
      auto snapshot = library->reload();
      // Only while the watcher (and so its descriptor) lives.
      if (auto alive = watcher.lock()) {
        add_watches(fd, library->options().dirs);
      }
      return snapshot;
    };
    auto reloading = pool->run(std::move(job), std::chrono::seconds(30));
    auto done = co_await std::move(reloading);
    if (!done) {
      log::warn("skills: the reload did not run: {}", done.error().message);
      co_return;
    }
    log_problems(**done);
  }

  asio::posix::stream_descriptor stream_;
  asio::steady_timer timer_;
  int fd_;
  bool scheduled_ = false;
  std::shared_ptr<tools::skill_library> library_;
  std::shared_ptr<tools::blocking_pool> pool_;
};

namespace {

class node_skills_facade final : public skills_facade {
public:
  explicit node_skills_facade(std::shared_ptr<tools::skill_library> library)
      : library_(std::move(library)) {}

  skills_view current() const override {
    const auto snapshot = library_->current();
    skills_view out;
    out.generation = snapshot->generation;
    for (const auto& d : library_->options().dirs) {
      out.dirs.push_back(d.string());
    }
    for (const auto& s : snapshot->set.skills) {
      skill_info i;
      i.name = s.name;
      i.description = s.description;
      i.version = s.version;
      i.triggers = s.triggers;
      i.file = s.file.string();
      i.dir = s.dir.string();
      i.body = s.body;
      i.input_schema = s.input_schema;
      i.run_script = s.run_script;
      i.required_bins = s.required_bins;
      i.approval = s.approval;
      i.tool = s.is_tool() && s.runnable;
      i.available = s.unavailable_reason.empty();
      i.reason = s.unavailable_reason;
      out.skills.push_back(std::move(i));
    }
    for (const auto& p : snapshot->set.problems) {
      out.problems.push_back({p.file.string(), p.line, p.message});
    }
    return out;
  }

private:
  std::shared_ptr<tools::skill_library> library_;
};

} // namespace

expected<void> node::impl::start_skills(tools::tool_resolver& resolver) {
  tools::skill_library_options options;
  options.dirs = config.skills.folders(config.data_dir);
  for (const auto& [ext, command] : config.skills.runners) {
    std::vector<std::string> argv;
    std::string_view rest = command;
    while (!rest.empty()) {
      const auto start = rest.find_first_not_of(' ');
      if (start == std::string_view::npos) {
        break;
      }
      rest.remove_prefix(start);
      const auto end = rest.find(' ');
      argv.emplace_back(rest.substr(0, end));
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
    }
    options.runners.by_extension[ext] = std::move(argv);
  }
  const auto env = environment_snapshot();
  const auto path = env.find("PATH");
  options.path = path != env.end() ? path->second : "/usr/local/bin:/usr/bin:/bin";
  options.reserved = tools::known_tool_names();
  for (auto& name : tools::memory_tool_names()) {
    options.reserved.push_back(std::move(name));
  }
  options.reserved.emplace_back("web_search");
  options.reserved.emplace_back("web_fetch");
  options.timeout = config.tools.timeout;
  {
    // The default folder is made so that it can be watched from the start.
    std::error_code ec;
    std::filesystem::create_directories(options.dirs.front(), ec);
  }
  skills = std::make_shared<tools::skill_library>(std::move(options));
  log_problems(*skills->reload());
  if (auto added = resolver.add_source(skills->source()); !added) {
    return added;
  }
  skills_api = std::make_shared<node_skills_facade>(skills);
  const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) {
    log::warn("skills: cannot watch the skill folders (inotify): {}; changes need a restart",
              std::strerror(errno));
    return {};
  }
  add_watches(fd, skills->options().dirs);
  skill_watch = std::make_shared<skill_watcher>(aux_io().get_executor(), fd, skills, blocking);
  skill_watch->start();
  return {};
}

} // namespace troupe::actors
