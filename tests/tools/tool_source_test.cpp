#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "troupe/tools/control_tools.hpp"
#include "troupe/tools/tool_resolver.hpp"

using namespace troupe;
using namespace troupe::tools;
namespace asio = boost::asio;

namespace {

/// A tool that answers with its name and a tag (which source or generation made it).
class tagged_tool final : public tool {
public:
  tagged_tool(std::string name, std::string tag) : tag_(std::move(tag)) {
    descriptor_.name = std::move(name);
    descriptor_.description = "Answers with its tag.";
  }
  const tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  asio::awaitable<tool_result> invoke(std::string, tool_context) const override {
    co_return tool_result{true, tag_, {}, {}};
  }
  const std::string& tag() const noexcept {
    return tag_;
  }

private:
  tool_descriptor descriptor_;
  std::string tag_;
};

std::shared_ptr<const tool> make(std::string name, std::string tag = "t") {
  return std::make_shared<tagged_tool>(std::move(name), std::move(tag));
}

std::string tag_of(const resolved_tool* t) {
  REQUIRE(t);
  return dynamic_cast<const tagged_tool&>(*t->impl).tag();
}

std::vector<std::string> names(const std::vector<resolved_tool>& tools) {
  std::vector<std::string> out;
  for (const auto& t : tools) {
    out.push_back(t.descriptor().name);
  }
  return out;
}

std::shared_ptr<const tool_snapshot> must_resolve(const tool_resolver& r, std::string_view agent,
                                                  std::vector<std::string> list = {}) {
  auto s = r.resolve(agent, list);
  if (!s) {
    FAIL(s.error().message);
  }
  return *s;
}

tool_result run(const tool& t) {
  asio::io_context io;
  tool_result result;
  asio::co_spawn(io, t.invoke("{}", {}), [&result](std::exception_ptr ep, tool_result r) {
    if (ep) {
      std::rethrow_exception(ep);
    }
    result = std::move(r);
  });
  io.run();
  return result;
}

} // namespace

TEST_CASE("a dynamic source counts a version for every change", "[tools][sources]") {
  dynamic_tool_source source("custom");
  CHECK(source.version() == 0);
  CHECK(source.current()->tools.empty());
  CHECK(*source.add(make("alpha")) == 1);
  CHECK(*source.add(make("beta")) == 2);
  CHECK(source.remove("alpha"));
  CHECK(source.version() == 3);
  CHECK_FALSE(source.remove("alpha"));
  CHECK(source.version() == 3);
  const auto now = source.current();
  CHECK(now->source == "custom");
  REQUIRE(now->tools.size() == 1);
  CHECK(now->tools[0]->descriptor().name == "beta");
}

TEST_CASE("a dynamic source refuses a repeated or invalid name and stays as it was",
          "[tools][sources]") {
  dynamic_tool_source source("custom");
  REQUIRE(source.add(make("alpha")));
  auto twice = source.add(make("alpha"));
  REQUIRE_FALSE(twice);
  CHECK_THAT(twice.error().message, Catch::Contains("'custom' has two tools named 'alpha'"));
  auto invalid = source.add(make("no spaces"));
  REQUIRE_FALSE(invalid);
  CHECK_THAT(invalid.error().message, Catch::Contains("'no spaces' is not a valid tool name"));
  auto replaced = source.replace({make("x"), make("x")});
  REQUIRE_FALSE(replaced);
  CHECK(source.version() == 1);
  CHECK(source.current()->tools.size() == 1);
  CHECK(*source.replace({make("x"), make("y")}) == 2);
  CHECK(source.current()->tools.size() == 2);
}

