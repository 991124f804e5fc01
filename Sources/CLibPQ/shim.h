// The system's libpq: the PostgreSQL session store for several nodes.
#include <libpq-fe.h>
#include <openssl/ssl.h>

// Bytes OpenSSL has already decrypted for a TLS connection and libpq has not taken: poll() on
// the socket cannot see them, so a wait looks here first (as libpq's own waits do). 0 without TLS.
static inline int navd_pq_ssl_pending(PGconn *conn) {
    SSL *ssl = (SSL *)PQsslStruct(conn, "OpenSSL");
    return ssl ? SSL_pending(ssl) : 0;
}

// PG_DIAG_SQLSTATE is a character-literal macro Swift does not import.
static inline char *navd_pq_sqlstate(const PGresult *result) { return PQresultErrorField(result, 'C'); }
// PG_DIAG_SEVERITY_NONLOCALIZED: "WARNING" whatever the server's language.
static inline char *navd_pq_severity(const PGresult *result) { return PQresultErrorField(result, 'V'); }
// PG_DIAG_SOURCE_FUNCTION: the server function that raised the message (not translated).
static inline char *navd_pq_source_function(const PGresult *result) { return PQresultErrorField(result, 'R'); }
