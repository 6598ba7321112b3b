#pragma once

/// \file
/// Canonical JSON text of a parsed value: object members sorted by key (stable, so a
/// repeated key keeps its order), no white space, numbers as json_writer writes them. Two
/// values that differ only in member order or spacing have the same canonical text; used
/// to compare tool calls (the loop guard) and enum values (the argument validator).

#include <string>

#include <simdjson.h>

namespace troupe {

/// `value` as canonical JSON text.
std::string canonical_json(simdjson::dom::element value);

} // namespace troupe