TEST_CASE("a held snapshot keeps its tools while a source adds and removes tools",
          "[tools][sources]") {
  auto source = std::make_shared<dynamic_tool_source>("mcp:files");
  REQUIRE(source->add(make("list_files", "v1")));
  REQUIRE(source->add(make("read_file", "v1")));
  tool_resolver resolver;
  REQUIRE(resolver.add_source(source));

  const auto held = must_resolve(resolver, "helper");
  CHECK(names(held->selected()) == std::vector<std::string>{"list_files", "read_file"});
  CHECK(held->versions() == std::vector<source_version>{{"mcp:files", 2}});

  // The server drops a tool, brings a new one and changes another.
  REQUIRE(source->remove("read_file"));
  REQUIRE(source->add(make("write_file", "v2")));
  REQUIRE(source->remove("list_files"));
  REQUIRE(source->add(make("list_files", "v2")));

  // The held snapshot is as it was …
  CHECK(names(held->selected()) == std::vector<std::string>{"list_files", "read_file"});
  CHECK(tag_of(held->find("list_files")) == "v1");
  CHECK(held->find("write_file") == nullptr);
  CHECK(held->versions()[0].version == 2);
  // … and the next one sees the change.
  const auto next = must_resolve(resolver, "helper");
  CHECK(names(next->selected()) == std::vector<std::string>{"write_file", "list_files"});
  CHECK(tag_of(next->find("list_files")) == "v2");
  CHECK(next->find("read_file") == nullptr);
  CHECK(next->versions()[0].version == 6);
  // Removing the whole source leaves the held snapshots alone too.
  CHECK(resolver.remove_source("mcp:files"));
  CHECK(must_resolve(resolver, "helper")->all().empty());
  CHECK(tag_of(next->find("write_file")) == "v2");
}

TEST_CASE("a tool name offered by two sources is an error naming both", "[tools][sources]") {
  auto builtin = std::make_shared<dynamic_tool_source>("builtin");
  REQUIRE(builtin->add(make("read")));
  REQUIRE(builtin->add(make("grep")));
  auto mcp = std::make_shared<dynamic_tool_source>("mcp:files");
  REQUIRE(mcp->add(make("read")));
  REQUIRE(mcp->add(make("list_files")));
  tool_resolver resolver;
  REQUIRE(resolver.add_source(builtin));
  REQUIRE(resolver.add_source(mcp));

  auto clash = resolver.resolve("helper", {});
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code == errc::conflict);
  CHECK_THAT(clash.error().message,
             Catch::Contains("agent 'helper': the tool 'read' is offered by two sources, "
                             "'builtin' and 'mcp:files'"));
  std::vector<std::string> listed{"read", "list_files"};
  CHECK_FALSE(resolver.resolve("helper", listed));
  // An agent that does not use the name is not affected: names are unique per agent.
  std::vector<std::string> other{"grep", "list_files"};
  auto fine = resolver.resolve("searcher", other);
  REQUIRE(fine);
  CHECK(names((*fine)->selected()) == other);
  // Once the MCP server drops its "read", the agent resolves again.
  REQUIRE(mcp->remove("read"));
  CHECK(resolver.resolve("helper", listed));
}

TEST_CASE("a second source with the same name is refused", "[tools][sources]") {
  tool_resolver resolver;
  REQUIRE(resolver.add_source(std::make_shared<dynamic_tool_source>("custom")));
  auto again = resolver.add_source(std::make_shared<dynamic_tool_source>("custom"));
  REQUIRE_FALSE(again);
  CHECK_THAT(again.error().message, Catch::Contains("'custom' exists already"));
  CHECK(resolver.source_names() == std::vector<std::string>{"custom"});
  CHECK_FALSE(resolver.remove_source("nothing"));
}

TEST_CASE("an agent gets the tools its list names, in source order", "[tools][sources]") {
  auto resolver = make_builtin_tool_resolver();
  auto custom = std::make_shared<dynamic_tool_source>("custom");
  REQUIRE(custom->add(make("weather")));
  REQUIRE(resolver->add_source(custom));

  std::vector<std::string> listed{"weather", "finish", "read"};
  const auto s = must_resolve(*resolver, "helper", listed);
  CHECK(s->agent() == "helper");
  // Source order (builtin first), not list order.
  CHECK(names(s->selected()) == std::vector<std::string>{"read", "finish", "weather"});
  CHECK(s->find("weather")->source == "custom");
  CHECK(s->find("read")->source == "builtin");
  CHECK(s->is_selected("weather"));
  CHECK_FALSE(s->is_selected("exec"));
  // Tools outside the list are still known by name (the run's gate blocks them).
  CHECK(s->find("exec") != nullptr);
  CHECK(s->versions().size() == 2);
}

