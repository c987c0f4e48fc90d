#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/rand.h>

/* OpenSSL frees its tables in an atexit handler unless told not to on its first initialisation: a
   hash still running on another thread when the process exits would then find them gone. */
static inline int sinki_crypto_init_without_atexit(void) {
    return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}
