#include <string>

#include <catch2/catch.hpp>

#include "troupe/net/mcp/jsonrpc.hpp"
#include "troupe/net/mcp/protocol.hpp"

using namespace troupe::net::mcp;
using troupe::errc;

TEST_CASE("jsonrpc parses a request, a notification, a response and an error response",
          "[net][mcp]") {
  auto request = parse_jsonrpc(R"({"jsonrpc":"2.0","id":7,"method":"ping","params":{}})");
  REQUIRE(request);
  REQUIRE(request->size() == 1);
  CHECK(request->front().kind == message_kind::request);
  CHECK(request->front().id == "7");
  CHECK(request->front().method == "ping");
  CHECK(request->front().params == "{}");

  auto note = parse_jsonrpc(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})");
  REQUIRE(note);
  CHECK(note->front().kind == message_kind::notification);
  CHECK(note->front().id.empty());
  CHECK(note->front().params.empty());

  auto response = parse_jsonrpc(R"({"jsonrpc":"2.0","id":"a-1","result":{"tools":[]}})");
  REQUIRE(response);
  CHECK(response->front().kind == message_kind::response);
  CHECK(response->front().id == R"("a-1")");
  CHECK(response->front().result == R"({"tools":[]})");

  auto failed = parse_jsonrpc(
      R"({"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"no such method","data":[1]}})");
  REQUIRE(failed);
  CHECK(failed->front().kind == message_kind::error_response);
  CHECK(failed->front().error_code == -32601);
  CHECK(failed->front().error_message == "no such method");
  CHECK(failed->front().error_data == "[1]");
}

TEST_CASE("jsonrpc reads a batch in order and names the bad member of one", "[net][mcp]") {
  auto batch =
      parse_jsonrpc(R"([{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":1,"result":1}])");
  REQUIRE(batch);
  REQUIRE(batch->size() == 2);
  CHECK(batch->at(0).method == "a");
  CHECK(batch->at(1).result == "1");

  auto bad = parse_jsonrpc(R"([{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"1.0","method":"b"}])");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("batch[1]"));
  CHECK_FALSE(parse_jsonrpc("[]"));
}

TEST_CASE("jsonrpc refuses text that is not JSON-RPC 2.0, saying what is wrong", "[net][mcp]") {
  auto garbage = parse_jsonrpc("{\"jsonrpc\":\"2.0\",\"id\":1,");
  REQUIRE_FALSE(garbage);
  CHECK(garbage.error().code == errc::parse_error);

  const std::pair<const char*, const char*> cases[] = {
      {R"({"id":1,"method":"x"})", "jsonrpc"},
      {R"({"jsonrpc":"2.0","id":1.5,"method":"x"})", "id"},
      {R"({"jsonrpc":"2.0","id":{},"method":"x"})", "id"},
      {R"({"jsonrpc":"2.0","id":1})", "exactly one"},
      {R"({"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1}})", "exactly one"},
      {R"({"jsonrpc":"2.0","result":1})", "response with an id"},
      {R"({"jsonrpc":"2.0","method":"x","params":3})", "params"},
      {R"({"jsonrpc":"2.0","id":2,"error":{"code":"x"}})", "error.code"},
      {R"("just a string")", "object"},
  };
  for (const auto& [text, says] : cases) {
    auto r = parse_jsonrpc(text);
    INFO(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK_THAT(r.error().message, Catch::Contains(says));
  }
  // An error about a request whose id could not be read carries a null id.
  auto null_id =
      parse_jsonrpc(R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}})");
  REQUIRE(null_id);
  CHECK(null_id->front().id == "null");
}

TEST_CASE("jsonrpc writes messages that read back to the same fields, ids byte for byte",
          "[net][mcp]") {
  for (const std::string id : {"12", R"("req-\"q\"")"}) {
    auto request = parse_jsonrpc(write_request(id, "tools/call", R"({"name":"x"})"));
    REQUIRE(request);
    CHECK(request->front().id == id);
    CHECK(request->front().params == R"({"name":"x"})");
    auto result = parse_jsonrpc(write_result(id, R"({"a":[1,2]})"));
    REQUIRE(result);
    CHECK(result->front().id == id);
    CHECK(result->front().result == R"({"a":[1,2]})");
  }
  auto note = parse_jsonrpc(write_notification("notifications/initialized"));
  REQUIRE(note);
  CHECK(note->front().kind == message_kind::notification);
  auto error = parse_jsonrpc(write_error({}, -32700, "bad \"json\""));
  REQUIRE(error);
  CHECK(error->front().id == "null");
  CHECK(error->front().error_message == "bad \"json\"");
}

TEST_CASE("mcp initialize accepts the versions troupe speaks and names one it does not",
          "[net][mcp]") {
  const auto params = write_initialize_params({"troupe", "1.2.3", true});
  CHECK_THAT(params, Catch::Contains(R"("protocolVersion":"2025-11-25")"));
  CHECK_THAT(params, Catch::Contains(R"("elicitation":{})"));
  CHECK_THAT(params, Catch::Contains(R"("clientInfo":{"name":"troupe","version":"1.2.3"})"));

  for (const auto* version : {"2025-11-25", "2025-06-18", "2025-03-26"}) {
    auto ok = parse_initialize_result(
        std::string(R"({"protocolVersion":")") + version +
        R"(","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"9"}})");
    REQUIRE(ok);
    CHECK(ok->protocol_version == version);
    CHECK(ok->has_tools);
    CHECK(ok->tools_list_changed);
    CHECK(ok->name == "s");
  }
  auto old = parse_initialize_result(R"({"protocolVersion":"2024-11-05","capabilities":{}})");
  REQUIRE_FALSE(old);
  CHECK_THAT(old.error().message, Catch::Contains("2024-11-05"));
  CHECK_FALSE(parse_initialize_result(R"({"capabilities":{}})"));
}

