#pragma once

// Private to api/: the routes of the web console (console.cpp).

#include "troupe/net/http_server.hpp"

namespace troupe::api {

/// `GET /` (the console's page) and `GET /console/<version>/<file>` (its assets), without
/// a token, with cache headers, an ETag and a Content-Security-Policy.
void add_console_routes(net::router& routes);

} // namespace troupe::api
