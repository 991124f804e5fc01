// The system's SQLite (libsqlite3): the embedded session store.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import: bound bytes are copied by SQLite.
static inline sqlite3_destructor_type navd_sqlite_transient(void) { return SQLITE_TRANSIENT; }