TEST_CASE("mcp tools/list pages read names, schemas, read-only hints and the next cursor",
          "[net][mcp]") {
  auto page = parse_tools_list_result(
      R"({"tools":[{"name":"echo","description":"Echoes","inputSchema":{"type":"object","properties":{"message":{"type":"string"}}},"annotations":{"readOnlyHint":true}},{"name":"bare"}],"nextCursor":"p2"})");
  REQUIRE(page);
  REQUIRE(page->tools.size() == 2);
  CHECK(page->tools[0].name == "echo");
  CHECK(page->tools[0].read_only);
  CHECK_THAT(page->tools[0].input_schema, Catch::Contains("message"));
  CHECK(page->tools[1].input_schema == R"({"type":"object"})");
  CHECK(page->next_cursor == "p2");
  CHECK_FALSE(parse_tools_list_result(R"({"tools":[{"description":"no name"}]})"));
  CHECK_FALSE(parse_tools_list_result(R"({"tools":{}})"));
}

TEST_CASE("mcp tool results become the text a model reads, content type by type", "[net][mcp]") {
  auto outcome = parse_call_result(R"({"content":[
      {"type":"text","text":"Echo: hi"},
      {"type":"image","data":"AAAAAAAA","mimeType":"image/png"},
      {"type":"resource","resource":{"uri":"test://a","mimeType":"text/plain","text":"inside"}},
      {"type":"resource","resource":{"uri":"test://b","mimeType":"application/zip","blob":"AAAA"}},
      {"type":"resource_link","uri":"test://c","name":"c.txt","mimeType":"text/plain"},
      {"type":"audio","data":"AAAA","mimeType":"audio/wav"},
      {"type":"hologram"}]})");
  REQUIRE(outcome);
  CHECK_FALSE(outcome->is_error);
  CHECK(outcome->text ==
        "Echo: hi\n[image image/png, 6 bytes]\n[resource test://a]\ninside\n"
        "[resource test://b (application/zip), 3 bytes]\n"
        "[resource link: c.txt test://c (text/plain)]\n[audio audio/wav, 3 bytes]\n"
        "[hologram content]");

  auto failed = parse_call_result(R"({"content":[{"type":"text","text":"boom"}],"isError":true})");
  REQUIRE(failed);
  CHECK(failed->is_error);
  CHECK(failed->text == "boom");

  auto structured = parse_call_result(R"({"content":[],"structuredContent":{"sum":3}})");
  REQUIRE(structured);
  CHECK(structured->text == R"({"sum":3})");
  CHECK(structured->structured == R"({"sum":3})");
}

TEST_CASE("mcp elicitation is accepted with the schema's defaults or declined by policy",
          "[net][mcp]") {
  const std::string params = R"({"message":"m","requestedSchema":{"type":"object","properties":{
      "name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},
      "score":{"type":"number","default":95.5},"verified":{"type":"boolean","default":true},
      "note":{"type":"string"}},"required":[]}})";
  CHECK(
      answer_elicitation(params, elicitation_policy::accept_defaults) ==
      R"({"action":"accept","content":{"name":"John Doe","age":30,"score":95.5,"verified":true}})");
  CHECK(answer_elicitation(params, elicitation_policy::decline) == R"({"action":"decline"})");

  // A required field without a default cannot be answered by defaults.
  const std::string needs = R"({"message":"m","requestedSchema":{"type":"object",
      "properties":{"email":{"type":"string"}},"required":["email"]}})";
  CHECK(answer_elicitation(needs, elicitation_policy::accept_defaults) ==
        R"({"action":"decline"})");
  // URL mode asks a human to visit a page: declined.
  CHECK(answer_elicitation(R"({"mode":"url","url":"https://x","message":"m","elicitationId":"1"})",
                           elicitation_policy::accept_defaults) == R"({"action":"decline"})");
  CHECK(parse_elicitation_policy("defaults").value() == elicitation_policy::accept_defaults);
  CHECK_FALSE(parse_elicitation_policy("always"));
}

TEST_CASE("mcp example arguments fill required properties and defaults from the schema",
          "[net][mcp]") {
  CHECK(example_arguments(R"({"type":"object","properties":{"a":{"type":"number"},
      "b":{"type":"number"},"c":{"type":"string"}},"required":["a","b"]})") == R"({"a":1,"b":2})");
  CHECK(example_arguments(R"({"type":"object","properties":{"mode":{"enum":["x","y"]},
      "n":{"type":"integer","default":7},"f":{"type":["null","boolean"]}},"required":["mode","f"]})") ==
        R"({"mode":"x","n":7,"f":true})");
  CHECK(example_arguments(R"({"type":"object"})") == "{}");
}
