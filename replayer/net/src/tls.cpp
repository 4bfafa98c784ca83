#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>
#include <stdexcept>

#include "tensorwire/net/control_stream.hpp"

namespace tw::net {

namespace ssl = boost::asio::ssl;

namespace {

// The reason of the first OpenSSL error (the cause; later ones say where it
// surfaced, like "PEM lib"), the queue cleared; `what` the file should hold.
std::string openssl_reason(const char* what) {
  const unsigned long first = ERR_get_error();
  ERR_clear_error();
  if (first == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(first, buf, sizeof buf);
  // "error:0A000086:SSL routines::certificate verify failed": the words only.
  const std::string s = buf;
  const auto colon = s.rfind(':');
  const std::string reason = colon == std::string::npos ? s : s.substr(colon + 1);
  // What OpenSSL 3 says of a file that holds no PEM object of the kind asked for.
  if (reason == "no start line" || reason == "unsupported") return "no PEM " + std::string(what) + " in it";
  return reason;
}

std::unique_ptr<ssl::context> base_context(ssl::context::method m) {
  auto ctx = std::make_unique<ssl::context>(m);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                   ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  return ctx;
}

}  // namespace

std::unique_ptr<ssl::context> tls_server_context(const std::string& cert_file, const std::string& key_file) {
  auto ctx = base_context(ssl::context::tls_server);
  // An encrypted key would make OpenSSL ask on the terminal: refuse it instead.
  SSL_CTX_set_default_passwd_cb(ctx->native_handle(), [](char*, int, int, void*) { return 0; });
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx->native_handle(), cert_file.c_str()) != 1) {
    throw std::runtime_error(cert_file + ": cannot use it as the controller's TLS certificate: " + openssl_reason("certificate"));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx->native_handle(), key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    const std::string why = openssl_reason("private key");
    if (why == "key values mismatch") throw std::runtime_error(key_file + ": is not the key of the certificate in " + cert_file);
    if (why == "bad decrypt" || why == "problems getting password" || why == "interrupted or cancelled") {
      throw std::runtime_error(key_file + ": is encrypted; give the controller an unencrypted key (readable by you only)");
    }
    throw std::runtime_error(key_file + ": cannot use it as the controller's TLS key: " + why);
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    throw std::runtime_error(key_file + ": is not the key of the certificate in " + cert_file);
  }
  return ctx;
}

std::unique_ptr<ssl::context> tls_client_context(const std::string& ca_file) {
  auto ctx = base_context(ssl::context::tls_client);
  ERR_clear_error();
  if (SSL_CTX_load_verify_locations(ctx->native_handle(), ca_file.c_str(), nullptr) != 1) {
    throw std::runtime_error(ca_file + ": cannot read trusted certificates from it: " + openssl_reason("certificate"));
  }
  ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  // A certificate in the file is trusted as it is, also an intermediate or a
  // leaf (a run hands its agents its own chain, which need not end in a root).
  X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(ctx->native_handle()), X509_V_FLAG_PARTIAL_CHAIN);
  return ctx;
}

void set_peer_name(ControlStream& s, const std::string& host) {
  SSL* ssl = s.native_handle();
  if (!ssl) return;
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (!ec) {
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) throw std::runtime_error("cannot check the controller's address " + host);
    return;
  }
  // subjectAltName only, never the subject's common name.
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
  if (SSL_set1_host(ssl, host.c_str()) != 1 || SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    throw std::runtime_error("cannot check the controller's name " + host);
  }
}

std::string tls_error_text(ControlStream& s, const boost::system::error_code& ec) {
  // OpenSSL's reason alone ("certificate verify failed"), not Asio's "(SSL routines)" after it.
  const char* reason = ec.category() == boost::asio::error::get_ssl_category() ? ERR_reason_error_string(static_cast<unsigned long>(ec.value())) : nullptr;
  std::string text = reason ? reason : ec.message();
  if (SSL* ssl = s.native_handle()) {
    const long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) text += " (" + std::string(X509_verify_cert_error_string(v)) + ")";
  }
  return text;
}

}  // namespace tw::net
