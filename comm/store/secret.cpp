// HMAC challenge for the rendezvous store's shared secret (see secret.h), on OpenSSL.
#include "comm/store/secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "comm/store/protocol.h"
#include "dsx/error.h"

namespace dsx::comm {

std::string store_secret_from_env() {
  const char* value = std::getenv(kStoreSecretEnv);
  return value ? std::string(value) : std::string();
}

std::string make_nonce() {
  std::string nonce(store_protocol::kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    throw Error(ErrorKind::Internal, "store: the system random generator failed (OpenSSL RAND_bytes)");
  }
  return nonce;
}

std::string secret_proof(const std::string& secret, const std::string& nonce) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(nonce.data()), nonce.size(), mac, &len);
  return std::string(reinterpret_cast<char*>(mac), len);
}

bool proofs_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace dsx::comm
