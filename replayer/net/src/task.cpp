#include "tensorwire/net/task.hpp"

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>
#include <stdexcept>

namespace tw::net {

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace tw::net
