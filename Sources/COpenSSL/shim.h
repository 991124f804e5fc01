// The system's OpenSSL libcrypto: message digests for hashing session tokens at rest.
#include <openssl/evp.h>
