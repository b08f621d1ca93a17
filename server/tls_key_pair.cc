#include "server/tls_key_pair.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> MemoryBio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

}  // namespace

absl::Status CheckTlsKeyPair(const std::string& cert_pem, const std::string& cert_path,
                             const std::string& key_pem, const std::string& key_path) {
  auto cert_bio = MemoryBio(cert_pem);
  std::unique_ptr<X509, X509Free> cert(
      cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (cert == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("tls.cert: '", cert_path, "' holds no PEM certificate"));
  }
  auto key_bio = MemoryBio(key_pem);
  // An empty passphrase callback: encrypted keys fail here instead of prompting on a tty.
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      key_bio ? PEM_read_bio_PrivateKey(
                    key_bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr)
              : nullptr);
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("tls.key: '", key_path, "' holds no unencrypted PEM private key"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("tls.key: the private key in '", key_path,
                                                   "' does not match the certificate in '",
                                                   cert_path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace dllm