TEST_CASE("an agent without a tool list gets every tool but sub_agent", "[tools][sources]") {
  auto resolver = make_builtin_tool_resolver();
  const auto s = must_resolve(*resolver, "helper");
  auto selected = names(s->selected());
  CHECK(std::find(selected.begin(), selected.end(), "sub_agent") == selected.end());
  CHECK(std::find(selected.begin(), selected.end(), "code_interpreter") != selected.end());
  CHECK(selected.size() + 1 == s->all().size());
  std::vector<std::string> with_sub{"sub_agent"};
  CHECK(names(must_resolve(*resolver, "delegator", with_sub)->selected()) == with_sub);
}

TEST_CASE("an unknown tool in an agent's list is an error naming the agent", "[tools][sources]") {
  auto resolver = make_builtin_tool_resolver();
  std::vector<std::string> listed{"read", "browser"};
  auto s = resolver->resolve("researcher", listed);
  REQUIRE_FALSE(s);
  CHECK(s.error().code == errc::not_found);
  CHECK(s.error().message == "agent 'researcher': unknown tool 'browser'");
}

TEST_CASE("the built-in source offers the registry's tools and then the control tools",
          "[tools][sources]") {
  auto source = make_builtin_tool_source();
  CHECK(source->name() == "builtin");
  tool_registry registry;
  REQUIRE(register_builtin_tools(registry));
  std::vector<std::string> expected;
  for (const auto& d : registry.catalog().all()) {
    expected.push_back(d.name);
  }
  for (const auto& d : control_tool_descriptors()) {
    expected.push_back(d.name);
  }
  std::vector<std::string> offered;
  for (const auto& t : source->current()->tools) {
    offered.push_back(t->descriptor().name);
  }
  CHECK(offered == expected);
  // Every name an agent may list resolves.
  auto resolver = make_builtin_tool_resolver();
  auto known = known_tool_names();
  CHECK(resolver->resolve("everything", known));
  // The run carries out control tools itself; invoked directly they say so.
  const auto snapshot = must_resolve(*resolver, "helper");
  auto answer = run(*snapshot->find("finish")->impl);
  CHECK_FALSE(answer.ok);
  CHECK_THAT(answer.content, Catch::Contains("carried out by the run"));
  CHECK(snapshot->find("finish")->descriptor().input_schema ==
        finish_tool_descriptor().input_schema);
}

TEST_CASE("a registry source keeps the registry's order and adds the control tools on request",
          "[tools][sources]") {
  tool_registry registry;
  REQUIRE(registry.add(make("zeta")));
  REQUIRE(registry.add(make("alpha")));
  auto plain = make_registry_tool_source("tests", registry, false);
  REQUIRE(plain->current()->tools.size() == 2);
  CHECK(plain->current()->tools[0]->descriptor().name == "zeta");
  auto with_control = make_registry_tool_source("tests", registry, true);
  CHECK(with_control->current()->tools.size() == 2 + control_tool_descriptors().size());
}

TEST_CASE("snapshots taken while a source changes are each consistent", "[tools][sources]") {
  // The source always holds a pair of tools of one generation; a snapshot that mixed two
  // generations, or saw only half a pair, would show that the change was not atomic.
  auto source = std::make_shared<dynamic_tool_source>("flapping");
  REQUIRE(source->replace({make("left", "0"), make("right", "0")}));
  tool_resolver resolver;
  REQUIRE(resolver.add_source(source));
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int generation = 1; generation <= 2000; ++generation) {
      const auto tag = std::to_string(generation);
      (void)source->replace({make("left", tag), make("right", tag)});
    }
    done = true;
  });
  std::size_t snapshots = 0;
  bool consistent = true;
  std::uint64_t last_version = 0;
  bool monotonic = true;
  while (!done || snapshots == 0) {
    auto s = resolver.resolve("watcher", {});
    REQUIRE(s);
    const auto* left = (*s)->find("left");
    const auto* right = (*s)->find("right");
    consistent = consistent && left && right && tag_of(left) == tag_of(right) &&
                 std::to_string((*s)->versions()[0].version - 1) == tag_of(left);
    monotonic = monotonic && (*s)->versions()[0].version >= last_version;
    last_version = (*s)->versions()[0].version;
    ++snapshots;
  }
  writer.join();
  CHECK(consistent);
  CHECK(monotonic);
  CHECK(source->version() == 2001);
  CHECK(snapshots > 0);
}
