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

std::string loggable_path(std::string_view path) {
  constexpr std::size_t kMax = 200;
  std::string out;
  for (std::size_t i = 0; i < path.size() && out.size() < kMax; ++i) {
    if (path.substr(i).starts_with("token=")) {
      out += "token=<redacted>";
      while (i + 1 < path.size() && path[i + 1] != '&' && path[i + 1] != ';') ++i;
      continue;
    }
    const auto c = static_cast<unsigned char>(path[i]);
    out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  if (path.size() > out.size() && out.size() >= kMax) out += "...";
  return out;
}

}  // namespace tw
