#include "tensorwire/controller/http_router.hpp"

namespace tw {

std::string bearer_token(const HttpRequest& req) {
  const auto auth = req[boost::beast::http::field::authorization];
  if (auth.starts_with("Bearer ")) return std::string(auth.substr(7));
  const std::string_view target = req.target();
  const auto q = target.find("token=");
  if (q != std::string_view::npos && q > 0 && (target[q - 1] == '?' || target[q - 1] == '&')) {
    const auto end = target.find('&', q);
    return std::string(target.substr(q + 6, end == std::string_view::npos ? end : end - q - 6));
  }
  return {};
}

std::string request_path(const HttpRequest& req) {
  const std::string_view target = req.target();
  return std::string(target.substr(0, target.find('?')));
}

}  // namespace tw
