#pragma once

/// \file
/// The scripted demo model: when no provider is configured (and no OPENAI_API_KEY is
/// set), `troupe serve` runs a mock-llm in-process with this script so that a first
/// `make run` has a working agent. It is a MOCK and says so in every answer.

#include <string_view>

namespace troupe::actors {

/// The mock-llm script (JSON rules) of the demo model.
std::string_view demo_model_script() noexcept;

/// The model id the demo model reports.
inline constexpr std::string_view demo_model_name = "troupe-demo";

} // namespace troupe::actors
